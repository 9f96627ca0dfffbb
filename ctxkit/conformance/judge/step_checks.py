"""Each check a run makes, with the relaxations in force, as one function that returns the
violations it finds.

The state machine calls these on what the target returned; a reproducer script calls the same
functions through :mod:`ctxkit.conformance.replay`, so a script fails for exactly the reason the
run gave. Each takes what it checks first (a view, or what ``get_messages()`` returned), then
plain data.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ctxkit.conformance.judge.allow import Relaxations
from ctxkit.conformance.judge.invariants import (
    ANNOTATION_KEYS,
    Violation,
    check_attachments,
    check_events,
    check_lifecycle,
    check_non_destructive,
    check_ordering,
    check_preservation,
    check_tool_pairs,
    first_difference,
    relaxed,
    same_message,
)

__all__ = [
    "CHECKS",
    "EDIT_MARK",
    "attachments",
    "empty_view",
    "events",
    "fits",
    "history",
    "is_list",
    "not_edited",
    "ordering",
    "preserved",
    "same_view",
    "shared_part",
    "stored_all",
    "tool_pairs",
    "view_tokens",
]

NO_RELAXATIONS = Relaxations()

EDIT_MARK = "EDITED"
"""What :func:`ctxkit.conformance.replay.edit_in_place` writes into every string it edits."""


def _keys(ignore: Collection[str] | None) -> frozenset[str]:
    return ANNOTATION_KEYS if ignore is None else frozenset(ignore)


def _without_system(messages: Sequence[Any]) -> list[Any]:
    return [m for m in messages if not (isinstance(m, Mapping) and m.get("role") == "system")]


def is_list(view: Any) -> list[Violation]:
    """A view is a list of message dicts."""
    if isinstance(view, list) and all(isinstance(m, Mapping) for m in view):
        return []
    if isinstance(view, list):
        odd = next(m for m in view if not isinstance(m, Mapping))
        what = f"a list holding a {type(odd).__name__} ({_short(odd)})"
    else:
        what = f"a {type(view).__name__} ({_short(view)})"
    return [
        Violation("lifecycle", f"get_messages_for_request returned {what}, not a list of messages")
    ]


def tool_pairs(view: Sequence[Any]) -> list[Violation]:
    return check_tool_pairs(view)


def attachments(view: Sequence[Any], history: Sequence[Mapping[str, Any]]) -> list[Violation]:
    """Reasoning items and thinking blocks kept with the calls they belong to."""
    return check_attachments(history, view)


def ordering(
    view: Sequence[Any],
    history: Sequence[Mapping[str, Any]],
    allow: Relaxations = NO_RELAXATIONS,
    ignore: Collection[str] | None = None,
) -> list[Violation]:
    if allow.hoisted_system:
        history, view = _without_system(history), _without_system(view)
        return check_ordering(history, view, _keys(ignore))
    found = check_ordering(history, view, _keys(ignore))
    if found and not check_ordering(_without_system(history), _without_system(view), _keys(ignore)):
        found[0] = replace(
            found[0],
            message=f"{found[0].message}; only system messages moved (--allow hoisted-system "
            "accepts that, for providers that take the system prompt apart)",
        )
    return found


def preserved(
    view: Sequence[Any],
    history: Sequence[Mapping[str, Any]],
    allow: Relaxations = NO_RELAXATIONS,
    ignore: Collection[str] | None = None,
) -> list[Violation]:
    return relaxed(check_preservation(history, view, _keys(ignore)), allow)


def view_tokens(
    view: Sequence[Mapping[str, Any]], count: Callable[[Any], int] | None = None
) -> int:
    """Tokens of a view as a request: each message's exact count plus the reply priming."""
    from ctxkit.tokens import REPLY_PRIMING, TokenCounter

    count = count or TokenCounter().count_message
    return sum(count(m) for m in view) + (REPLY_PRIMING if view else 0)


def fits(
    view: Sequence[Mapping[str, Any]],
    budget: int,
    allow: Relaxations = NO_RELAXATIONS,
    count: Callable[[Any], int] | None = None,
) -> list[Violation]:
    tokens = view_tokens(view, count)
    limit = budget * (1 + allow.budget_tolerance)
    if tokens <= limit:
        return []
    tolerance = f" (+{allow.budget_tolerance:.0%} allowed)" if allow.budget_tolerance else ""
    return [
        Violation(
            "budget",
            f"at a budget of {budget:,} the view has {tokens:,} tokens, "
            f"{tokens - budget:,} over{tolerance}",
        )
    ]


def history(
    stored: Any,
    expected: Sequence[Mapping[str, Any]],
    property: str = "non_destructive",
    ignore: Collection[str] | None = None,
) -> list[Violation]:
    """``get_messages()`` equals ``expected`` (annotation keys aside), reported under
    ``property``."""
    checker = check_lifecycle if property == "lifecycle" else check_non_destructive
    return [Violation(property, v.message) for v in checker(expected, stored, _keys(ignore))]


