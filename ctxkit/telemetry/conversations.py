"""The live conversations of one process, for gauges that mean the same for one or a thousand.

A gauge of "the latest view" flaps between whichever conversation spoke last. Instead, each
view updates its conversation's row in a bounded table (its last view's tokens, budget,
threshold, history size, when it was seen), and a scrape aggregates the rows: how many
conversations are live, how many passed their compaction threshold or are near their
limit, the highest utilization, the histories' sizes. A conversation id never becomes a
label, so the series stay few whatever the number of conversations.

Rows expire ``idle_after`` seconds after their last view, and the table keeps at most
``max_conversations`` rows (the least recently seen go first): memory and scrape time are
bounded.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ctxkit.telemetry.names import FLEET_GAUGES, metric

__all__ = [
    "DEFAULT_IDLE_AFTER",
    "DEFAULT_MAX_CONVERSATIONS",
    "DEFAULT_NEAR_LIMIT",
    "ConversationTable",
    "Fleet",
]

DEFAULT_IDLE_AFTER = 900.0
"""Seconds after its last view that a conversation stops counting as live (15 minutes)."""
DEFAULT_MAX_CONVERSATIONS = 10_000
"""Rows the table keeps at most; past it, the least recently seen conversation goes."""
DEFAULT_NEAR_LIMIT = 0.9
"""The share of its budget past which a conversation counts as near its limit."""


@dataclass(slots=True)
class Row:
    """One conversation's last view."""

    tokens: int
    budget: int
    threshold: float | None
    history_tokens: int
    history_messages: int
    seen: float


@dataclass(frozen=True, slots=True)
class Fleet:
    """The table aggregated: what the gauges say."""

    conversations: int = 0
    over_threshold: int = 0
    near_limit: int = 0
    utilization_max: float = 0.0
    history_tokens: int = 0
    history_messages: int = 0

    def values(self) -> dict[str, float]:
        """By Prometheus name."""
        return {
            "ctxkit_conversations": self.conversations,
            "ctxkit_conversations_over_threshold": self.over_threshold,
            "ctxkit_conversations_near_limit": self.near_limit,
            "ctxkit_context_utilization_max_ratio": self.utilization_max,
            "ctxkit_history_tokens": self.history_tokens,
            "ctxkit_history_messages": self.history_messages,
        }


class ConversationTable(Collector):
    """Live conversations by id; a Prometheus collector of their aggregates."""

    def __init__(
        self,
        *,
        idle_after: float = DEFAULT_IDLE_AFTER,
        max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
        near_limit: float = DEFAULT_NEAR_LIMIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not idle_after > 0:
            raise ValueError(f"idle_after must be a positive number of seconds, got {idle_after}")
        if isinstance(max_conversations, bool) or not (
            isinstance(max_conversations, int) and max_conversations >= 1
        ):
            raise ValueError(f"max_conversations must be an integer >= 1, got {max_conversations}")
        if not 0 < near_limit <= 1:
            raise ValueError(f"near_limit must be a share of the budget, 0 < x <= 1: {near_limit}")
        self.idle_after = idle_after
        self.max_conversations = max_conversations
        self.near_limit = near_limit
        self.clock = clock
        self._rows: OrderedDict[Any, Row] = OrderedDict()
        """Least recently seen first."""
        self._lock = threading.Lock()
        """Views arrive on the event loop, scrapes on the exporter's thread."""

    def __len__(self) -> int:
        return len(self._rows)

    def saw(self, data: Mapping[str, Any]) -> None:
        """A view's event data: its conversation's row is now this view."""
        row = Row(
            tokens=data["token_count"],
            budget=data["budget"],
            threshold=data.get("compact_threshold"),
            history_tokens=data.get("history_tokens", 0),
            history_messages=data.get("history_messages", 0),
            seen=self.clock(),
        )
        key = data.get("conversation_id")
        with self._lock:
            rows = self._rows
            rows[key] = row
            rows.move_to_end(key)
            if len(rows) > self.max_conversations:
                rows.popitem(last=False)

    def fleet(self) -> Fleet:
        """The live rows aggregated (expired rows are dropped on the way)."""
        with self._lock:
            self._expire()
            rows = list(self._rows.values())
        over = near = history_tokens = history_messages = 0
        highest = 0.0
        near_limit = self.near_limit
        for row in rows:
            budget = row.budget
            ratio = row.tokens / budget if budget else 0.0
            highest = max(highest, ratio)
            if ratio > near_limit:
                near += 1
            if row.threshold is not None and row.tokens > row.threshold * budget:
                over += 1
            history_tokens += row.history_tokens
            history_messages += row.history_messages
        return Fleet(
            conversations=len(rows),
            over_threshold=over,
            near_limit=near,
            utilization_max=highest,
            history_tokens=history_tokens,
            history_messages=history_messages,
        )

    def _expire(self) -> None:
        cutoff = self.clock() - self.idle_after
        rows = self._rows
        while rows:
            key, row = next(iter(rows.items()))
            if row.seen > cutoff:
                break
            del rows[key]

    # -- the Prometheus collector ---------------------------------------------------------------

    def describe(self) -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily(name, metric(name).help) for name in FLEET_GAUGES]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        values = self.fleet().values()
        for name in FLEET_GAUGES:
            yield GaugeMetricFamily(name, metric(name).help, value=values[name])
