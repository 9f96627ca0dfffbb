"""The conformance properties as pure functions over (history, view, events).

Each ``check_*`` returns the violations it finds, as plain sentences a person can act on.
They import nothing heavy (no Hypothesis, no pytest) so a production process can run them on
every view, and nothing of ``ctxkit.messages``: the suite must not trust the code it checks,
so the message shapes are read here again, independently and strictly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANNOTATION_KEYS",
    "HistoryIndex",
    "Violation",
    "check_budget",
    "check_events",
    "check_lifecycle",
    "check_non_destructive",
    "check_ordering",
    "check_preservation",
    "check_tool_pairs",
    "is_result",
    "newest_user_message",
]

ANNOTATION_KEYS = frozenset({"metadata"})
"""Keys a manager may add or change on a message without it counting as a different message."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken property: its id, a plain sentence, and the call ids involved if any."""

    property: str
    message: str
    ids: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.property}: {self.message}"


# -- reading the shapes (independently of ctxkit.messages) -----------------------------------


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, list):
        return [b for b in content if isinstance(b, Mapping)]
    return []


def _calls(message: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(OpenAI call ids, Anthropic tool_use ids) of a message."""
    if message.get("role") != "assistant":
        return [], []
    openai = [
        str(call.get("id")) for call in message.get("tool_calls") or () if isinstance(call, Mapping)
    ]
    anthropic = [str(b.get("id")) for b in _blocks(message) if b.get("type") == "tool_use"]
    return openai, anthropic


def _results(message: Mapping[str, Any]) -> list[str]:
    """Call ids a message answers: ``role: tool``, or ``tool_result`` blocks in any message."""
    if message.get("role") == "tool":
        return [str(message.get("tool_call_id"))]
    return [str(b.get("tool_use_id")) for b in _blocks(message) if b.get("type") == "tool_result"]


def is_result(message: Mapping[str, Any]) -> bool:
    """The message answers a tool call (``role: tool``, or ``tool_result`` blocks)."""
    return bool(_results(message))


def newest_user_message(history: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the newest user message that is the user's turn, not only tool results."""
    return next(
        (
            i
            for i in range(len(history) - 1, -1, -1)
            if history[i].get("role") == "user" and not _results(history[i])
        ),
        None,
    )


def _tool_ids(message: Mapping[str, Any]) -> tuple[str, ...]:
    openai, anthropic = _calls(message)
    return (*openai, *anthropic, *_results(message))


# -- tool_pair_integrity ---------------------------------------------------------------------


def check_tool_pairs(view: Sequence[Any]) -> list[Violation]:
    """In the view: each calling message is followed at once by all its results and nothing
    else in between; no result appears anywhere else; no call id is used twice.

    OpenAI: the ``tool`` messages right after the call, in any order. Anthropic: the very
    next message is a user message with a ``tool_result`` for every ``tool_use``.
    """
    found: list[Violation] = []

    def fail(message: str, *ids: str) -> None:
        found.append(Violation("tool_pair_integrity", message, tuple(ids)))

    where_called: dict[str, int] = {}
    for index, message in enumerate(view):
        if not isinstance(message, Mapping):
            fail(f"view[{index}] is a {type(message).__name__}, not a message dict")
            continue
        openai, anthropic = _calls(message)
        for call_id in (*openai, *anthropic):
            if call_id in where_called:
                fail(
                    f"view[{index}] calls {call_id}, "
                    f"already called by view[{where_called[call_id]}]",
                    call_id,
                )
            else:
                where_called[call_id] = index

    answered: set[str] = set()
    index = 0
    while index < len(view):
        message = view[index]
        if not isinstance(message, Mapping):
            index += 1
            continue
        openai, anthropic = _calls(message)
        _report_stray_results(view, index, message, where_called, answered, fail)
        if not openai and not anthropic:
            index += 1
            continue
        if openai and anthropic:
            fail(f"view[{index}] mixes tool_calls and tool_use blocks", *openai, *anthropic)
        expected = set(openai) | set(anthropic)
        following = index + 1
        if openai:
            while following < len(view) and _is_tool_message(view[following]):
                result_id = str(view[following].get("tool_call_id"))
                if result_id in expected:
                    expected.discard(result_id)
                    answered.add(result_id)
                else:
                    _report_stray_result(following, result_id, where_called, answered, fail)
                following += 1
        else:
            after = view[following] if following < len(view) else None
            if isinstance(after, Mapping) and after.get("role") == "user" and _results(after):
                for result_id in _results(after):
                    if result_id in expected:
                        expected.discard(result_id)
                        answered.add(result_id)
                    else:
                        _report_stray_result(following, result_id, where_called, answered, fail)
                following += 1
        for call_id in sorted(expected):
            fail(
                f"view[{index}] calls {call_id}, but no result for it follows at once"
                + _where_else(view, call_id, following),
                call_id,
            )
        index = following
    return found


def _is_tool_message(message: Any) -> bool:
    return isinstance(message, Mapping) and message.get("role") == "tool"


def _report_stray_results(view, index, message, where_called, answered, fail) -> None:
    """Results in a message that no call right before it claimed."""
    for result_id in _results(message):
        _report_stray_result(index, result_id, where_called, answered, fail)


def _report_stray_result(index, result_id, where_called, answered, fail) -> None:
    if result_id in answered:
        fail(f"view[{index}] is a second tool result for {result_id}", result_id)
    elif result_id in where_called:
        fail(
            f"view[{index}] is a tool result for {result_id}, but it does not come right after "
            f"view[{where_called[result_id]}], which calls {result_id}",
            result_id,
        )
    else:
        fail(
            f"view[{index}] is a tool result for {result_id}, but no assistant message in the "
            f"view calls {result_id}",
            result_id,
        )
    answered.add(result_id)


def _where_else(view: Sequence[Any], call_id: str, start: int) -> str:
    for later in range(start, len(view)):
        if isinstance(view[later], Mapping) and call_id in _results(view[later]):
            return f" (its result is at view[{later}])"
    return " (its result is missing from the view)"


# -- ordering --------------------------------------------------------------------------------


def _strip(message: Mapping[str, Any], ignore: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in ignore}


def _text_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return sum(_text_size(v) for k, v in value.items() if k not in ("type", "id"))
    if isinstance(value, list):
        return sum(_text_size(v) for v in value)
    return 0


def comes_from(
    view_message: Mapping[str, Any],
    history_message: Mapping[str, Any],
    ignore: frozenset[str] = ANNOTATION_KEYS,
) -> bool:
    """A view message comes from a history message when it equals it (ignoring annotation
    keys), or keeps its role and tool ids with content no longer than the original's."""
    if _strip(view_message, ignore) == _strip(history_message, ignore):
        return True
    ids = _tool_ids(history_message)
    return bool(
        ids
        and view_message.get("role") == history_message.get("role")
        and _tool_ids(view_message) == ids
        and _text_size(view_message.get("content")) <= _text_size(history_message.get("content"))
    )


def match_view(
    history: Sequence[Mapping[str, Any]],
    view: Sequence[Any],
    ignore: frozenset[str] = ANNOTATION_KEYS,
) -> list[int | None]:
    """For each view message, the history index it comes from (None: synthetic).

    Matching goes forward in order; a message that only matches earlier history is matched
    there, which :func:`check_ordering` reports as reordering.
    """
    matches: list[int | None] = []
    used: set[int] = set()
    position = 0
    for message in view:
        if not isinstance(message, Mapping):
            matches.append(None)
            continue
        found = next(
            (
                i
                for i in range(position, len(history))
                if i not in used and comes_from(message, history[i], ignore)
            ),
            None,
        )
        if found is None:
            found = next(
                (
                    i
                    for i in range(0, min(position, len(history)))
                    if i not in used and comes_from(message, history[i], ignore)
                ),
                None,
            )
        if found is not None:
            used.add(found)
            position = max(position, found + 1)
        matches.append(found)
    return matches


class HistoryIndex:
    """A growing history indexed for :func:`match_view`'s answer in time that follows the
    view, not the history: for checking live views of a long conversation.

    Messages are looked up by a canonical JSON fingerprint (exact matches) and by their tool
    ids (shortened matches); the result equals ``match_view(history, view, ignore)``.
    """

    def __init__(self, ignore: frozenset[str] = ANNOTATION_KEYS) -> None:
        self.ignore = ignore
        self.messages: list[Mapping[str, Any]] = []
        self.prints: list[str] = []
        """Each message's fingerprint."""
        self._by_print: dict[str, list[int]] = {}
        self._by_ids: dict[tuple[str, ...], list[int]] = {}

    def fingerprint(self, message: Mapping[str, Any]) -> str:
        """Equal for two messages exactly when they are equal ignoring annotation keys."""
        return json.dumps(_strip(message, self.ignore), sort_keys=True, default=repr)

    def append(self, message: Mapping[str, Any], fingerprint: str | None = None) -> None:
        index = len(self.messages)
        self.messages.append(message)
        print_ = fingerprint if fingerprint is not None else self.fingerprint(message)
        self.prints.append(print_)
        self._by_print.setdefault(print_, []).append(index)
        ids = _tool_ids(message)
        if ids:
            self._by_ids.setdefault(ids, []).append(index)

    def __len__(self) -> int:
        return len(self.messages)

    def match(
        self, view: Sequence[Any], prints: Sequence[str | None] | None = None
    ) -> list[int | None]:
        """For each view message, the history index it comes from (None: synthetic).

        ``prints``: the view messages' fingerprints, if the caller has them already.
        """
        matches: list[int | None] = []
        used: set[int] = set()
        position = 0
        for number, message in enumerate(view):
            if not isinstance(message, Mapping):
                matches.append(None)
                continue
            print_ = prints[number] if prints is not None else self.fingerprint(message)
            candidates = list(self._by_print.get(print_ or "", ()))
            ids = _tool_ids(message)
            if ids:
                candidates.extend(
                    i
                    for i in self._by_ids.get(ids, ())
                    if comes_from(message, self.messages[i], self.ignore)
                )
            free = sorted(i for i in set(candidates) if i not in used)
            found = next((i for i in free if i >= position), free[0] if free else None)
            if found is not None:
                used.add(found)
                position = max(position, found + 1)
            matches.append(found)
        return matches


def check_ordering(
    history: Sequence[Mapping[str, Any]],
    view: Sequence[Any],
    ignore: frozenset[str] = ANNOTATION_KEYS,
    matches: Sequence[int | None] | None = None,
) -> list[Violation]:
    """View messages from the history keep the history's order; a message that comes from
    none (a summary, a notice) carries no tool call or result.

    ``matches``: :func:`match_view`'s answer, if the caller has it (from a
    :class:`HistoryIndex`).
    """
    found: list[Violation] = []
    if matches is None:
        matches = match_view(history, view, ignore)
    last: tuple[int, int] | None = None
    for index, source in enumerate(matches):
        message = view[index]
        if source is None:
            ids = _tool_ids(message) if isinstance(message, Mapping) else ()
            if ids:
                found.append(
                    Violation(
                        "ordering",
                        f"view[{index}] carries tool ids {', '.join(ids)} but comes from no "
                        "history message",
                        ids,
                    )
                )
            continue
        if last is not None and source < last[1]:
            found.append(
                Violation(
                    "ordering",
                    f"view[{index}] is history[{source}], but it comes after view[{last[0]}], "
                    f"which is history[{last[1]}]: the view reorders the history",
                )
            )
        last = (index, source) if last is None or source > last[1] else last
    return found


# -- non_destructive and lifecycle -----------------------------------------------------------


def check_non_destructive(
    added: Sequence[Mapping[str, Any]],
    stored: Sequence[Any],
    ignore: frozenset[str] = frozenset(),
) -> list[Violation]:
    """``get_messages()`` equals everything added, in order, unchanged."""
    return _compare("non_destructive", added, stored, ignore, "added")


def check_lifecycle(
    expected: Sequence[Mapping[str, Any]],
    stored: Sequence[Any],
    ignore: frozenset[str] = frozenset(),
) -> list[Violation]:
    """After ``set_messages(x)``, ``get_messages() == x``; after ``clear()``, empty."""
    return _compare("lifecycle", expected, stored, ignore, "expected")


def _compare(
    prop: str,
    expected: Sequence[Mapping[str, Any]],
    stored: Sequence[Any],
    ignore: frozenset[str],
    word: str,
) -> list[Violation]:
    if not isinstance(stored, list):
        return [Violation(prop, f"get_messages() returned a {type(stored).__name__}, not a list")]
    for index, (want, got) in enumerate(zip(expected, stored, strict=False)):
        if not isinstance(got, Mapping) or _strip(got, ignore) != _strip(want, ignore):
            return [
                Violation(
                    prop,
                    f"get_messages()[{index}] differs from the message {word} at {index}: "
                    f"{_short(got)} instead of {_short(want)}",
                )
            ]
    if len(stored) != len(expected):
        return [
            Violation(
                prop,
                f"get_messages() has {len(stored)} messages, but {len(expected)} were {word}",
            )
        ]
    return []


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- budget and preservation -----------------------------------------------------------------


def check_budget(
    view_tokens: int, budget: int, *, feasible: bool, tolerance: float = 0.0
) -> list[Violation]:
    """Where a fitting view exists, the view fits the budget (within ``tolerance`` x budget)."""
    limit = budget * (1 + tolerance)
    if feasible and view_tokens > limit:
        return [
            Violation(
                "budget",
                f"the view has {view_tokens} tokens, over the budget of {budget}"
                + (f" (+{tolerance:.0%} tolerance)" if tolerance else ""),
            )
        ]
    return []


def check_preservation(
    history: Sequence[Mapping[str, Any]],
    view: Sequence[Any],
    ignore: frozenset[str] = ANNOTATION_KEYS,
) -> list[Violation]:
    """System messages and the newest user message are in the view (callers decide whether
    they could have fit). Identical messages count as many times as they occur."""
    found = []
    available = [_strip(m, ignore) for m in view if isinstance(m, Mapping)]
    for index, message in enumerate(history):
        if message.get("role") != "system":
            continue
        wanted = _strip(message, ignore)
        if wanted in available:
            available.remove(wanted)
        else:
            found.append(Violation("preservation", f"system message history[{index}] is dropped"))
    newest_user = newest_user_message(history)
    if newest_user is not None and not any(
        isinstance(m, Mapping) and comes_from(m, history[newest_user], ignore) for m in view
    ):
        found.append(
            Violation(
                "preservation", f"the newest user message, history[{newest_user}], is dropped"
            )
        )
    return found


# -- events ----------------------------------------------------------------------------------

PRE_COMPACT = "context:pre_compact"
POST_COMPACT = "context:post_compact"


def check_events(events: Iterable[tuple[str, Mapping[str, Any]]]) -> list[Violation]:
    """Each ``pre_compact`` has its ``post_compact``, in that order, with integer
    ``message_count`` and ``token_count``, and after <= before."""
    found: list[Violation] = []
    open_pre: tuple[int, Mapping[str, Any]] | None = None
    for position, (name, data) in enumerate(events):
        if name not in (PRE_COMPACT, POST_COMPACT):
            continue
        for key in ("message_count", "token_count"):
            value = data.get(key) if isinstance(data, Mapping) else None
            if isinstance(value, bool) or not isinstance(value, int):
                found.append(
                    Violation("events", f"event #{position} {name} has {key}={value!r}, not an int")
                )
        if name == PRE_COMPACT:
            if open_pre is not None:
                found.append(
                    Violation(
                        "events",
                        f"event #{position} {PRE_COMPACT} before the previous one "
                        f"(#{open_pre[0]}) got its {POST_COMPACT}",
                    )
                )
            open_pre = (position, data)
        else:
            if open_pre is None:
                found.append(
                    Violation("events", f"event #{position} {POST_COMPACT} without a {PRE_COMPACT}")
                )
                continue
            before = open_pre[1].get("token_count")
            after = data.get("token_count")
            if isinstance(before, int) and isinstance(after, int) and after > before:
                found.append(
                    Violation(
                        "events",
                        f"event #{position} {POST_COMPACT} has token_count {after}, more than "
                        f"the {before} before compaction",
                    )
                )
            open_pre = None
    if open_pre is not None:
        found.append(
            Violation("events", f"event #{open_pre[0]} {PRE_COMPACT} never got its {POST_COMPACT}")
        )
    return found
