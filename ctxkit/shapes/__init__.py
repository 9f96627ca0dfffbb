"""The one place that knows every message shape: which shape a message is written in, its
validation, its calls and results, and grouping a history into units.

Six shapes, one module each, mixed in one history where a provider would take them:

* ``openai`` (:mod:`~ctxkit.shapes.chat`): Chat Completions ``tool_calls`` answered by
  ``role: tool`` messages;
* ``anthropic`` (:mod:`~ctxkit.shapes.anthropic`): ``tool_use`` / ``tool_result`` blocks,
  thinking, server tools;
* ``responses`` (:mod:`~ctxkit.shapes.responses`): Responses API items, ``function_call`` /
  ``function_call_output`` by ``call_id``, ``reasoning``;
* ``gemini`` (:mod:`~ctxkit.shapes.gemini`): ``functionCall`` / ``functionResponse`` parts;
* ``bedrock`` (:mod:`~ctxkit.shapes.bedrock`): Converse ``toolUse`` / ``toolResult`` blocks;
* ``genai`` (:mod:`~ctxkit.shapes.genai`): OpenTelemetry GenAI ``tool_call`` /
  ``tool_call_response`` parts.

A *unit* is a calling message together with the messages that answer it (and a Responses
``reasoning`` item with the item it preceded), or any other message alone. Views are planned in
whole units, so a call and its result can never be separated. The rules each provider enforces
are data, in the top-level ``conformance/rules/`` folder (:mod:`ctxkit.shapes.rules`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from ctxkit.shapes import anthropic, bedrock, chat, gemini, genai, responses
from ctxkit.shapes.base import (
    MAX_NESTING,
    InvalidMessage,
    MessageInfo,
    Shape,
    check_structure,
    describe,
)
from ctxkit.shapes.rules import rule_set

__all__ = [
    "MAX_NESTING",
    "PAIRING",
    "SHAPES",
    "InvalidMessage",
    "MessageInfo",
    "Shape",
    "Unit",
    "UnitGrouper",
    "check_new_call_ids",
    "form_of",
    "group_units",
    "inspect_message",
    "text_message",
    "text_of",
    "validate_history",
]

SHAPES: tuple[Shape, ...] = ("openai", "anthropic", "responses", "gemini", "bedrock", "genai")

PAIRING: Mapping[str, Literal["next", "following"]] = {
    shape: rule_set(shape).pairing for shape in SHAPES
}
"""How each shape's results answer a call, from its rule set. ``next``: the very next message
answers every call of the calling message, and nothing else (Anthropic, Bedrock, Gemini).
``following``: the messages right after the call each answer some of its calls, until all are
answered (Chat Completions ``tool`` messages, Responses ``*_output`` items, GenAI ``tool``
messages)."""

UnitStatus = Literal["complete", "pending", "broken"]


def _reader(message: Mapping[str, Any]) -> Any:
    """The module that reads this message (Chat Completions and Anthropic share one frame)."""
    if responses.claims(message):
        return responses
    if "parts" in message:
        return genai if genai.claims(message) else gemini
    if bedrock.claims(message):
        return bedrock
    return chat


def inspect_message(
    message: Any, index: int | None = None, *, shapes: Sequence[Shape] | None = None
) -> MessageInfo:
    """Validate one message on its own, in whichever shape it is written, and return what
    ctxkit needs to know about it. ``shapes``: the only shapes the caller takes (an adapter
    over a library that knows fewer); a message written in another is refused.

    Raises :class:`InvalidMessage` naming the index and the field at fault. Checks that need
    the rest of the history (a call id used twice) live in :func:`validate_history`.
    """
    if not isinstance(message, Mapping):
        raise InvalidMessage(f"must be a dict, got {describe(message)}", index=index)
    size = check_structure(message, index=index)
    if "parts" in message and not isinstance(message["parts"], list):
        raise InvalidMessage(
            f"must be a list of parts, got {describe(message['parts'])}", index=index, field="parts"
        )
    info = _reader(message).read(message, index, size)
    if shapes is not None and not _fits(info, message, shapes):
        raise InvalidMessage(
            f"is written in the {info.form} shape, and only {', '.join(shapes)} messages are "
            "taken here (ctxkit.shapes.convert writes a history in another shape)",
            index=index,
        )
    return info


_PLAIN_TEXT_FORMS = frozenset({"openai", "anthropic", "responses"})
"""Shapes where ``{"role", "content": "text"}`` is a message as it is (a Responses
``EasyInputMessage``, an Anthropic message with string content)."""


def _fits(info: MessageInfo, message: Mapping[str, Any], shapes: Sequence[Shape]) -> bool:
    if info.form in shapes:
        return True
    plain = (
        info.form == "openai"
        and not (info.call_ids or info.result_ids)
        and isinstance(message.get("content"), str)
    )
    return plain and any(shape in _PLAIN_TEXT_FORMS for shape in shapes)


def form_of(message: Mapping[str, Any]) -> Shape:
    """The shape a valid message is written in."""
    return inspect_message(message).form


def validate_history(
    messages: Sequence[Any], *, shapes: Sequence[Shape] | None = None
) -> list[MessageInfo]:
    """Validate a whole history: each message (in ``shapes`` only, if given), and no call id
    used twice.

    Returns one :class:`MessageInfo` per message. Raises :class:`InvalidMessage` for the first
    fault, naming its index.
    """
    infos = []
    first_use: dict[str, int] = {}
    for index, message in enumerate(messages):
        info = inspect_message(message, index, shapes=shapes)
        check_new_call_ids(info, index, first_use)
        if not info.positional:
            for call_id in info.call_ids:
                first_use[call_id] = index
        infos.append(info)
    return infos


def check_new_call_ids(info: MessageInfo, index: int, first_use: Mapping[str, int]) -> None:
    """Raise if a call id of this message was already used by an earlier one. Positional
    keys (``name#position``) are not ids and may repeat."""
    if info.positional:
        return
    for call_id in info.call_ids:
        if call_id in first_use:
            raise InvalidMessage(
                f"duplicate call id {call_id!r}, first used by message[{first_use[call_id]}]",
                index=index,
                field="tool_calls" if info.shape == "openai" else "content",
            )


def text_message(form: Shape, role: str, text: str) -> dict[str, Any]:
    """A message of plain text written the way ``form`` writes text, for what ctxkit adds
    to a view (a summary): a Gemini history gets a content with parts, a Bedrock one text
    blocks, a GenAI one parts; the others take ``{"role", "content": text}`` as it is."""
    if form == "gemini":
        return {"role": "model" if role == "assistant" else "user", "parts": [{"text": text}]}
    if form == "bedrock":
        return {"role": "assistant" if role == "assistant" else "user", "content": [{"text": text}]}
    if form == "genai":
        return {"role": role, "parts": [{"type": "text", "content": text}]}
    return {"role": role, "content": text}


def text_of(message: Mapping[str, Any]) -> str:
    """The plain text a message carries (content, text parts, tool outputs), newline-joined."""
    return "\n".join(_texts(message))


def _texts(message: Mapping[str, Any]) -> Iterable[str]:
    reader = _reader(message) if isinstance(message, Mapping) else chat
    if reader in (chat, anthropic):
        return anthropic.texts(message.get("content"))
    return reader.texts(message)


class Unit:
    """Messages ``[start, stop)`` of a history that must stay together in any view.

    ``complete``: a plain message, or a call with every result right after it.
    ``pending``: a call at the end of the history still waiting for results (or a reasoning
    item still waiting for the item it precedes).
    ``broken``: a call whose results never came in place, or a result with no call before it;
    such units are never valid in a view.
    """

    __slots__ = ("_answered", "_open", "shape", "start", "status", "stop")

    def __init__(self, start: int, stop: int, status: UnitStatus) -> None:
        self.start = start
        self.stop = stop
        self.status: UnitStatus = status
        self.shape: Shape | None = None
        self._open: set[str] = set()
        self._answered = False

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
            if last.shape is None:
                # A reasoning item waiting for the item it preceded: that item joins its unit.
                last.stop = index + 1
                self._open_calls(last, info)
                return
            if self._joins(last, info):
                last.stop = index + 1
                last._open.update(info.call_ids)
                return
            if self._answers(last, info):
                last.stop = index + 1
                last._answered = True
                last._open.difference_update(info.result_ids)
                if not last._open:
                    last.status = "complete"
                return
            last.status = "broken"
        unit = Unit(index, index + 1, "complete")
        self.units.append(unit)
        if info.leads:
            unit.status = "pending"
        elif info.result_ids:
            unit.status = "broken"
        else:
            self._open_calls(unit, info)

    @staticmethod
    def _open_calls(unit: Unit, info: MessageInfo) -> None:
        if info.leads:
            return  # a second reasoning item: still waiting
        if info.call_ids:
            unit.status = "pending"
            unit.shape = info.shape
            unit._open = set(info.call_ids)
        elif info.result_ids:
            unit.status = "broken"
        else:
            unit.status = "complete"

    @staticmethod
    def _joins(unit: Unit, info: MessageInfo) -> bool:
        """Parallel calls as separate items (Responses): a call joins the calls before it
        while none has been answered yet."""
        return (
            unit.shape == "responses"
            and info.shape == "responses"
            and bool(info.call_ids)
            and not unit._answered
        )

    @staticmethod
    def _answers(unit: Unit, info: MessageInfo) -> bool:
        if not info.result_ids or info.call_ids or info.shape != unit.shape:
            return False
        if PAIRING[unit.shape or "openai"] == "next":
            # The very next message must answer every call, and nothing else.
            return set(info.result_ids) == unit._open and not unit._answered
        return info.role == "tool" and set(info.result_ids) <= unit._open


def group_units(infos: Iterable[MessageInfo]) -> list[Unit]:
    """Group a validated history into units (see :class:`Unit`)."""
    grouper = UnitGrouper()
    for info in infos:
        grouper.push(info)
    return grouper.units
