"""The one place that knows the two message shapes: validation, calls, results, units.

Two shapes are real and may be mixed in one history:

* OpenAI: an assistant message with ``tool_calls`` (each ``{"id", "type": "function",
  "function": {"name", "arguments"}}``) answered by ``{"role": "tool", "tool_call_id"}``
  messages that follow it at once, in any order.
* Anthropic blocks: an assistant ``content`` list with ``{"type": "tool_use", "id", "name",
  "input"}`` blocks, answered by the very next message, a user message whose ``content`` list
  holds a ``{"type": "tool_result", "tool_use_id"}`` block for every call.

A *unit* is a calling assistant message together with the messages that answer it, or any
other message alone. Views are planned in whole units, so a call and its result can never be
separated.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ROLES",
    "InvalidMessage",
    "MessageInfo",
    "Unit",
    "UnitGrouper",
    "copy_message",
    "group_units",
    "inspect_message",
    "is_flat",
    "results_of",
    "text_of",
    "tool_calls_of",
    "validate_history",
]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
"""Roles a message may carry. ``developer`` is OpenAI's newer name for ``system``."""

MAX_NESTING = 64
"""How deep lists and dicts may nest inside a message (the message itself is depth 1). Real
messages nest a handful of levels; far deeper ones are refused up front, because copying,
storing and counting them would otherwise fail later, on every view."""

Shape = Literal["openai", "anthropic"]
UnitStatus = Literal["complete", "pending", "broken"]


class InvalidMessage(ValueError):
    """A message does not follow either shape. Names the message index and the field."""

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
    """Ids this message calls (``tool_calls`` or ``tool_use`` blocks), in order."""
    result_ids: tuple[str, ...] = ()
    """Ids this message answers (``role: tool`` or ``tool_result`` blocks), in order."""
    shape: Shape | None = None
    """Shape of the calls or results, None when the message has neither."""
    user_turn: bool = False
    """A user message with words of its own, not only tool results."""
    error_result: bool = False
    """A result explicitly flagged ``is_error``."""
    size: int = dataclasses.field(default=0, compare=False)
    """UTF-8 bytes of the message's keys and strings: what ``max_message_bytes`` limits, and
    what decides whether counting its tokens leaves the event loop."""


def _describe(value: Any) -> str:
    return type(value).__name__ if value is not None else "None"


