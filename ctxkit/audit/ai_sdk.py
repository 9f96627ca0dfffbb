"""The Vercel AI SDK's own telemetry (``experimental_telemetry``): each model call is an
``ai.generateText.doGenerate`` or ``ai.streamText.doStream`` span (``ai.operationId``) whose
``ai.prompt.messages`` is the provider-level prompt, as JSON text, when inputs are recorded.

That prompt is read as Chat Completions messages, which carry what the audit checks: a system
message's text; a user's text (a file stands as a note of its media type); an assistant's text
and its ``tool-call`` parts as ``tool_calls``; a tool message's ``tool-result`` parts as one
``tool`` message each. Reasoning parts, and calls the provider ran itself
(``providerExecuted``, answered in the same message), have no Chat Completions form and are
left out; so are tool approval responses. AI SDK 4 wrote ``args`` and ``result`` where 5 and
later write ``input`` and ``output``: both are read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["CALL_OPERATIONS", "CONTENT_HINT", "PROMPT", "SCOPE", "chat_messages"]

PROMPT = "ai.prompt.messages"
SCOPE = "ai"
"""The instrumentation scope of the AI SDK's spans."""
CONTENT_HINT = (
    "pass experimental_telemetry: { isEnabled: true, recordInputs: true } to each call "
    "(the Vercel AI SDK)"
)
CALL_OPERATIONS = frozenset(
    {
        "ai.generateText.doGenerate",
        "ai.streamText.doStream",
        "ai.generateObject.doGenerate",
        "ai.streamObject.doStream",
    }
)
"""``ai.operationId`` of the spans that are one call to a model (the others wrap a whole
multi-step run)."""


def chat_messages(prompt: Any) -> list[dict[str, Any]]:
    """The prompt of ``ai.prompt.messages`` (parsed) as Chat Completions messages.

    Raises ``ValueError`` when it is not a list of messages.
    """
    if not isinstance(prompt, list) or not all(isinstance(m, Mapping) for m in prompt):
        raise ValueError(f"{PROMPT} is not a JSON list of messages")
    messages: list[dict[str, Any]] = []
    for message in prompt:
        role, content = message.get("role"), message.get("content")
        parts = [p for p in content if isinstance(p, Mapping)] if isinstance(content, list) else []
        if role == "tool":
            messages.extend(
                {"role": "tool", "tool_call_id": str(p.get("toolCallId")), "content": _output(p)}
                for p in parts
                if p.get("type") == "tool-result"
            )
            continue
        text = content if isinstance(content, str) else "".join(_text(p) for p in parts)
        calls = [
            {
                "id": str(p.get("toolCallId")),
                "type": "function",
                "function": {"name": str(p.get("toolName", "")), "arguments": _arguments(p)},
            }
            for p in parts
            if p.get("type") == "tool-call" and not p.get("providerExecuted")
        ]
        if role == "assistant" and calls:
            messages.append({"role": "assistant", "content": text or None, "tool_calls": calls})
        else:
            messages.append({"role": str(role or "user"), "content": text})
    return messages


def _text(part: Mapping[str, Any]) -> str:
    if part.get("type") == "text":
        return str(part.get("text", ""))
    if part.get("type") == "file":
        return f"[{part.get('mediaType') or part.get('mimeType') or 'file'}]"
    return ""


def _arguments(part: Mapping[str, Any]) -> str:
    value = part.get("input", part.get("args"))
    return value if isinstance(value, str) else json.dumps(value)


def _output(part: Mapping[str, Any]) -> str:
    """A tool result's text: ``output`` (``{"type": "text" | "json" | ..., "value"}``) in AI
    SDK 5 and later, ``result`` in 4."""
    output = part.get("output", part.get("result"))
    if isinstance(output, Mapping) and "type" in output and "value" in output:
        output = output["value"]
    return output if isinstance(output, str) else json.dumps(output)
