"""Drilling down: a tool the agent can call to read in full what a view shows shortened.

The ``hierarchical`` strategy shows older units as a paragraph or one line, each starting with
the ids of the history messages it stands for, ``[recall m12-m14]``
(:mod:`ctxkit.reference.levels`). :func:`recall_tool` gives the tool's declaration in the form
each provider takes and a handler that answers a call with those units, whole, from the
manager's stored history (which never loses anything)::

    tool = recall_tool(manager)
    client.chat.completions.create(..., tools=[tool.openai])      # or tool.responses,
    ...                                                          # tool.anthropic, tool.gemini
    output = await tool.handler(call.function.arguments)          # a JSON string or a dict

The output is JSON text: ``{"recalled": [{"ids": "m12-m14", "messages": [...]}], "unknown":
[...]}``, the messages as they were added, in history order. Ids are message ids as the
markers write them (``m12``, ``m12-m14``) or tool call ids (``call_abc``); each brings back the
whole units it touches, so a call always comes with its results.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ctxkit.messages import copy_message
from ctxkit.reference.levels import parse_ids, unit_ids

if TYPE_CHECKING:
    from ctxkit.reference.manager import ReferenceContextManager

__all__ = ["MAX_UNITS", "RecallTool", "recall_tool"]

NAME = "recall"
DESCRIPTION = (
    "Read earlier parts of this conversation in full. Older messages may be shown shortened, "
    "as a paragraph or one line that starts with [recall m12-m14]; pass those ids (for "
    'example "m12-m14") to get the original messages back, tool calls with their results.'
)
_IDS = "Ids from [recall ...] markers, such as m12 or m12-m14, or tool call ids."
MAX_UNITS = 8
"""Most units one call brings back; the rest are named in ``left_out`` to ask for again."""


def _parameters(*, upper: bool, closed: bool) -> dict[str, Any]:
    def kind(name: str) -> str:
        return name.upper() if upper else name

    schema: dict[str, Any] = {
        "type": kind("object"),
        "properties": {
            "ids": {"type": kind("array"), "items": {"type": kind("string")}, "description": _IDS}
        },
        "required": ["ids"],
    }
    if closed:
        schema["additionalProperties"] = False
    return schema


@dataclass(frozen=True, slots=True)
class RecallTool:
    """The drill-down tool: its declaration per provider and its handler."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON Schema of the arguments: ``{"ids": [str, ...]}``."""
    openai: dict[str, Any]
    """An entry of Chat Completions ``tools`` (strict function calling)."""
    responses: dict[str, Any]
    """An entry of Responses API ``tools``."""
    anthropic: dict[str, Any]
    """An entry of Anthropic Messages ``tools``."""
    gemini: dict[str, Any]
    """An entry of Gemini ``tools``: ``{"functionDeclarations": [...]}`` (schema types in
    Gemini's upper case, no ``additionalProperties``, which it does not take)."""
    handler: Callable[[Mapping[str, Any] | str], Awaitable[str]]
    """``async (arguments) -> str``: the tool's output for a call's arguments, as OpenAI
    sends them (a JSON string) or as Anthropic and Gemini do (a dict)."""
    recall: Callable[[Sequence[str]], dict[str, Any]]
    """The same answer as data, for a caller that is not a model."""


def recall_tool(manager: ReferenceContextManager) -> RecallTool:
    """The drill-down tool over ``manager``'s stored history (see the module docstring)."""
    parameters = _parameters(upper=False, closed=True)
    declaration = {"name": NAME, "description": DESCRIPTION}

    def recall(ids: Sequence[str]) -> dict[str, Any]:
        return _recall(manager, ids)

    async def handler(arguments: Mapping[str, Any] | str) -> str:
        ids, problem = _ids_of(arguments)
        answer = {"error": problem} if problem else recall(ids)
        return json.dumps(answer, ensure_ascii=False, default=repr)

    return RecallTool(
        name=NAME,
        description=DESCRIPTION,
        parameters=parameters,
        openai={
            "type": "function",
            "function": {**declaration, "parameters": parameters, "strict": True},
        },
        responses={"type": "function", **declaration, "parameters": parameters, "strict": True},
        anthropic={**declaration, "input_schema": parameters},
        gemini={
            "functionDeclarations": [
                {**declaration, "parameters": _parameters(upper=True, closed=False)}
            ]
        },
        handler=handler,
        recall=recall,
    )


def _ids_of(arguments: Mapping[str, Any] | str) -> tuple[list[str], str]:
    """The ids a call asks for, or what is wrong with its arguments."""
    if isinstance(arguments, str | bytes):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return [], 'arguments are not JSON; send {"ids": ["m12-m14"]}'
    if not isinstance(arguments, Mapping):
        return [], 'arguments must be an object: {"ids": ["m12-m14"]}'
    ids = arguments.get("ids")
    if isinstance(ids, str):
        ids = [ids]
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        return [], 'ids must be a non-empty list of strings, such as {"ids": ["m12-m14"]}'
    return ids, ""


def _recall(manager: ReferenceContextManager, ids: Sequence[str]) -> dict[str, Any]:
    history = manager._history  # the stored history itself: nothing to copy or regroup
    units = history.units
    found: list[int] = []
    unknown: list[str] = []
    for wanted in ids:
        touched = _units_named(history, units, wanted)
        if not touched:
            unknown.append(wanted)
        found.extend(u for u in touched if u not in found)
    found.sort()
    recalled = [
        {
            "ids": unit_ids(units[u].start, units[u].stop),
            "messages": [copy_message(m) for m in history.messages[units[u].start : units[u].stop]],
        }
        for u in found[:MAX_UNITS]
    ]
    answer: dict[str, Any] = {"recalled": recalled, "unknown": unknown}
    if len(found) > MAX_UNITS:
        answer["left_out"] = [unit_ids(units[u].start, units[u].stop) for u in found[MAX_UNITS:]]
    return answer


def _units_named(history: Any, units: Sequence[Any], wanted: str) -> list[int]:
    """The indices of the units a message range or a tool call id names."""
    size = len(history.messages)
    span = parse_ids(wanted)
    if span is None:  # a tool call id: the unit that calls or answers it
        for index in range(size - 1, -1, -1):
            info = history.infos[index]
            if wanted in info.call_ids or wanted in info.result_ids:
                span = (index, index + 1)
                break
        else:
            return []
    start, stop = span
    if start >= size:
        return []
    stop = min(stop, size)
    first = bisect_right(units, start, key=attrgetter("start")) - 1
    last = bisect_right(units, stop - 1, key=attrgetter("start")) - 1
    return list(range(max(first, 0), last + 1))
