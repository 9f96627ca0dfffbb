"""Prompt-cache stability: how much of a view repeats the start of the view before it.

Providers bill a prompt prefix they have cached at a fraction of the price (OpenAI and
Anthropic both discount cached prefix tokens heavily). A view that begins, message for
message, exactly as the previous view of its conversation began keeps that prefix cached; a
manager that rewrites the start of its view on every turn (a sliding window dropping one
message per request) pays full price every turn. This module measures it, exactly and
message by message: the tokens of the longest common prefix of two consecutive views.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PrefixKept", "PrefixTracker", "common_prefix_length", "estimated_cost_ratio"]


@dataclass(frozen=True, slots=True)
class PrefixKept:
    """One view against the previous view of its conversation."""

    tokens: int
    """Tokens of the longest common prefix, message by message (0 for the first view)."""
    previous: int
    """Tokens of the previous view's messages (0 for the first view)."""

    @property
    def ratio(self) -> float | None:
        """The share of the previous view kept as this view's prefix; None for the first."""
        return self.tokens / self.previous if self.previous else None


def common_prefix_length(previous: Sequence[object], current: Sequence[object]) -> int:
    """How many leading items two views share (equal, or the very same object)."""
    count = 0
    for old, new in zip(previous, current, strict=False):
        if old is not new and old != new:
            break
        count += 1
    return count


class PrefixTracker:
    """One conversation's previous view, to measure each new view against it.

    ``observe(items, costs, total)``: ``items`` stand for the view's messages (the messages
    themselves, or fingerprints of them), ``costs`` their tokens, ``total`` their sum. A
    caller that only ever appends to the list it passed last time may pass the same list
    again: then the whole previous view is the prefix, found without comparing anything.
    """

    def __init__(self) -> None:
        self._items: Sequence[object] = ()
        self._length = 0
        self._total = 0

    def observe(self, items: Sequence[object], costs: Sequence[int], total: int) -> PrefixKept:
        previous, length = self._items, self._length
        if items is previous and len(items) >= length:
            kept = self._total  # the same list, only appended to since
        else:
            kept = sum(costs[: common_prefix_length(previous[:length], items)])
        result = PrefixKept(tokens=kept, previous=self._total)
        self._items, self._length, self._total = items, len(items), total
        return result

    def reset(self) -> None:
        """Forget the previous view (the history was replaced or cleared)."""
        self._items, self._length, self._total = (), 0, 0


def estimated_cost_ratio(kept_tokens: int, view_tokens: int, cached_price: float) -> float:
    """Input cost of the views with prompt caching over their cost without it: kept-prefix
    tokens billed at ``cached_price`` (a share of the full price, e.g. 0.1), the rest full."""
    if view_tokens <= 0:
        return 1.0
    return (view_tokens - kept_tokens + cached_price * kept_tokens) / view_tokens
