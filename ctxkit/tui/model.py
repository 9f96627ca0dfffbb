"""What ``ctxkit inspect`` knows: each conversation's figures, built from stream events.

Plain data and no Textual, so the same figures serve the screen, ``--json`` and the tests.
A source feeds :class:`Inspector` from a worker thread; the screen takes a :meth:`snapshot`
at most ten times a second. Memory stays bounded however long the stream runs: the timeline
and the compaction log are ring buffers, only the newest :data:`LISTING_ROWS_KEPT` rows of a
view's listing are kept, and only the most recently active :data:`CONVERSATIONS_KEPT`
conversations are kept.

Nothing in a stream can break the inspector: a line that is not a JSON object of the stream's
shape, or whose figures are not numbers, is skipped and counted; an event it does not know is
counted apart (a newer producer may send more).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ctxkit import events
from ctxkit.tokens import CATEGORIES

__all__ = [
    "BREAKDOWN_CATEGORIES",
    "COMPACTIONS_KEPT",
    "CONVERSATIONS_KEPT",
    "TIMELINE_POINTS",
    "Conversation",
    "Inspector",
    "level_of",
    "parse_line",
]

TIMELINE_POINTS = 600
"""Views kept for the tokens-over-time chart (a view is one model call)."""
COMPACTIONS_KEPT = 200
"""Compactions kept in the log (the count of all compactions is kept apart)."""
CONVERSATIONS_KEPT = 100
"""Conversations kept; the one seen least recently goes first."""
LISTING_ROWS_KEPT = 500
"""Rows of a view's per-message listing kept (the newest); ctxkit's producers send 200."""
GROWTH_SAMPLES = 20
"""Recent view-to-view growths averaged for the turns-left estimate."""
UNNAMED = "-"
"""The conversation of events that carry no ``conversation_id``."""
WARNING_MARGIN = 0.10
"""The gauge warns this share of the budget before the compaction threshold."""

BREAKDOWN_CATEGORIES = (*CATEGORIES, "room", "reserved")
"""The breakdown's rows. ``room``: room before the compaction threshold; ``reserved``: the
budget past the threshold, which a view enters only when compaction cannot bring it down."""


def level_of(tokens: int, budget: int, threshold: float | None) -> str:
    """How full a view of ``tokens`` is: ``ok``; ``warning`` within :data:`WARNING_MARGIN` of
    the budget below the compaction threshold (or the budget, if no threshold is known);
    ``compacting`` past the threshold; ``limit`` at the budget."""
    if not budget:
        return "ok"
    ratio = tokens / budget
    if ratio >= 1.0:
        return "limit"
    if threshold is None:
        return "warning" if ratio >= 1.0 - WARNING_MARGIN else "ok"
    if ratio >= threshold:
        return "compacting"
    return "warning" if ratio >= threshold - WARNING_MARGIN else "ok"


class BadEvent(ValueError):
    """A line or payload that does not have the stream's shape."""


Parsed = tuple[str, dict[str, Any], float]
"""An event read from a line: name, data, time."""


