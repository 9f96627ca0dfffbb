"""Amazon Bedrock Converse messages (rules: ``conformance/rules/bedrock.json``).

A message is ``{"role": "user" | "assistant", "content": [...]}`` whose blocks are keyed by
what they hold, with no ``type``: ``{"text"}``, ``{"toolUse": {"toolUseId", "name",
"input"}}``, ``{"toolResult": {"toolUseId", "content", "status"}}``, ``{"reasoningContent"}``,
images, documents, cache points. An assistant message's ``toolUse`` blocks are answered by
the next message, a user message with a ``toolResult`` block for each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ctxkit.shapes.base import (
    InvalidMessage,
    MessageInfo,
    describe,
    no_duplicates,
    require_id,
    require_role,
    require_str,
)

__all__ = ["claims", "read", "texts"]

ROLES = frozenset({"user", "assistant"})


def claims(message: Mapping[str, Any]) -> bool:
    """Converse blocks: a non-empty content list of dicts none of which has a ``type``."""
    content = message.get("content")
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(block, Mapping) and "type" not in block for block in content)
    )


def read(message: Mapping[str, Any], index: int | None, size: int) -> MessageInfo:
    role = message.get("role")
    require_role(role, ROLES, " for a Converse message", index=index)
    calls: list[str] = []
    results: list[str] = []
    has_text = False
    error = False
    for position, block in enumerate(message["content"]):
        where = f"content[{position}]"
        if "toolUse" in block:
            if role != "assistant":
                raise InvalidMessage(
                    "toolUse blocks belong in assistant messages", index=index, field=where
                )
            use = _dict(block["toolUse"], "toolUse", index=index, field=where)
            calls.append(
                require_id(use.get("toolUseId"), index=index, field=f"{where}.toolUse.toolUseId")
            )
            require_str(
                use.get("name"), "a toolUse block", index=index, field=f"{where}.toolUse.name"
            )
        elif "toolResult" in block:
            if role != "user":
                raise InvalidMessage(
                    "toolResult blocks belong in user messages", index=index, field=where
                )
            result = _dict(block["toolResult"], "toolResult", index=index, field=where)
            results.append(
                require_id(
                    result.get("toolUseId"), index=index, field=f"{where}.toolResult.toolUseId"
                )
            )
            error = error or result.get("status") == "error"
        elif "text" in block:
            text = require_str(block["text"], "a text block", index=index, field=f"{where}.text")
            has_text = has_text or bool(text.strip())
        elif "reasoningContent" not in block and "cachePoint" not in block:
            has_text = True
    no_duplicates(calls, index=index, field="content")
    no_duplicates(results, index=index, field="content")
    return MessageInfo(
        role=role,
        call_ids=tuple(calls),
        result_ids=tuple(results),
        shape="bedrock" if calls or results else None,
        user_turn=role == "user" and has_text,
        error_result=error,
        size=size,
        form="bedrock",
    )


def _dict(value: Any, what: str, *, index: int | None, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidMessage(
            f"{what} must be a dict, got {describe(value)}", index=index, field=field
        )
    return value


def texts(message: Mapping[str, Any]) -> Iterable[str]:
    for block in message.get("content") or ():
        if not isinstance(block, Mapping):
            continue
        if isinstance(block.get("text"), str):
            yield block["text"]
        result = block.get("toolResult")
        if isinstance(result, Mapping):
            for inner in result.get("content") or ():
                if isinstance(inner, Mapping) and isinstance(inner.get("text"), str):
                    yield inner["text"]
