"""Anthropic Messages content blocks (rules: ``conformance/rules/anthropic.json``).

An assistant message's ``tool_use`` blocks are answered by the very next message, a user
message whose ``tool_result`` blocks answer every call and come first in it. Thinking
(``thinking`` with its ``signature``, ``redacted_thinking`` with its ``data``) lives at the start
of an assistant message and must come back unchanged while its tool calls are being answered.
Server tools (``server_tool_use``, ``mcp_tool_use``) are answered *inside* the same assistant
message by a result block (``web_search_tool_result``, ``code_execution_tool_result``,
``mcp_tool_result``, ...) naming the call's id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxkit.shapes.base import InvalidMessage, describe, require_id, require_str

__all__ = ["THINKING", "Blocks", "is_server_result", "read_blocks", "texts"]

THINKING = frozenset({"thinking", "redacted_thinking"})
SERVER_CALLS = frozenset({"server_tool_use", "mcp_tool_use"})


def is_server_result(kind: str) -> bool:
    """A server tool's result block: ``*_tool_result`` other than the client ``tool_result``."""
    return kind.endswith("_tool_result") and kind != "tool_result"


@dataclass
class Blocks:
    """What a content list holds."""

    calls: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    has_text: bool = False
    error: bool = False
    typed: bool = False
    """Some block is Anthropic-only (tool traffic, thinking, server tools)."""


def read_blocks(role: str, blocks: list[Any], *, index: int | None) -> Blocks:
    """Validate a content list of typed blocks (Anthropic, or Chat Completions parts)."""
    found = Blocks()
    server_calls: set[str] = set()
    seen_other = False
    for position, block in enumerate(blocks):
        where = f"content[{position}]"
        if not isinstance(block, dict):
            raise InvalidMessage(
                f"a content block must be a dict, got {describe(block)}", index=index, field=where
            )
        kind = block.get("type")
        if not isinstance(kind, str):
            raise InvalidMessage("a content block needs a string 'type'", index=index, field=where)
        if kind == "tool_use":
            _only_in(role, "assistant", kind, index=index, field=where)
            found.calls.append(require_id(block.get("id"), index=index, field=f"{where}.id"))
            require_str(block.get("name"), "a tool_use block", index=index, field=f"{where}.name")
            found.typed = seen_other = True
        elif kind == "tool_result":
            _only_in(role, "user", kind, index=index, field=where)
            if seen_other:
                raise InvalidMessage(
                    "tool_result blocks must come first in their message, before any other "
                    "block (the provider refuses the request otherwise)",
                    index=index,
                    field=where,
                )
            call_id = require_id(
                block.get("tool_use_id"), index=index, field=f"{where}.tool_use_id"
            )
            found.results.append(call_id)
            inner = block.get("content")
            if inner is not None and not isinstance(inner, str | list):
                raise InvalidMessage(
                    f"must be a string or a list of blocks, got {describe(inner)}",
                    index=index,
                    field=f"{where}.content",
                )
            found.error = found.error or block.get("is_error") is True
            found.typed = True
        elif kind in THINKING:
            _only_in(role, "assistant", kind, index=index, field=where)
            if seen_other:
                raise InvalidMessage(
                    f"{kind} blocks must come first in an assistant message",
                    index=index,
                    field=where,
                )
            key = "thinking" if kind == "thinking" else "data"
            require_str(block.get(key), f"a {kind} block", index=index, field=f"{where}.{key}")
            found.typed = True
        elif kind in SERVER_CALLS:
            _only_in(role, "assistant", kind, index=index, field=where)
            server_calls.add(require_id(block.get("id"), index=index, field=f"{where}.id"))
            found.typed = seen_other = True
        elif is_server_result(kind):
            _only_in(role, "assistant", kind, index=index, field=where)
            call_id = require_id(
                block.get("tool_use_id"), index=index, field=f"{where}.tool_use_id"
            )
            if call_id not in server_calls:
                raise InvalidMessage(
                    f"a {kind} block answers {call_id!r}, but no server_tool_use before it in "
                    "the same message calls it; server tool results live in their call's message",
                    index=index,
                    field=where,
                )
            found.typed = seen_other = True
        elif kind == "text":
            text = require_str(
                block.get("text"), "a text block", index=index, field=f"{where}.text"
            )
            found.has_text = found.has_text or bool(text.strip())
            seen_other = True
        else:
            found.has_text = True  # images, documents and the like are the user's own words too
            seen_other = True
    return found


def _only_in(role: str, wanted: str, kind: str, *, index: int | None, field: str) -> None:
    if role != wanted:
        raise InvalidMessage(
            f"{kind} blocks belong in {wanted} messages, not {role}", index=index, field=field
        )


def texts(content: Any) -> Iterable[str]:
    """The plain texts of a content list: text blocks, and tool results' texts."""
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for block in content:
            if not isinstance(block, Mapping):
                continue
            if isinstance(block.get("text"), str):
                yield block["text"]
            elif block.get("type") == "tool_result":
                yield from texts(block.get("content"))