def _require_id(value: Any, *, index: int | None, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidMessage(
            f"must be a non-empty string, got {_describe(value)}", index=index, field=field
        )
    return value


def _check_blocks(
    role: str, blocks: list[Any], *, index: int | None
) -> tuple[list[str], list[str], bool, bool]:
    """Validate a content list; returns (tool_use ids, tool_result ids, has_text, error)."""
    calls: list[str] = []
    results: list[str] = []
    has_text = False
    error = False
    for position, block in enumerate(blocks):
        field = f"content[{position}]"
        if not isinstance(block, dict):
            raise InvalidMessage(
                f"a content block must be a dict, got {_describe(block)}", index=index, field=field
            )
        kind = block.get("type")
        if not isinstance(kind, str):
            raise InvalidMessage("a content block needs a string 'type'", index=index, field=field)
        if kind == "tool_use":
            if role != "assistant":
                raise InvalidMessage(
                    f"tool_use blocks belong in assistant messages, not {role}",
                    index=index,
                    field=field,
                )
            calls.append(_require_id(block.get("id"), index=index, field=f"{field}.id"))
            if not isinstance(block.get("name"), str):
                raise InvalidMessage(
                    "a tool_use block needs a string 'name'", index=index, field=f"{field}.name"
                )
        elif kind == "tool_result":
            if role != "user":
                raise InvalidMessage(
                    f"tool_result blocks belong in user messages, not {role}",
                    index=index,
                    field=field,
                )
            results.append(
                _require_id(block.get("tool_use_id"), index=index, field=f"{field}.tool_use_id")
            )
            inner = block.get("content")
            if inner is not None and not isinstance(inner, str | list):
                raise InvalidMessage(
                    f"must be a string or a list of blocks, got {_describe(inner)}",
                    index=index,
                    field=f"{field}.content",
                )
            error = error or block.get("is_error") is True
        elif kind == "text":
            if not isinstance(block.get("text"), str):
                raise InvalidMessage(
                    "a text block needs a string 'text'", index=index, field=f"{field}.text"
                )
            has_text = has_text or bool(block["text"].strip())
        else:
            has_text = True  # images, documents and the like are the user's own words too
    return calls, results, has_text, error


def _check_tool_calls(value: Any, *, index: int | None) -> list[str]:
    if not isinstance(value, list):
        raise InvalidMessage(
            f"must be a list, got {_describe(value)}", index=index, field="tool_calls"
        )
    ids = []
    for position, call in enumerate(value):
        field = f"tool_calls[{position}]"
        if not isinstance(call, dict):
            raise InvalidMessage(
                f"a tool call must be a dict, got {_describe(call)}", index=index, field=field
            )
        ids.append(_require_id(call.get("id"), index=index, field=f"{field}.id"))
        function = call.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise InvalidMessage(
                "a tool call needs a 'function' dict with a string 'name'",
                index=index,
                field=f"{field}.function",
            )
    return ids


def _no_duplicates(ids: list[str], *, index: int | None, field: str) -> None:
    seen: set[str] = set()
    for call_id in ids:
        if call_id in seen:
            raise InvalidMessage(
                f"duplicate call id {call_id!r} in one message", index=index, field=field
            )
        seen.add(call_id)


def _check_structure(message: Mapping[str, Any], *, index: int | None) -> int:
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


def inspect_message(message: Any, index: int | None = None) -> MessageInfo:
    """Validate one message on its own and return what ctxkit needs to know about it.

    Raises :class:`InvalidMessage` naming the index and the field at fault. Checks that need
    the rest of the history (a call id used twice) live in :func:`validate_history`.
    """
    if not isinstance(message, Mapping):
        raise InvalidMessage(f"must be a dict, got {_describe(message)}", index=index)
    size = _check_structure(message, index=index)
    if "role" not in message:
        raise InvalidMessage("missing", index=index, field="role")
    role = message["role"]
    if role not in ROLES:
        raise InvalidMessage(
            f"unknown role {role!r}; expected one of {', '.join(sorted(ROLES))}",
            index=index,
            field="role",
        )
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise InvalidMessage(
            f"must be a string, a list of blocks or None, got {_describe(content)}",
            index=index,
            field="content",
        )
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise InvalidMessage(f"must be a string, got {_describe(name)}", index=index, field="name")

    calls: list[str] = []
    results: list[str] = []
    has_text = isinstance(content, str) and bool(content.strip())
    error = False
    shape: Shape | None = None
    if isinstance(content, list):
        calls, results, has_text, error = _check_blocks(role, content, index=index)
        if calls or results:
            shape = "anthropic"
    if "tool_calls" in message and message["tool_calls"] is not None:
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
        openai_calls = _check_tool_calls(message["tool_calls"], index=index)
        if openai_calls:
            calls, shape = openai_calls, "openai"
    if role == "tool":
        results = [_require_id(message.get("tool_call_id"), index=index, field="tool_call_id")]
        shape = "openai"
    _no_duplicates(calls, index=index, field="tool_calls" if shape == "openai" else "content")
    _no_duplicates(results, index=index, field="content")
    return MessageInfo(
        role=role,
        call_ids=tuple(calls),
        result_ids=tuple(results),
        shape=shape,
        user_turn=role == "user" and has_text,
        error_result=error,
        size=size,
    )


def validate_history(messages: Sequence[Any]) -> list[MessageInfo]:
    """Validate a whole history: each message, and no call id used twice.

    Returns one :class:`MessageInfo` per message. Raises :class:`InvalidMessage` for the first
    fault, naming its index.
    """
    infos = []
    first_use: dict[str, int] = {}
    for index, message in enumerate(messages):
        info = inspect_message(message, index)
        check_new_call_ids(info, index, first_use)
        for call_id in info.call_ids:
            first_use[call_id] = index
        infos.append(info)
    return infos


def check_new_call_ids(info: MessageInfo, index: int, first_use: Mapping[str, int]) -> None:
    """Raise if a call id of this message was already used by an earlier one."""
    for call_id in info.call_ids:
        if call_id in first_use:
            raise InvalidMessage(
                f"duplicate call id {call_id!r}, first used by message[{first_use[call_id]}]",
                index=index,
                field="tool_calls" if info.shape == "openai" else "content",
            )


def copy_message(value: Any) -> Any:
    """A deep copy of a JSON-like message, several times faster than ``copy.deepcopy``.

    Dicts and lists are copied; strings, numbers and other leaves are shared, which is safe
    for immutable values. Mutable leaves of other types fall back to ``copy.deepcopy``.
    """
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _LEAVES else copy_message(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _LEAVES else copy_message(v) for v in value]
    if kind in _LEAVES:
        return value
    return copy.deepcopy(value)


_LEAVES = frozenset({str, int, float, bool, bytes, type(None)})


def is_flat(message: dict[str, Any]) -> bool:
    """Every value is a leaf, so ``dict.copy`` already is a deep copy of the message."""
    return all(type(value) in _LEAVES for value in message.values())


def tool_calls_of(message: Mapping[str, Any]) -> tuple[str, ...]:
    """The ids a message calls, in order, in either shape."""
    return inspect_message(message).call_ids


def results_of(message: Mapping[str, Any]) -> tuple[str, ...]:
    """The call ids a message answers, in order, in either shape."""
    return inspect_message(message).result_ids


def text_of(message: Mapping[str, Any]) -> str:
    """The plain text a message carries (content, text blocks, tool outputs), newline-joined."""
    return "\n".join(_texts(message.get("content")))


def _texts(content: Any) -> Iterable[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if isinstance(block.get("text"), str):
                yield block["text"]
            elif block.get("type") == "tool_result":
                yield from _texts(block.get("content"))


class Unit:
    """Messages ``[start, stop)`` of a history that must stay together in any view.

    ``complete``: a plain message, or a call with every result right after it.
    ``pending``: a call at the end of the history still waiting for results.
    ``broken``: a call whose results never came in place, or a result with no call before it;
    such units are never valid in a view.
    """

    __slots__ = ("_open", "shape", "start", "status", "stop")

    def __init__(self, start: int, stop: int, status: UnitStatus) -> None:
        self.start = start
        self.stop = stop
        self.status: UnitStatus = status
        self.shape: Shape | None = None
        self._open: set[str] = set()

    def __repr__(self) -> str:
        return f"Unit({self.start}, {self.stop}, {self.status!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unit) and (self.start, self.stop, self.status) == (
            other.start,
            other.stop,
            other.status,
        )

    def __len__(self) -> int:
        return self.stop - self.start


class UnitGrouper:
    """Groups a history into units one message at a time, so a store never regroups."""

    def __init__(self) -> None:
        self.units: list[Unit] = []

    def push(self, info: MessageInfo) -> None:
        """Account for the next message of the history."""
        index = self.units[-1].stop if self.units else 0
        last = self.units[-1] if self.units else None
        if last is not None and last.status == "pending":
            if self._answers(last, info):
                last.stop = index + 1
                last._open.difference_update(info.result_ids)
                if not last._open:
                    last.status = "complete"
                return
            last.status = "broken"
        if info.call_ids:
            unit = Unit(index, index + 1, "pending")
            unit.shape = info.shape
            unit._open = set(info.call_ids)
            self.units.append(unit)
        elif info.result_ids:
            self.units.append(Unit(index, index + 1, "broken"))
        else:
            self.units.append(Unit(index, index + 1, "complete"))

    @staticmethod
    def _answers(unit: Unit, info: MessageInfo) -> bool:
        if not info.result_ids or info.shape != unit.shape:
            return False
        if unit.shape == "anthropic":
            # The very next message must answer every call, and nothing else.
            return set(info.result_ids) == unit._open and len(unit) == 1
        return info.role == "tool" and set(info.result_ids) <= unit._open


def group_units(infos: Iterable[MessageInfo]) -> list[Unit]:
    """Group a validated history into units (see :class:`Unit`)."""
    grouper = UnitGrouper()
    for info in infos:
        grouper.push(info)
    return grouper.units