def stored_all(
    stored: Any,
    before: Sequence[Mapping[str, Any]],
    added: Sequence[Mapping[str, Any]],
    ignore: Collection[str] | None = None,
) -> list[Violation]:
    """After concurrent adds: the history before them, then each added message once, in any
    order."""
    keys = _keys(ignore)
    if not isinstance(stored, list):
        return history(stored, before, ignore=keys)
    head, tail = stored[: len(before)], stored[len(before) :]
    problems = check_non_destructive(before, head, keys)
    if problems:
        return problems

    unmatched = list(tail)
    lost = 0
    for message in added:  # each added message once, compared as a provider reads them
        found = next((k for k, m in enumerate(unmatched) if same_message(message, m, keys)), None)
        if found is None:
            lost += 1
        else:
            del unmatched[found]
    if not lost and not unmatched:
        return []
    return [
        Violation(
            "concurrency",
            f"{len(added)} concurrent add_message calls stored {len(tail)} messages"
            + (
                f"; {lost} {'was' if lost == 1 else 'were'} lost"
                if lost
                else "; some were stored twice"
            ),
        )
    ]


def shared_part(
    expected: Sequence[Mapping[str, Any]], stored: Any, ignore: Collection[str] | None = None
) -> str:
    """After a caller edited what it passed or got back: which object the stored history
    shares with the caller, found where the first edit shows (an edited list grew by one, an
    edited dict gained a key)."""
    keys = _keys(ignore)
    if not isinstance(stored, list):
        return ""
    if len(stored) != len(expected):
        return "the history is the very list the caller edited"
    for index, (want, got) in enumerate(zip(expected, stored, strict=True)):
        if isinstance(want, Mapping) and isinstance(got, Mapping):
            want = {k: v for k, v in want.items() if k not in keys}
            got = {k: v for k, v in got.items() if k not in keys}
        path = _first_difference(want, got, "")
        if path is None:
            continue
        if not path:
            return f"get_messages()[{index}] is the very dict the caller edited"
        return (
            f"get_messages()[{index}]{path} is a list or dict inside a message that the "
            "caller edited (a shallow copy is not enough)"
        )
    return ""


def _first_difference(want: Any, got: Any, path: str) -> str | None:
    """The path of the first container whose own contents differ, or None if equal."""
    if isinstance(want, Mapping) and isinstance(got, Mapping):
        if set(want) != set(got):
            return path
        pairs = [(want[key], got[key], f"{path}[{key!r}]") for key in want]
    elif isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return path
        pairs = [(a, b, f"{path}[{i}]") for i, (a, b) in enumerate(zip(want, got, strict=True))]
    else:
        return None if want == got else path
    for a, b, inner in pairs:
        if not isinstance(a, Mapping | list):
            if a != b:
                return path  # a plain value changed: its container was edited
            continue
        found = _first_difference(a, b, inner)
        if found is not None:
            return found
    return None


def empty_view(view: Any) -> list[Violation]:
    if isinstance(view, list) and not view:
        return []
    size = len(view) if isinstance(view, list) else view
    return [Violation("lifecycle", f"after clear(), a view still holds {size} messages")]


def same_view(view: Any, again: Any) -> list[Violation]:
    """Asking again gave the same view: equal as a provider reads it
    (:func:`~ctxkit.conformance.judge.invariants.first_difference`: a string and its one text
    part, the results of one message's calls in any order where their API takes them so)."""
    if again == view or (
        isinstance(view, list)
        and isinstance(again, list)
        and len(view) == len(again)
        and first_difference(view, again) is None
    ):
        return []
    return [
        Violation(
            "determinism",
            "two requests with nothing added in between gave different views: "
            + _difference(view, again),
        )
    ]


def not_edited(again: Any) -> list[Violation]:
    if EDIT_MARK not in json.dumps(again, default=repr):
        return []
    return [
        Violation(
            "isolation",
            "editing a returned view changed the next view: views share lists or dicts",
        )
    ]


def events(emitted: Sequence[Any]) -> list[Violation]:
    return check_events(
        [tuple(e) for e in emitted if isinstance(e, list | tuple) and len(e) == 2]  # type: ignore[misc]
    )


def _difference(first: Any, second: Any) -> str:
    if not isinstance(first, list) or not isinstance(second, list):
        return f"{_short(first)}, then {_short(second)}"
    if len(first) != len(second):
        return f"{len(first)} messages, then {len(second)}"
    index = first_difference(first, second)
    if index is not None:
        return f"view[{index}] was {_short(first[index], 80)} then {_short(second[index], 80)}"
    return "they differ"


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


CHECKS: dict[str, Callable[..., list[Violation]]] = {
    "is_list": is_list,
    "tool_pairs": tool_pairs,
    "attachments": attachments,
    "ordering": ordering,
    "preserved": preserved,
    "fits": fits,
    "history": history,
    "stored_all": stored_all,
    "empty_view": empty_view,
    "same_view": same_view,
    "not_edited": not_edited,
    "events": events,
}
"""The checks a reproducer can name, by :class:`~ctxkit.conformance.judge.steps.Check` kind."""
