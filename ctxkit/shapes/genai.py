"""OpenTelemetry GenAI messages, as ``gen_ai.input.messages`` records them (rules:
``conformance/rules/genai.json``).

A message is ``{"role", "parts": [...]}`` with typed parts: ``text`` (``content``),
``tool_call`` (``id``, ``name``, ``arguments``), ``tool_call_response`` (``id``,
``response``), ``reasoning``, ``blob``, ``file``, ``uri``. An assistant message's
``tool_call`` parts are answered by the ``tool`` messages right after it. The ids are the
provider's where it had them; a call without one is known by name and position.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ctxkit.shapes.base import (
    InvalidMessage,
    MessageInfo,
    describe,
    no_duplicates,
    pairing_key,
    require_role,
    require_str,
)

__all__ = ["ROLES", "claims", "read", "texts"]

ROLES = frozenset({"system", "user", "assistant", "tool"})


def claims(message: Mapping[str, Any]) -> bool:
    """GenAI parts: a ``parts`` list whose parts carry a ``type``."""
    parts = message.get("parts")
    return isinstance(parts, list) and any(
        isinstance(part, Mapping) and "type" in part for part in parts
    )


def read(message: Mapping[str, Any], index: int | None, size: int) -> MessageInfo:
    role = message.get("role")
    require_role(role, ROLES, " for a GenAI message", index=index)
    calls: list[str] = []
    results: list[str] = []
    positional = False
    has_text = False
    for position, part in enumerate(message["parts"]):
        where = f"parts[{position}]"
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise InvalidMessage(
                f"a part must be a dict with a string 'type', got {describe(part)}",
                index=index,
                field=where,
            )
        kind = part["type"]
        if kind == "tool_call":
            if role != "assistant":
                raise InvalidMessage(
                    "tool_call parts belong in assistant messages", index=index, field=where
                )
            require_str(part.get("name"), "a tool_call part", index=index, field=f"{where}.name")
            name, fixed = pairing_key(part, len(calls))
            calls.append(name)
            positional = positional or fixed
        elif kind == "tool_call_response":
            if role not in ("tool", "user"):
                raise InvalidMessage(
                    "tool_call_response parts belong in tool messages", index=index, field=where
                )
            name, fixed = pairing_key(part, len(results))
            results.append(name)
            positional = positional or fixed
        elif kind == "text":
            text = require_str(
                part.get("content"), "a text part", index=index, field=f"{where}.content"
            )
            has_text = has_text or bool(text.strip())
        elif kind != "reasoning":
            has_text = True
    no_duplicates(calls, index=index, field="parts")
    no_duplicates(results, index=index, field="parts")
    return MessageInfo(
        role="tool" if results and role == "user" and not has_text else role,
        call_ids=tuple(calls),
        result_ids=tuple(results),
        shape="genai" if calls or results else None,
        user_turn=role == "user" and has_text,
        size=size,
        form="genai",
        positional=positional,
    )


def texts(message: Mapping[str, Any]) -> Iterable[str]:
    for part in message.get("parts") or ():
        if not isinstance(part, Mapping):
            continue
        if part.get("type") in ("text", "reasoning") and isinstance(part.get("content"), str):
            yield part["content"]
        elif part.get("type") == "tool_call_response":
            answer = part.get("response", part.get("result"))
            if answer is not None:
                yield answer if isinstance(answer, str) else str(answer)
