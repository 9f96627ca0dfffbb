"""Prompt-cache stability: how much of a view repeats the start of the view before it.

Providers bill a prompt prefix they have cached at a fraction of the price (OpenAI and
Anthropic both discount cached prefix tokens heavily). A view that begins, message for
message, exactly as the previous view of its conversation began keeps that prefix cached; a
manager that rewrites the start of its view on every turn (a sliding window dropping one
message per request) pays full price every turn. This module measures it, exactly and
message by message: the tokens of the longest common prefix of two consecutive views.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxkit.shapes import inspect_message

__all__ = [
    "AGENT_LOOP_BUDGET",
    "AGENT_LOOP_STEPS",
    "STABILITY_THRESHOLD",
    "PrefixKept",
    "PrefixTracker",
    "Stability",
    "agent_loop_stability",
    "agent_steps",
    "common_prefix_length",
    "estimated_cost_ratio",
    "steps_of",
]

STABILITY_THRESHOLD = 0.7
"""The advisory verdict's bar: over a long agent loop, at least 70% of all view tokens
repeat the start of the previous view (a prompt cache can serve them). The reference
manager keeps about 85%; a window that drops the oldest units whenever it is full, about
half; one that moves its start every request, far less."""
AGENT_LOOP_STEPS = 150
"""Model calls in the agent loop the measure runs (a view before each)."""
AGENT_LOOP_BUDGET = 12_000
"""The loop's token budget: small enough that its tool outputs force compactions."""


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


@dataclass(frozen=True, slots=True)
class Stability:
    """Prompt-cache stability over an agent loop."""

    kept_tokens: int
    """View tokens that repeated the start of the previous view, summed over the views."""
    view_tokens: int
    """All view tokens (message tokens, without the reply priming), summed."""
    views: int

    @property
    def share(self) -> float:
        """The share of view tokens a prompt cache could serve."""
        return self.kept_tokens / self.view_tokens if self.view_tokens else 0.0

    def describe(self, threshold: float = STABILITY_THRESHOLD) -> str:
        verdict = "at or above" if self.share >= threshold else "below"
        return (
            f"{self.share:.1%} of view tokens repeat the start of the previous view over "
            f"{self.views} views of an agent loop, {verdict} the {threshold:.0%} threshold"
        )


def steps_of(messages: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """A conversation cut where an agent calls the model: before each model output (an
    assistant message, a Gemini ``model`` turn, a run of Responses output items).
    Each step is what the agent adds between two model calls; what follows the last
    model output is no step (no model call comes after it)."""
    step: list[dict[str, Any]] = []
    after_model = False
    for message in messages:
        from_model = inspect_message(message).role == "assistant"
        if from_model and not after_model and step:
            yield step
            step = []
        step.append(message)
        after_model = from_model


def agent_steps(
    count: int = AGENT_LOOP_STEPS, *, seed: int = 1, shape: str = "mixed"
) -> Iterator[list[dict[str, Any]]]:
    """``count`` steps of ctxkit's synthetic agent traffic (tool outputs up to 6 KB)."""
    from ctxkit.workload import Workload

    workload = Workload(seed=seed, shape=shape, max_output_bytes=6_000)
    return itertools.islice(steps_of(itertools.chain.from_iterable(workload.turns())), count)


async def agent_loop_stability(
    manager: Any,
    steps: Iterable[list[dict[str, Any]]],
    *,
    budget: int = AGENT_LOOP_BUDGET,
    count_message: Callable[[dict[str, Any]], int] | None = None,
) -> Stability:
    """Drive ``manager`` (anything with the context contract) as an agent does: add each
    step's messages, then ask for a view under ``budget``; measure every view against the
    one before it. ``count_message``: a message's tokens (ctxkit's exact count by default).
    Raises ValueError when a view is not a list of messages."""
    if count_message is None:
        from ctxkit.tokens import TokenCounter

        count_message = TokenCounter().count_message
    tracker = PrefixTracker()
    kept_total = view_total = views = 0
    for step in steps:
        for message in step:
            await manager.add_message(message)
        returned = await manager.get_messages_for_request(token_budget=budget)
        if not isinstance(returned, list | tuple) or not all(
            isinstance(message, Mapping) for message in returned
        ):
            raise ValueError(f"view {views + 1} is not a list of messages: {returned!r:.80}")
        view = list(returned)
        costs = [count_message(message) for message in view]
        total = sum(costs)
        kept_total += tracker.observe(view, costs, total).tokens
        view_total += total
        views += 1
    return Stability(kept_tokens=kept_total, view_tokens=view_total, views=views)
