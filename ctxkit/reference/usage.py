"""Per-turn usage: how big turns are, and how many are left before compaction and the limit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ctxkit.tokens import CATEGORIES

__all__ = ["TurnTracker", "ViewStats"]


@dataclass(slots=True)
class ViewStats:
    """Figures of the latest view, kept for :meth:`usage` snapshots."""

    budget: int
    tokens: int
    messages: int
    breakdown: dict[str, int]
    kinds: dict[str, int]
    compactions: int


@dataclass(slots=True)
class TurnTracker:
    """Turn sizes measured from the history's exact growth between recorded turns.

    The provider's own usage numbers are kept beside ours, so a drift between the two (a
    provider counting tools or images differently) is visible.
    """

    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    _history_tokens_at_last: int = 0
    _growth: list[int] = field(default_factory=list)

    def record(self, input_tokens: int, output_tokens: int, history_tokens: int) -> None:
        for name, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        self.turns += 1
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self._growth.append(max(0, history_tokens - self._history_tokens_at_last))
        del self._growth[:-50]  # the recent turns say more about the next one
        self._history_tokens_at_last = history_tokens

    def reset(self) -> None:
        self.turns = self.input_tokens = self.output_tokens = 0
        self._history_tokens_at_last = 0
        self._growth.clear()

    @property
    def average_turn_tokens(self) -> float | None:
        return sum(self._growth) / len(self._growth) if self._growth else None

    def turns_left(self, room: int) -> int | None:
        """Whole turns of average size that fit in ``room`` tokens; None before any turn."""
        average = self.average_turn_tokens
        if average is None:
            return None
        if average <= 0:
            return None
        return max(0, int(room // average))


def usage_snapshot(
    *,
    stats: ViewStats,
    tracker: TurnTracker,
    history_messages: int,
    history_tokens: int,
    compact_threshold: float,
    hard_limit_ratio: float,
    encoding: str,
) -> dict[str, Any]:
    """A plain, JSON-ready dict of where the tokens are and how much room is left."""
    budget = stats.budget
    compact_at = int(compact_threshold * budget)
    hard_limit = int(hard_limit_ratio * budget)
    breakdown = {category: stats.breakdown.get(category, 0) for category in CATEGORIES}
    breakdown["room"] = max(0, compact_at - stats.tokens)
    breakdown["reserved"] = max(0, budget - max(stats.tokens, compact_at))
    return {
        "encoding": encoding,
        "budget": budget,
        "tokens": stats.tokens,
        "messages": stats.messages,
        "ratio": round(stats.tokens / budget, 6) if budget else 0.0,
        "history_messages": history_messages,
        "history_tokens": history_tokens,
        "compact_threshold": compact_threshold,
        "compact_at_tokens": compact_at,
        "hard_limit_ratio": hard_limit_ratio,
        "hard_limit_tokens": hard_limit,
        "room_until_compaction": max(0, compact_at - stats.tokens),
        "room_until_limit": max(0, hard_limit - stats.tokens),
        "compactions": stats.compactions,
        "breakdown": breakdown,
        "view": dict(stats.kinds),
        "turns": {
            "recorded": tracker.turns,
            "average_tokens": tracker.average_turn_tokens,
            "left_before_compaction": tracker.turns_left(compact_at - stats.tokens),
            "left_before_limit": tracker.turns_left(hard_limit - stats.tokens),
            "last_input_tokens": tracker.input_tokens,
            "last_output_tokens": tracker.output_tokens,
        },
    }
