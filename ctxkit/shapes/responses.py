"""OpenAI Responses API input items (rules: ``conformance/rules/responses.json``).

``input`` is a list of items: messages (``role``, ``content`` as a string or a list of
``input_text`` / ``output_text`` / ``input_image`` / ``input_file`` / ``refusal`` parts, with or
without ``"type": "message"``), client tool calls (``function_call``, ``custom_tool_call``,
``computer_call``, ``shell_call``, ``apply_patch_call``, ``program``) each answered by its
``*_output`` item with the same ``call_id``, ``reasoning`` items that must travel with the item
they preceded, and items the server runs and answers itself (``web_search_call``,
``file_search_call``, ``mcp_call`` ...), which are plain assistant output here.

This is the shape of the OpenAI Agents SDK's session items as well.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ctxkit.shapes.base import (
    InvalidMessage,
    MessageInfo,
    describe,
    require_id,
    require_role,
    require_str,
)

__all__ = ["CALLS", "MESSAGE_PARTS", "claims", "read", "texts"]

CALLS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "shell_call",
        "apply_patch_call",
        "program",
    }
)
"""Item types the client answers with an item of the same name plus ``_output``."""

OUTPUTS = frozenset(f"{kind}_output" for kind in CALLS)

MESSAGE_PARTS = frozenset({"input_text", "output_text", "input_image", "input_file", "refusal"})

ROLES = frozenset({"system", "developer", "user", "assistant"})


def claims(message: Mapping[str, Any]) -> bool:
    """The message is a Responses item: it has a ``type``, or its parts are Responses parts."""
    if "type" in message:
        return True
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(part, Mapping)
        and isinstance(kind := part.get("type"), str)  # a list there is unhashable
        and kind in MESSAGE_PARTS
        for part in content
    )


def read(item: Mapping[str, Any], index: int | None, size: int) -> MessageInfo:
    kind = item.get("type", "message")
    if not isinstance(kind, str):
        raise InvalidMessage(f"must be a string, got {describe(kind)}", index=index, field="type")
    if kind == "message":
        return _message(item, index, size)
    if kind in CALLS:
        call_id = require_id(item.get("call_id"), index=index, field="call_id")
        if kind in ("function_call", "custom_tool_call"):
            require_str(item.get("name"), f"a {kind} item", index=index, field="name")
        return MessageInfo(
            role="assistant", call_ids=(call_id,), shape="responses", size=size, form="responses"
        )
    if kind in OUTPUTS:
        call_id = require_id(item.get("call_id"), index=index, field="call_id")
        output = item.get("output")
        if kind in ("function_call_output", "custom_tool_call_output") and not isinstance(
            output, str | list
        ):
            raise InvalidMessage(
                f"must be a string or a list of parts, got {describe(output)}",
                index=index,
                field="output",
            )
        return MessageInfo(
            role="tool", result_ids=(call_id,), shape="responses", size=size, form="responses"
        )
    if kind == "reasoning":
        if "id" in item:
            require_id(item.get("id"), index=index, field="id")
        return MessageInfo(role="assistant", size=size, form="responses", leads=True)
    if kind == "item_reference":
        require_id(item.get("id"), index=index, field="id")
        return MessageInfo(role="assistant", size=size, form="responses")
    # Items the server runs and answers itself (web_search_call, mcp_call, compaction ...).
    return MessageInfo(role="assistant", size=size, form="responses")


def _message(item: Mapping[str, Any], index: int | None, size: int) -> MessageInfo:
    if "role" not in item:
        raise InvalidMessage("missing", index=index, field="role")
    role = item["role"]
    require_role(role, ROLES, " for a message item", index=index)
    content = item.get("content")
    if isinstance(content, str):
        has_text = bool(content.strip())
    elif isinstance(content, list):
        has_text = False
        for position, part in enumerate(content):
            where = f"content[{position}]"
            if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
                raise InvalidMessage(
                    "a content part must be a dict with a string 'type'", index=index, field=where
                )
            if part["type"] in ("input_text", "output_text"):
                text = require_str(
                    part.get("text"), f"an {part['type']} part", index=index, field=f"{where}.text"
                )
                has_text = has_text or bool(text.strip())
            elif part["type"] != "refusal":
                has_text = True
    else:
        raise InvalidMessage(
            f"must be a string or a list of parts, got {describe(content)}",
            index=index,
            field="content",
        )
    return MessageInfo(
        role=role, user_turn=role == "user" and has_text, size=size, form="responses"
    )


def texts(item: Mapping[str, Any]) -> Iterable[str]:
    """The plain texts an item carries: message text, tool output, reasoning summary."""
    content = item.get("content")
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                yield part["text"]
    output = item.get("output")
    if isinstance(output, str):
        yield output
    elif isinstance(output, list):
        for part in output:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                yield part["text"]
    for part in item.get("summary") or () if item.get("type") == "reasoning" else ():
        if isinstance(part, Mapping) and isinstance(part.get("text"), str):
            yield part["text"]
