"""Messages as ctxkit sees them: the shapes (from :mod:`ctxkit.shapes`, one module per
provider shape), and the small operations every part of ctxkit uses on them.

A *unit* is a calling message together with the messages that answer it, or any other
message alone. Views are planned in whole units, so a call and its result can never be
separated. See :mod:`ctxkit.shapes` for the six shapes and the rules each provider enforces.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from ctxkit.shapes import (
    MAX_NESTING,
    SHAPES,
    InvalidMessage,
    MessageInfo,
    Shape,
    Unit,
    UnitGrouper,
    check_new_call_ids,
    form_of,
    group_units,
    inspect_message,
    text_message,
    text_of,
    validate_history,
)
from ctxkit.shapes.chat import ROLES

__all__ = [
    "MAX_NESTING",
    "ROLES",
    "SHAPES",
    "InvalidMessage",
    "MessageInfo",
    "Shape",
    "Unit",
    "UnitGrouper",
    "check_new_call_ids",
    "copier_of",
    "copy_message",
    "form_of",
    "group_units",
    "inspect_message",
    "is_flat",
    "results_of",
    "text_message",
    "text_of",
    "tool_calls_of",
    "validate_history",
]


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


class _Irregular(Exception):
    """A value :func:`copier_of` does not model (a tuple, an object): copied generically."""


_COPIERS: dict[Any, Callable[[Any], Any]] = {}
_COPIERS_KEPT = 4_096


def copier_of(message: Any) -> Callable[[Any], Any]:
    """A function that deep-copies this message, and any message built the same way (the
    same nested keys and list lengths), with each level copied in C.

    A view copies every message it returns, every time; most of a history is built alike (a
    Gemini model turn with one call, a Bedrock result message), so copiers are made once per
    skeleton and shared. Values it does not model fall back to :func:`copy_message`.
    """
    try:
        skeleton = _skeleton(message)
    except _Irregular:
        return copy_message
    copier = _COPIERS.get(skeleton)
    if copier is None:
        copier = _build(skeleton) or copy_message
        if len(_COPIERS) < _COPIERS_KEPT:
            _COPIERS[skeleton] = copier
    return copier


def _skeleton(value: Any) -> Any:
    kind = type(value)
    if kind in _LEAVES:
        return None
    if kind is dict:
        return ("d", tuple((k, _skeleton(v)) for k, v in value.items() if type(v) not in _LEAVES))
    if kind is list:
        return ("l", tuple(_skeleton(v) for v in value))
    raise _Irregular


def _build(skeleton: Any) -> Callable[[Any], Any] | None:
    if skeleton is None:
        return None
    kind, parts = skeleton
    if kind == "d":
        subs = [(key, _build(part)) for key, part in parts]
        if not subs:
            return dict.copy

        def copy_dict(value: dict[str, Any], subs: Any = subs) -> dict[str, Any]:
            copied = value.copy()
            for key, copy in subs:
                copied[key] = copy(value[key])
            return copied

        return copy_dict
    items = [_build(part) for part in parts]
    if all(item is None for item in items):
        return list.copy
    if all(item is dict.copy for item in items):
        return lambda value: [item.copy() for item in value]
    return lambda value, items=items: [
        value[k] if copy is None else copy(value[k]) for k, copy in enumerate(items)
    ]


def is_flat(message: dict[str, Any]) -> bool:
    """Every value is a leaf, so ``dict.copy`` already is a deep copy of the message."""
    return all(type(value) in _LEAVES for value in message.values())


def tool_calls_of(message: Mapping[str, Any]) -> tuple[str, ...]:
    """The ids a message calls, in order, in any shape."""
    return inspect_message(message).call_ids


def results_of(message: Mapping[str, Any]) -> tuple[str, ...]:
    """The call ids a message answers, in order, in any shape."""
    return inspect_message(message).result_ids
