"""The prefix a view keeps of the previous view: what a provider's prompt cache can serve."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxkit.prefix import (
    AGENT_LOOP_STEPS,
    STABILITY_THRESHOLD,
    PrefixTracker,
    agent_loop_stability,
    agent_steps,
    common_prefix_length,
    estimated_cost_ratio,
)
from ctxkit.reference import ReferenceContextManager
from ctxkit.tokens import TokenCounter
from ctxkit.workload import conversation
from tests.chat import run
from tests.zoo.base import GoodManager
from tests.zoo.unusual import SlidesEveryTurn

COUNTER = TokenCounter()


def costs_of(view: list[dict[str, Any]]) -> list[int]:
    return [COUNTER.message_cost(m).total for m in view]


def observe(tracker: PrefixTracker, view: list[dict[str, Any]]) -> tuple[int, int]:
    costs = costs_of(view)
    kept = tracker.observe(list(view), costs, sum(costs))
    return kept.tokens, kept.previous


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_identical_appended_compacted_and_summarized_views(shape: str):
    history = conversation(30, seed=3, shape=shape)
    tracker = PrefixTracker()
    first = history[:10]
    total = sum(costs_of(first))
    assert observe(tracker, first) == (0, 0)  # nothing before the first view
    assert observe(tracker, first) == (total, total)  # the same view again: all of it
    longer = history[:14]
    assert observe(tracker, longer) == (total, total)  # appended: the old view is the prefix
    compacted = [history[0], *history[5:14]]  # the system message stays, the oldest go
    assert observe(tracker, compacted) == (
        COUNTER.message_cost(history[0]).total,
        sum(costs_of(longer)),
    )
    summary = {"role": "user", "content": "Summary of the earlier conversation: ..."}
    summarized = [history[0], summary, *history[9:14]]
    kept, previous = observe(tracker, summarized)
    assert kept == COUNTER.message_cost(history[0]).total
    assert previous == sum(costs_of(compacted))
    assert observe(tracker, [*summarized, *history[14:16]])[0] == sum(costs_of(summarized))


def test_a_changed_message_ends_the_prefix_even_with_the_same_length():
    tracker = PrefixTracker()
    view = [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}]
    observe(tracker, view)
    shortened = [view[0], {"role": "user", "content": "a (shortened)"}]
    assert observe(tracker, shortened)[0] == COUNTER.message_cost(view[0]).total


def test_the_same_list_appended_to_is_kept_whole_without_comparing():
    class NeverEqual:
        def __eq__(self, other: object) -> bool:
            raise AssertionError("compared")

        __hash__ = None  # type: ignore[assignment]

    items: list[object] = [NeverEqual(), NeverEqual()]
    costs = [5, 7]
    tracker = PrefixTracker()
    tracker.observe(items, costs, 12)
    items.append(NeverEqual())
    costs.append(1)
    kept = tracker.observe(items, costs, 13)
    assert (kept.tokens, kept.previous, kept.ratio) == (12, 12, 1.0)


def test_reset_makes_the_next_view_a_first_view():
    tracker = PrefixTracker()
    tracker.observe(["a"], [3], 3)
    tracker.reset()
    kept = tracker.observe(["a"], [3], 3)
    assert (kept.tokens, kept.previous, kept.ratio) == (0, 0, None)


@given(st.lists(st.integers(0, 3)), st.lists(st.integers(0, 3)))
def test_the_common_prefix_is_the_longest_equal_start(previous: list[int], current: list[int]):
    length = common_prefix_length(previous, current)
    assert previous[:length] == current[:length]
    if length < min(len(previous), len(current)):
        assert previous[length] != current[length]


def test_the_estimated_cost_ratio_bills_the_kept_prefix_at_the_cached_price():
    assert estimated_cost_ratio(0, 1_000, 0.1) == 1.0
    assert estimated_cost_ratio(1_000, 1_000, 0.1) == pytest.approx(0.1)
    assert estimated_cost_ratio(500, 1_000, 0.5) == pytest.approx(0.75)
    assert estimated_cost_ratio(0, 0, 0.1) == 1.0


def test_the_reference_managers_views_say_what_they_kept():
    """Between compactions a reference view extends the previous one; a compaction keeps
    only the pinned start. The event says both, exactly."""
    seen: list[dict[str, Any]] = []

    async def scenario() -> None:
        manager = ReferenceContextManager(max_tokens=3_000)
        manager.bus.subscribe(
            lambda event: seen.append(dict(event.data)) if event.name == "ctxkit:view" else None
        )
        views = []
        for message in conversation(80, seed=5):
            await manager.add_message(message)
            if message["role"] == "user":
                views.append(await manager.get_messages_for_request())
        tracker = PrefixTracker()
        for view, data in zip(views, seen, strict=True):
            assert (data["prefix_tokens"], data["previous_tokens"]) == observe(tracker, view)
        assert any(d["compacted"] for d in seen)
        assert any(not d["compacted"] and d["previous_tokens"] for d in seen)

    run(scenario())
    extended = [d for d in seen if not d["compacted"] and d["previous_tokens"]]
    assert all(d["prefix_tokens"] == d["previous_tokens"] for d in extended)
    compacted = [d for d in seen if d["compacted"]]
    assert all(d["prefix_tokens"] < d["previous_tokens"] for d in compacted)


def test_over_an_agent_loop_the_reference_keeps_its_prefix_and_windows_do_not():
    """The advisory property's figure, measured in process over the whole loop: the
    reference compacts rarely and then extends its view; a window that drops the oldest
    units when full keeps about half; one that moves its start every request, little."""

    async def share(manager: Any) -> float:
        return (await agent_loop_stability(manager, agent_steps(AGENT_LOOP_STEPS))).share

    reference = run(share(ReferenceContextManager()))
    window = run(share(GoodManager()))
    sliding = run(share(SlidesEveryTurn()))
    assert reference >= STABILITY_THRESHOLD > window > sliding
    assert sliding < 0.3
