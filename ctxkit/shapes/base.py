"""What every shape module shares: the facts ctxkit keeps about a message, and its errors.

A shape module reads one message written in its provider's form and answers with a
:class:`MessageInfo`, in words every other part of ctxkit understands: a role among
``system``, ``developer``, ``user``, ``assistant`` and ``tool`` (a Gemini ``model`` turn is an
``assistant`` one, a Responses ``function_call_output`` item a ``tool`` one), the call ids it
makes and the call ids it answers. How answers must follow a call is each shape's rule set
(:mod:`ctxkit.shapes.rules`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "MAX_NESTING",
    "InvalidMessage",
    "MessageInfo",
    "Shape",
    "check_structure",
    "describe",
    "no_duplicates",
    "pairing_key",
    "require_id",
    "require_role",
    "require_str",
]

Shape = Literal["openai", "anthropic", "responses", "gemini", "bedrock", "genai"]

MAX_NESTING = 64
"""How deep lists and dicts may nest inside a message (the message itself is depth 1). Real
messages nest a handful of levels; far deeper ones are refused up front, because copying,
storing and counting them would otherwise fail later, on every view."""


class InvalidMessage(ValueError):
    """A message does not follow any shape. Names the message index and the field."""

    def __init__(self, problem: str, *, index: int | None = None, field: str | None = None):
        self.problem = problem
        self.index = index
        self.field = field
        where = "message" if index is None else f"message[{index}]"
        if field:
            where += f".{field}"
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True, slots=True)
class MessageInfo:
    """What the rest of ctxkit needs to know about one valid message."""

    role: str
    call_ids: tuple[str, ...] = ()
    """Ids this message calls, in order. Where a shape allows calls without ids (Gemini,
    GenAI), a call is known by ``name#position`` instead (see :attr:`positional`)."""
    result_ids: tuple[str, ...] = ()
    """Ids this message answers, in order, known the same way as the calls."""
    shape: Shape | None = None
    """Shape of the calls or results, None when the message has neither."""
    user_turn: bool = False
    """A user message with words of its own, not only tool results."""
    error_result: bool = False
    """A result explicitly flagged as an error."""
    size: int = dataclasses.field(default=0, compare=False)
    """UTF-8 bytes of the message's keys and strings: what ``max_message_bytes`` limits, and
    what decides whether counting its tokens leaves the event loop."""
    form: Shape = "openai"
    """The shape the message is written in, tool traffic or not (a plain Chat Completions
    message is ``openai``)."""
    leads: bool = False
    """The message must travel with the one after it (a Responses ``reasoning`` item and the
    item it preceded): no view may keep one without the other."""
    positional: bool = False
    """Some ids are ``name#position`` keys, not ids the provider saw: they pair a call with
    its answer in the next message, and are not unique across a history."""


def describe(value: Any) -> str:
    return type(value).__name__ if value is not None else "None"


def require_id(value: Any, *, index: int | None, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidMessage(
            f"must be a non-empty string, got {describe(value)}", index=index, field=field
        )
    return value


def require_str(value: Any, what: str, *, index: int | None, field: str) -> str:
    if not isinstance(value, str):
        raise InvalidMessage(
            f"{what} needs a string, got {describe(value)}", index=index, field=field
        )
    return value


def require_role(role: Any, roles: frozenset[str], what: str, *, index: int | None) -> str:
    """The role, if ``roles`` has it; else an error naming what the shape expects."""
    if not isinstance(role, str) or role not in roles:  # a list or a dict is no role either
        expected = ", ".join(sorted(roles))
        shown = repr(role) if isinstance(role, str) else f"of type {describe(role)}"
        raise InvalidMessage(
            f"unknown role {shown}{what}; expected one of {expected}", index=index, field="role"
        )
    return role


def pairing_key(body: Mapping[str, Any], position: int) -> tuple[str, bool]:
    """A call's or result's pairing key, and whether it is positional: its id where it has
    one, else ``name#position`` (Gemini and GenAI parts may carry no id)."""
    call_id = body.get("id")
    if isinstance(call_id, str) and call_id:
        return call_id, False
    return f"{body.get('name')}#{position}", True


def no_duplicates(ids: list[str] | tuple[str, ...], *, index: int | None, field: str) -> None:
    seen: set[str] = set()
    for call_id in ids:
        if call_id in seen:
            raise InvalidMessage(
                f"duplicate call id {call_id!r} in one message", index=index, field=field
            )
        seen.add(call_id)


def check_structure(message: Mapping[str, Any], *, index: int | None) -> int:
    """Every key a string (JSON is how messages are stored) and nesting within
    :data:`MAX_NESTING`, checked with a stack, not recursion, so any depth gets an answer.
    Returns the UTF-8 bytes of the message's keys and strings (:attr:`MessageInfo.size`)."""
    size = 0
    stack: list[tuple[Any, int, str]] = [(message, 1, "")]
    while stack:
        value, depth, where = stack.pop()
        if depth > MAX_NESTING:
            raise InvalidMessage(
                f"nests deeper than {MAX_NESTING} levels of lists and dicts",
                index=index,
                field=where.lstrip(".") or None,
            )
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidMessage(
                        f"has a key that is not a string: {key!r} ({type(key).__name__}); "
                        "messages are stored as JSON",
                        index=index,
                        field=where.lstrip(".") or None,
                    )
                size += _utf8_size(key)
                if isinstance(item, str):
                    size += _utf8_size(item)
                elif isinstance(item, Mapping | list | tuple):
                    stack.append((item, depth + 1, f"{where}.{key}" if depth < 4 else where))
        elif isinstance(value, list | tuple):
            for position, item in enumerate(value):
                if isinstance(item, str):
                    size += _utf8_size(item)
                elif isinstance(item, Mapping | list | tuple):
                    stack.append((item, depth + 1, f"{where}[{position}]" if depth < 4 else where))
    return size


def _utf8_size(text: str) -> int:
    # isascii() is a flag lookup in CPython: most texts are sized without encoding them.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