def parse_line(line: bytes | str) -> Parsed:
    """``(event name, data, time)`` of one stream line; raises :class:`BadEvent`."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise BadEvent(f"not JSON: {error}") from None
    if not isinstance(record, dict):
        raise BadEvent("not a JSON object")
    name, data, ts = record.get("event"), record.get("data"), record.get("ts")
    if not isinstance(name, str):
        raise BadEvent("no event name")
    if not isinstance(data, dict):
        raise BadEvent("no data object")
    if not _is_number(ts):
        raise BadEvent("no timestamp")
    return name, data, float(ts)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _count(data: dict[str, Any], key: str, default: int | None = None) -> int:
    """A non-negative whole figure of the payload (a float that is whole passes)."""
    if key not in data:
        if default is None:
            raise BadEvent(f"missing {key}")
        return default
    value = data[key]
    if not _is_number(value) or value < 0 or value != int(value):
        raise BadEvent(f"{key} is not a count: {value!r}")
    return int(value)


def _seconds(data: dict[str, Any], key: str) -> float:
    value = data.get(key, 0.0)
    if not _is_number(value) or value < 0:
        raise BadEvent(f"{key} is not a duration: {value!r}")
    return float(value)


def _counts(data: dict[str, Any], key: str) -> dict[str, int]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise BadEvent(f"{key} is not an object")
    return {str(name): _count(value, name) for name in value}


@dataclass(frozen=True, slots=True)
class Compaction:
    """One compaction as the log shows it."""

    time: float
    tokens_before: int
    tokens_after: int
    messages_before: int | None
    messages_after: int
    saved: int
    strategy: str
    duration_s: float
    dropped: int
    truncated: int
    summarized: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "saved": self.saved,
            "strategy": self.strategy,
            "duration_s": self.duration_s,
            "units_dropped": self.dropped,
            "units_truncated": self.truncated,
            "units_summarized": self.summarized,
        }


@dataclass(slots=True)
class Conversation:
    """The latest figures of one conversation, and its recent past."""

    id: str
    first_seen: float
    last_seen: float = 0.0
    views: int = 0
    budget: int = 0
    tokens: int = 0
    messages: int = 0
    history_messages: int = 0
    history_tokens: int = 0
    compact_threshold: float | None = None
    breakdown: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, int] = field(default_factory=dict)
    units_by_level: dict[str, int] | None = None
    """How many of the view's units are shown full, as a paragraph, as a line
    (``hierarchical``); None when the stream does not say."""
    units_recalled: int | None = None
    """How many units of the view a recall brought back; None when the stream does not say."""
    listing_rows: list[Any] | None = None
    """The latest listing as it came: checked only when shown, since only the latest one is."""
    listing_omitted: int = 0
    _listing_checked: tuple[list[Any] | None, list[dict[str, Any]] | None, str | None] = (
        None,
        None,
        None,
    )
    compactions: int = 0
    tokens_saved: int = 0
    summaries: int = 0
    violations: int = 0
    last_violation: str | None = None
    budget_exceeded: int = 0
    timeline: deque[tuple[float, int, bool]] = field(
        default_factory=lambda: deque(maxlen=TIMELINE_POINTS)
    )
    log: deque[Compaction] = field(default_factory=lambda: deque(maxlen=COMPACTIONS_KEPT))
    prefix_kept_tokens: int = 0
    """View tokens that repeated the start of the previous view (a prompt cache's hits)."""
    prefix_view_tokens: int = 0
    """All view tokens the stream said a prefix of (views with ``prefix_tokens``)."""
    cache_history: deque[tuple[float, float]] = field(
        default_factory=lambda: deque(maxlen=TIMELINE_POINTS)
    )
    """(time, share of the previous view kept) for each view that had a previous one."""
    growth: deque[int] = field(default_factory=lambda: deque(maxlen=GROWTH_SAMPLES))
    pending_messages: int | None = None
    """``message_count`` of the last ``pre_compact``, waiting for its ``post_compact``."""

    # -- figures -------------------------------------------------------------------------

    @property
    def ratio(self) -> float:
        return self.tokens / self.budget if self.budget else 0.0

    @property
    def compact_at_tokens(self) -> int | None:
        if self.compact_threshold is None:
            return None
        return int(self.compact_threshold * self.budget)

    @property
    def room_until_compaction(self) -> int | None:
        at = self.compact_at_tokens
        return None if at is None else max(0, at - self.tokens)

    @property
    def room_until_limit(self) -> int:
        return max(0, self.budget - self.tokens)

    @property
    def average_growth(self) -> float | None:
        """Tokens a view grows by, on average, between compactions (recent views)."""
        return sum(self.growth) / len(self.growth) if self.growth else None

    def turns_left(self, room: int | None) -> int | None:
        """Model calls of average growth that fit in ``room``; None while unknown."""
        average = self.average_growth
        if room is None or not average:
            return None
        return int(room // average)

    @property
    def level(self) -> str:
        """``ok``, ``warning`` (near the threshold), ``compacting`` (past it) or ``limit``."""
        return level_of(self.tokens, self.budget, self.compact_threshold)

    def category_breakdown(self) -> dict[str, int]:
        """Tokens by :data:`BREAKDOWN_CATEGORIES` (unknown categories are added after)."""
        rows = {name: self.breakdown.get(name, 0) for name in CATEGORIES}
        for name, tokens in self.breakdown.items():
            rows.setdefault(name, tokens)
        at = self.compact_at_tokens
        if at is None:
            at = self.budget
        rows["room"] = max(0, at - self.tokens)
        rows["reserved"] = max(0, self.budget - max(self.tokens, at))
        return rows

    def snapshot(self, *, timeline: bool = True) -> dict[str, Any]:
        """JSON-ready figures; key names follow ``ReferenceContextManager.usage()``."""
        listing, listing_problem = self.listing()
        snapshot: dict[str, Any] = {
            "conversation_id": self.id,
            "views": self.views,
            "last_event_ts": self.last_seen,
            "budget": self.budget,
            "tokens": self.tokens,
            "messages": self.messages,
            "ratio": round(self.ratio, 6),
            "level": self.level,
            "history_messages": self.history_messages,
            "history_tokens": self.history_tokens,
            "compact_threshold": self.compact_threshold,
            "compact_at_tokens": self.compact_at_tokens,
            "room_until_compaction": self.room_until_compaction,
            "room_until_limit": self.room_until_limit,
            "turns": {
                "average_growth_tokens": self.average_growth,
                "left_before_compaction": self.turns_left(self.room_until_compaction),
                "left_before_limit": self.turns_left(self.room_until_limit),
            },
            "breakdown": self.category_breakdown(),
            "view": dict(self.kinds),
            "units_by_level": None if self.units_by_level is None else dict(self.units_by_level),
            "units_recalled": self.units_recalled,
            "compactions": self.compactions,
            "tokens_saved": self.tokens_saved,
            "cache": self.cache(),
            "summaries": self.summaries,
            "violations": self.violations,
            "last_violation": self.last_violation,
            "budget_exceeded": self.budget_exceeded,
            "compaction_log": [entry.as_dict() for entry in self.log],
            "listing": listing,
            "listing_omitted": self.listing_omitted,
            "listing_problem": listing_problem,
        }
        if timeline:
            snapshot["timeline"] = [list(point) for point in self.timeline]
            snapshot["cache_history"] = [list(point) for point in self.cache_history]
        return snapshot

    def cache(self) -> dict[str, Any] | None:
        """Prompt-cache stability: the share of view tokens that repeated the start of the
        previous view (see :mod:`ctxkit.prefix`); None before the stream says it."""
        if not self.prefix_view_tokens:
            return None
        return {
            "share": round(self.prefix_kept_tokens / self.prefix_view_tokens, 4),
            "kept_tokens": self.prefix_kept_tokens,
            "view_tokens": self.prefix_view_tokens,
            "last": self.cache_history[-1][1] if self.cache_history else None,
        }

    def listing(self) -> tuple[list[dict[str, Any]] | None, str | None]:
        """The latest listing's rows, checked, or None and what is wrong with them."""
        raw, rows, problem = self._listing_checked
        if raw is not self.listing_rows:
            raw, rows, problem = self.listing_rows, None, None
            if raw is not None:
                try:
                    rows = _checked_rows(raw)
                except BadEvent as error:
                    problem = str(error)
            self._listing_checked = (raw, rows, problem)
        return (None if rows is None else [dict(row) for row in rows]), problem

    # -- events --------------------------------------------------------------------------

    def on_view(self, data: dict[str, Any], ts: float) -> None:
        tokens = _count(data, "token_count")
        budget = _count(data, "budget")
        messages = _count(data, "message_count")
        compacted = bool(data.get("compacted", False))
        threshold = data.get("compact_threshold")
        if threshold is not None and (not _is_number(threshold) or not 0 < threshold <= 1):
            raise BadEvent(f"compact_threshold is not a share: {threshold!r}")
        breakdown = _counts(data, "breakdown")
        kinds = _counts(data, "kinds")
        by_level = _counts(data, "units_by_level") if "units_by_level" in data else None
        recalled = _count(data, "units_recalled") if "units_recalled" in data else None
        listing = data.get("listing")
        if listing is not None and not isinstance(listing, list):
            raise BadEvent("listing is not a list")
        omitted = _count(data, "listing_omitted", 0)
        history_messages = _count(data, "history_messages", 0)
        history_tokens = _count(data, "history_tokens", 0)
        kept = _count(data, "prefix_tokens", 0) if "prefix_tokens" in data else None
        previous = _count(data, "previous_tokens", 0)
        # All checked: now change state, so a bad event changes nothing.
        if self.views and not compacted and tokens > self.tokens:
            self.growth.append(tokens - self.tokens)
        self.views += 1
        self.tokens, self.budget, self.messages = tokens, budget, messages
        self.compact_threshold = None if threshold is None else float(threshold)
        self.breakdown, self.kinds = breakdown, kinds
        self.units_by_level, self.units_recalled = by_level, recalled
        self.history_messages, self.history_tokens = history_messages, history_tokens
        if listing is not None:
            self.listing_rows = listing[-LISTING_ROWS_KEPT:]
            self.listing_omitted = omitted + len(listing) - len(self.listing_rows)
        self.timeline.append((ts, tokens, compacted))
        if kept is not None:  # streams from before ctxkit measured it have no prefix_tokens
            self.prefix_kept_tokens += kept
            self.prefix_view_tokens += tokens
            if previous:
                self.cache_history.append((ts, round(kept / previous, 4)))

    def on_pre_compact(self, data: dict[str, Any], ts: float) -> None:
        self.pending_messages = _count(data, "message_count")

    def on_post_compact(self, data: dict[str, Any], ts: float) -> None:
        after = _count(data, "token_count")
        before = _count(data, "tokens_before", after)
        strategy = data.get("strategy", "")
        entry = Compaction(
            time=ts,
            tokens_before=before,
            tokens_after=after,
            messages_before=self.pending_messages,
            messages_after=_count(data, "message_count"),
            saved=_count(data, "tokens_saved", max(0, before - after)),
            strategy=strategy if isinstance(strategy, str) else str(strategy),
            duration_s=_seconds(data, "duration_s"),
            dropped=_count(data, "units_dropped", 0),
            truncated=_count(data, "units_truncated", 0),
            summarized=_count(data, "units_summarized", 0),
        )
        self.pending_messages = None
        self.compactions += 1
        self.tokens_saved += entry.saved
        self.log.append(entry)

    def on_include(self, data: dict[str, Any], ts: float) -> None:
        self.summaries += 1

    def on_budget_exceeded(self, data: dict[str, Any], ts: float) -> None:
        self.budget_exceeded += 1

    def on_invariant_violation(self, data: dict[str, Any], ts: float) -> None:
        name = data.get("property")
        self.violations += 1
        self.last_violation = name if isinstance(name, str) else "unknown property"


_FATES = frozenset(events.LISTING_FATES)
_LEVELS = ("paragraph", "line")


def _checked_rows(rows: list[Any]) -> list[dict[str, Any]]:
    checked = []
    for row in rows:
        if not isinstance(row, dict) or row.get("fate") not in _FATES:
            raise BadEvent("listing row without a known fate")
        index = row.get("index")
        if index is not None:
            index = _count(row, "index")
        role = row.get("role")
        entry = {
            "index": index,
            "count": _count(row, "count", 1),
            "role": role if isinstance(role, str) else "?",
            "tokens": _count(row, "tokens"),
            "fate": row["fate"],
        }
        if row.get("level") in _LEVELS:  # a hierarchical unit's paragraph or line
            entry["level"] = row["level"]
            stands_for = row.get("stands_for")
            if (
                isinstance(stands_for, list)
                and len(stands_for) == 2
                and all(type(n) is int and n >= 0 for n in stands_for)
                and stands_for[0] < stands_for[1]
            ):
                entry["stands_for"] = list(stands_for)
        checked.append(entry)
    return checked


_HANDLERS = {
    events.VIEW: Conversation.on_view,
    events.PRE_COMPACT: Conversation.on_pre_compact,
    events.POST_COMPACT: Conversation.on_post_compact,
    events.INCLUDE: Conversation.on_include,
    events.BUDGET_EXCEEDED: Conversation.on_budget_exceeded,
    events.INVARIANT_VIOLATION: Conversation.on_invariant_violation,
}


class Inspector:
    """Every conversation of a stream, fed event by event; safe to feed from one thread
    while another takes snapshots."""

    def __init__(self, source: str = "") -> None:
        self.source = source
        self.status = ""
        """What the source is doing (following, waiting for the file, replay speed)."""
        self.events = 0
        self.skipped = 0
        """Lines that were not events of the stream's shape."""
        self.unknown = 0
        """Well-formed events of a name the inspector does not know."""
        self.last_problem: str | None = None
        self.version = 0
        """Goes up with every change: the screen redraws only when it moved."""
        self.lock = threading.Lock()
        self._conversations: dict[str, Conversation] = {}

    # -- feeding -------------------------------------------------------------------------

    def feed_lines(self, lines: list[bytes] | list[str]) -> None:
        """Apply a batch of stream lines (blank lines are ignored)."""
        parsed: list[Parsed] = []
        problems: list[str] = []
        for line in lines:
            if not line.strip():
                continue
            try:
                parsed.append(parse_line(line))
            except BadEvent as problem:
                problems.append(str(problem))
        self.feed_parsed(parsed, problems)

    def feed_parsed(self, parsed: list[Parsed], problems: list[str] | None = None) -> None:
        """Apply events already read with :func:`parse_line`, and count ``problems`` (one per
        line it refused) as skipped lines.

        Parsing, the costly part, happens before and outside the lock, so the screen can take
        a snapshot while a backlog is read.
        """
        with self.lock:
            for problem in problems or ():
                self._skip(problem)
            for name, data, ts in parsed:
                self._apply(name, data, ts)
            self.version += 1

    def feed_event(self, name: str, data: dict[str, Any], ts: float | None = None) -> None:
        """Apply one event published in this process (the ``--demo`` source)."""
        with self.lock:
            self._apply(name, data, time.time() if ts is None else ts)
            self.version += 1

    def set_status(self, status: str) -> None:
        with self.lock:
            if status != self.status:
                self.status = status
                self.version += 1

    def _skip(self, problem: str) -> None:
        self.skipped += 1
        self.last_problem = problem

    def _apply(self, name: str, data: dict[str, Any], ts: float) -> None:
        handler = _HANDLERS.get(name)
        if handler is None:
            if name in events.KNOWN:  # ctxkit's own, which no panel here shows
                self.events += 1
            else:
                self.unknown += 1
            return
        conversation_id = data.get("conversation_id", UNNAMED)
        if not isinstance(conversation_id, str) or not conversation_id:
            conversation_id = UNNAMED
        conversation = self._conversations.get(conversation_id)
        new = conversation is None
        if conversation is None:
            conversation = Conversation(id=conversation_id, first_seen=ts)
        try:
            handler(conversation, data, ts)
        except BadEvent as problem:
            self._skip(f"{name}: {problem}")
            return
        except Exception as problem:  # nothing in a stream may stop the inspector
            self._skip(f"{name}: {type(problem).__name__}")
            return
        conversation.last_seen = max(conversation.last_seen, ts)
        self.events += 1
        if new:
            self._conversations[conversation_id] = conversation
            if len(self._conversations) > CONVERSATIONS_KEPT:
                oldest = min(self._conversations.values(), key=lambda c: c.last_seen)
                del self._conversations[oldest.id]

    # -- reading -------------------------------------------------------------------------

    def conversation_ids(self) -> list[str]:
        """Conversations in the order they were first seen."""
        with self.lock:
            return list(self._conversations)

    def latest_id(self) -> str | None:
        """The conversation with the newest event."""
        with self.lock:
            if not self._conversations:
                return None
            return max(self._conversations.values(), key=lambda c: c.last_seen).id

    def conversation(self, conversation_id: str) -> dict[str, Any] | None:
        """One conversation's :meth:`Conversation.snapshot`, or None if not (or no longer)
        in the stream."""
        with self.lock:
            conversation = self._conversations.get(conversation_id)
            return None if conversation is None else conversation.snapshot()

    def snapshot(self, *, timeline: bool = True) -> dict[str, Any]:
        """Everything, JSON-ready: what ``ctxkit inspect --json`` prints."""
        with self.lock:
            return {
                "source": self.source,
                "status": self.status,
                "events": self.events,
                "skipped": self.skipped,
                "unknown": self.unknown,
                "last_problem": self.last_problem,
                "conversations": [
                    conversation.snapshot(timeline=timeline)
                    for conversation in self._conversations.values()
                ],
            }
