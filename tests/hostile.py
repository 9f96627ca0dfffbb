"""Hostile JSON for properties whose end must be a finding or a typed error, never a crash:
good values (a request body, a history) with a few of their places replaced by anything JSON
can hold. Replacing inside good values reaches the code that reads deep (a number where the
calls go, a list where the role goes), which random JSON on its own seldom builds."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

from ctxkit.conformance.search.conversations import SHAPES, conversation_plans

WORDS = st.sampled_from(
    ["assistant", "user", "tool", "system", "model", "tool_use", "tool_result", "text",
     "function_call", "function_call_output", "reasoning", "thinking", "c1", "t1"]
)  # fmt: skip
"""Strings the readers act on (roles, types, ids), so hostile values land where they look."""
KEYS = st.sampled_from(
    ["role", "content", "parts", "type", "id", "name", "tool_calls", "tool_call_id", "function",
     "arguments", "response", "call_id", "functionCall", "functionResponse", "output", "text"]
)  # fmt: skip
"""Keys the readers act on."""


def json_values(keys: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """Any JSON value, its objects keyed by ``keys``."""
    return st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5) | WORDS,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
        max_leaves=20,
    )


def places(value: Any, path: tuple = ()) -> list[tuple]:
    """Every place in a JSON value, the value itself first."""
    found = [path]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += places(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += places(inner, (*path, index))
    return found


@st.composite
def spoiled(draw: st.DrawFn, good: st.SearchStrategy[Any], values: st.SearchStrategy[Any]) -> Any:
    """A good value with one to three of its places (a message, its parts, often a leaf)
    replaced by one of ``values``."""
    value = draw(good)
    for _ in range(draw(st.integers(1, 3))):
        inside = places(value)[1:]
        if not inside:
            break
        shallow = [place for place in inside if len(place) <= 3]  # a message or its parts
        *path, last = draw(st.sampled_from(shallow) | st.sampled_from(inside))
        parent = value
        for step in path:
            parent = parent[step]
        parent[last] = draw(values)
    return value


def histories() -> st.SearchStrategy[list[Any]]:
    """The suite's generated histories, of every shape (good ones)."""
    return st.tuples(conversation_plans(max_turns=3), st.sampled_from(SHAPES)).map(
        lambda planned: planned[0].messages((planned[1],))
    )


MESSAGE_VALUES = json_values(KEYS | st.text(max_size=3))
"""What goes into a spoiled message."""


def spoiled_histories() -> st.SearchStrategy[list[Any]]:
    """The suite's generated histories, of every shape, spoiled."""
    return spoiled(histories(), MESSAGE_VALUES)


@st.composite
def spoiled_views(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    """A good history, and a view of it that is spoiled and, half the time, has lost some of
    its messages: what a broken or hostile target might return."""
    history = draw(histories())
    view = draw(spoiled(st.just(history).map(copy.deepcopy), MESSAGE_VALUES))
    if draw(st.booleans()):
        kept = draw(st.lists(st.booleans(), min_size=len(view), max_size=len(view)))
        view = [message for message, keep in zip(view, kept, strict=True) if keep]
    return history, view
