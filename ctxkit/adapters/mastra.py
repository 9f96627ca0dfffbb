"""Upstream bug reports for Mastra's ``TokenLimiter`` (``@mastra/core/processors``): the
counterexample's history as the provider prompt the limiter trims, in a Node script that needs
nothing but ``@mastra/core``.

The fault: ``TokenLimiter`` counts each tool call whose input is an object 12 tokens below the
text of that input (and each JSON tool result likewise), so a message of tool calls can count
below zero and a trimmed prompt holds more than the limit. The script asks the limiter the same
question twice for every limit, once with each tool call's input as an object (as agents send
it) and once as its JSON text; it exits 1 at the first limit where the object form keeps more
messages, which the limiter itself says do not fit once their inputs are counted as text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ctxkit.adapters.blocks import is_tool_result, is_tool_use, text_of
from ctxkit.adapters.reports import history_before_view

__all__ = ["bug_report", "prompt"]


def _arguments(raw: Any) -> Any:
    try:
        return json.loads(raw or "{}")
    except (TypeError, ValueError):
        return raw


def _message(message: dict[str, Any], names: dict[str, str]) -> list[dict[str, Any]]:
    role, content = message["role"], message.get("content")
    if role in ("system", "developer"):
        return [{"role": "system", "content": text_of(content)}]
    if role == "tool":
        call = message.get("tool_call_id")
        output = {"type": "text", "value": text_of(content)}
        part = {"type": "tool-result", "toolCallId": call, "toolName": names.get(call, "")}
        return [{"role": "tool", "content": [{**part, "output": output}]}]
    if role == "assistant":
        parts: list[dict[str, Any]] = []
        for block in content if isinstance(content, list) else []:
            if is_tool_use(block):
                names[block.get("id")] = block.get("name", "")
                parts.append(
                    {
                        "type": "tool-call",
                        "toolCallId": block.get("id"),
                        "toolName": block.get("name", ""),
                        "input": block.get("input") or {},
                    }
                )
            else:
                parts.append({"type": "text", "text": text_of([block])})
        if isinstance(content, str) and content:
            parts.append({"type": "text", "text": content})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            names[call.get("id")] = function.get("name", "")
            parts.append(
                {
                    "type": "tool-call",
                    "toolCallId": call.get("id"),
                    "toolName": function.get("name", ""),
                    "input": _arguments(function.get("arguments")),
                }
            )
        return [{"role": "assistant", "content": parts}]
    blocks = content if isinstance(content, list) else []
    results = [
        {
            "type": "tool-result",
            "toolCallId": b.get("tool_use_id"),
            "toolName": names.get(b.get("tool_use_id"), ""),
            "output": {
                "type": "error-text" if b.get("is_error") else "text",
                "value": text_of(b.get("content", "")),
            },
        }
        for b in blocks
        if is_tool_result(b)
    ]
    rest = [{"type": "text", "text": text_of([b])} for b in blocks if not is_tool_result(b)]
    found = [{"role": "tool", "content": results}] if results else []
    if rest:
        found.append({"role": "user", "content": rest})
    if not isinstance(content, list):
        found.append({"role": "user", "content": [{"type": "text", "text": text_of(content)}]})
    return found


def prompt(history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The provider prompt the adapter gives ``TokenLimiter`` for a JSON history (without the
    tags that bring each kept message back to its history message)."""
    names: dict[str, str] = {}
    return [part for message in history for part in _message(message, names)]


def _has_object_input(messages: Sequence[dict[str, Any]]) -> bool:
    return any(
        part.get("type") == "tool-call" and not isinstance(part.get("input"), str)
        for m in messages
        if m["role"] == "assistant"
        for part in m["content"]
    )


_SCRIPT = """\
import {{ TripWire }} from "@mastra/core/agent";
import {{ TokenLimiter }} from "@mastra/core/processors";

const messages = [
{messages}
];
// The same prompt with each tool call's input given as its JSON text.
function inputAsText(part) {{
  if (part.type !== "tool-call" || typeof part.input === "string") return part;
  return {{ ...part, input: JSON.stringify(part.input) }};
}}
const asText = messages.map((m) =>
  m.role === "assistant" ? {{ ...m, content: m.content.map(inputAsText) }} : m,
);

async function kept(prompt, limit) {{
  try {{
    const answer = await new TokenLimiter({{ limit }}).processLLMRequest({{ prompt }});
    return (answer?.prompt ?? prompt).length;
  }} catch (error) {{
    if (error instanceof TripWire) return 0; // nothing fits this limit
    throw error;
  }}
}}

for (let limit = 1; limit <= 1_000_000; limit++) {{
  const objects = await kept(messages, limit);
  const texts = await kept(asText, limit);
  if (objects > texts) {{
    console.error(
      `limit ${{limit}}: TokenLimiter keeps ${{objects}} of ${{messages.length}} messages, ` +
        `but only ${{texts}} when each tool call's input is given as its JSON text: ` +
        "an input object is counted below its own text",
    );
    process.exit(1);
  }}
  if (texts === messages.length) break;
}}
console.log("no limit shows the fault");
"""


def bug_report(property_id: str, cell: Any) -> str:
    """The tool-call discount behind a budget failure; empty for other failures, and for a
    budget failure whose history has no tool call with an object input (an estimate's error,
    not this fault)."""
    if property_id != "budget" or not getattr(cell, "trace", None):
        return ""
    history, _ = history_before_view(cell.trace)
    messages = prompt(history)
    if not _has_object_input(messages):
        return ""
    listed = "\n".join(f"  {json.dumps(m, ensure_ascii=False)}," for m in messages)
    return f"""### `TokenLimiter` counts a tool call's input below its own text

`TokenLimiterProcessor.countPromptMessageTokens` subtracts 12 tokens for each tool call whose
input is an object (and for each JSON tool result), after counting that input's JSON text. A
message of tool calls therefore counts as less than its text, and with a few calls as less than
zero (30 calls with input `{{}}` count as about -295 tokens in @mastra/core 1.71.0), so
`processLLMRequest` keeps a prompt larger than its `limit`: the messages it keeps do not fit
that limit, by its own count, once the inputs are given as the same JSON text. Found by
ctxkit's conformance suite; this reproducer uses @mastra/core only (`npm install @mastra/core`,
then `node reproduce.mjs`).

```js
{_SCRIPT.format(messages=listed)}```
"""
