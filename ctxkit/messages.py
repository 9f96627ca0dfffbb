"""Messages as ctxkit sees them: the shapes (from :mod:`ctxkit.shapes`, one module per
provider shape), and the small operations every part of ctxkit uses on them.

A *unit* is a calling message together with the messages that answer it, or any other
message alone. Views are planned in whole units, so a call and its result can never be
separated. See :mod:`ctxkit.shapes` for the six shapes and the rules each provider enforces.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
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


def is_flat(message: dict[str, Any]) -> bool:
    """Every value is a leaf, so ``dict.copy`` already is a deep copy of the message."""
    return all(type(value) in _LEAVES for value in message.values())


def tool_calls_of(message: Mapping[str, Any]) -> tuple[str, ...]:
    """The ids a message calls, in order, in any shape."""
    return inspect_message(message).call_ids


def results_of(message: Mapping[str, Any]) -> tuple[str, ...]:
    """The call ids a message answers, in order, in any shape."""
    return inspect_message(message).result_ids
