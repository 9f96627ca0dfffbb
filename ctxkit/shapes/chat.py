"""OpenAI Chat Completions messages (rules: ``conformance/rules/openai.json``), and the role
and content frame Anthropic messages share with them.

An assistant message with ``tool_calls`` (each ``{"id", "type": "function", "function":
{"name", "arguments"}}``) is answered by ``{"role": "tool", "tool_call_id"}`` messages that
follow it at once, in any order. A ``content`` list is read by :mod:`ctxkit.shapes.anthropic`
(text parts are common to both; tool blocks make the message Anthropic's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxkit.shapes import anthropic
from ctxkit.shapes.base import (
    InvalidMessage,
    MessageInfo,
    Shape,
    describe,
    no_duplicates,
    require_id,
    require_role,
)

__all__ = ["ROLES", "read"]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
"""Roles a message may carry. ``developer`` is OpenAI's newer name for ``system``."""


def read(message: Mapping[str, Any], index: int | None, size: int) -> MessageInfo:
    if "role" not in message:
        raise InvalidMessage("missing", index=index, field="role")
    role = message["role"]
    require_role(role, ROLES, "", index=index)
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise InvalidMessage(
            f"must be a string, a list of blocks or None, got {describe(content)}",
            index=index,
            field="content",
        )
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise InvalidMessage(f"must be a string, got {describe(name)}", index=index, field="name")

    calls: list[str] = []
    results: list[str] = []
    has_text = isinstance(content, str) and bool(content.strip())
    error = False
    shape: Shape | None = None
    form: Shape = "openai"
    if isinstance(content, list):
        blocks = anthropic.read_blocks(role, content, index=index)
        calls, results, has_text, error = (
            blocks.calls,
            blocks.results,
            blocks.has_text,
            blocks.error,
        )
        if blocks.typed:
            form = "anthropic"
        if calls or results:
            shape = "anthropic"
    if message.get("tool_calls") is not None:
        if role != "assistant":
            raise InvalidMessage(
                f"only assistant messages make tool calls, not {role}",
                index=index,
                field="tool_calls",
            )
        if calls and message["tool_calls"]:
            raise InvalidMessage(
                "mixes OpenAI tool_calls with Anthropic tool_use blocks; use one shape",
                index=index,
                field="tool_calls",
            )
        openai_calls = _tool_calls(message["tool_calls"], index=index)
        if openai_calls:
            calls, shape, form = openai_calls, "openai", "openai"
    if role == "tool":
        results = [require_id(message.get("tool_call_id"), index=index, field="tool_call_id")]
        shape = form = "openai"
    no_duplicates(calls, index=index, field="tool_calls" if shape == "openai" else "content")
    no_duplicates(results, index=index, field="content")
    return MessageInfo(
        role=role,
        call_ids=tuple(calls),
        result_ids=tuple(results),
        shape=shape,
        user_turn=role == "user" and has_text,
        error_result=error,
        size=size,
        form=form,
    )


def _tool_calls(value: Any, *, index: int | None) -> list[str]:
    if not isinstance(value, list):
        raise InvalidMessage(
            f"must be a list, got {describe(value)}", index=index, field="tool_calls"
        )
    ids = []
    for position, call in enumerate(value):
        where = f"tool_calls[{position}]"
        if not isinstance(call, dict):
            raise InvalidMessage(
                f"a tool call must be a dict, got {describe(call)}", index=index, field=where
            )
        ids.append(require_id(call.get("id"), index=index, field=f"{where}.id"))
        function = call.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise InvalidMessage(
                "a tool call needs a 'function' dict with a string 'name'",
                index=index,
                field=f"{where}.function",
            )
    return ids
