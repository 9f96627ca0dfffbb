"""The live-conversation table behind the gauges: each conversation counted once, whatever the
number of others and the order they spoke in; rows expire and the table stays bounded."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from ctxkit import events
from ctxkit.events import EventBus
from ctxkit.telemetry.conversations import ConversationTable
from ctxkit.telemetry.prometheus import PrometheusMetrics


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def view(conversation: str, tokens: int, budget: int = 10_000, **more: Any) -> dict[str, Any]:
    return {
        "conversation_id": conversation,
        "token_count": tokens,
        "budget": budget,
        "compact_threshold": 0.7,
        "history_tokens": tokens * 2,
        "history_messages": 10,
        **more,
    }


@settings(max_examples=60, deadline=None)
@given(
    near=st.integers(0, 12),
    over=st.integers(0, 12),
    calm=st.integers(0, 60),
    data=st.data(),
)
def test_each_conversation_counts_once_whatever_the_order(near, over, calm, data):
    """k conversations past 90% among any number of others, speaking in any order, several
    views each: the gauges say exactly k, and only each conversation's last view counts."""
    # Each conversation's views end at its final state; earlier views may say anything.
    final = (
        [("near", n, 9_500) for n in range(near)]
        + [("over", n, 8_000) for n in range(over)]
        + [("calm", n, 3_000) for n in range(calm)]
    )
    talk = []
    for kind, number, tokens in final:
        earlier = data.draw(st.lists(st.integers(0, 10_500), max_size=3), label="earlier")
        talk.append([(f"{kind}-{number}", t) for t in [*earlier, tokens]])
    order = data.draw(st.permutations(range(len(talk))), label="order")
    table = ConversationTable(clock=Clock())
    cursors = [0] * len(talk)
    for index in data.draw(_interleaving(order, [len(t) for t in talk]), label="interleaving"):
        conversation, tokens = talk[index][cursors[index]]
        cursors[index] += 1
        table.saw(view(conversation, tokens))
    fleet = table.fleet()
    assert fleet.conversations == near + over + calm
    assert fleet.near_limit == near
    assert fleet.over_threshold == near + over
    assert fleet.utilization_max == (0.95 if near else 0.8 if over else 0.3 if calm else 0.0)
    assert fleet.history_tokens == 2 * sum(tokens for _, _, tokens in final)


def _interleaving(order: list[int], lengths: list[int]) -> st.SearchStrategy[list[int]]:
    """Indexes of the conversations in the order their views arrive (each one's in order)."""
    slots = [index for index in order for _ in range(lengths[index])]
    return st.permutations(slots)


def test_rows_expire_after_the_idle_time():
    clock = Clock()
    table = ConversationTable(idle_after=60, clock=clock)
    table.saw(view("old", 9_500))
    clock.now += 30
    table.saw(view("new", 1_000))
    assert table.fleet().conversations == 2
    clock.now += 31  # "old" was seen 61 s ago
    fleet = table.fleet()
    assert (fleet.conversations, fleet.near_limit) == (1, 0)
    assert len(table) == 1  # gone from memory, not only from the count


def test_the_table_keeps_the_most_recently_seen_up_to_its_cap():
    table = ConversationTable(max_conversations=100, clock=Clock())
    for number in range(250):
        table.saw(view(f"c{number}", 9_500 if number < 10 else 1_000))
    table.saw(view("c200", 1_000))  # seen again: kept over c150
    assert len(table) == 100
    fleet = table.fleet()
    assert fleet.conversations == 100
    assert fleet.near_limit == 0  # the ten near the limit were the least recently seen


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"idle_after": 0}, "idle_after"),
        ({"max_conversations": 0}, "max_conversations"),
        ({"max_conversations": True}, "max_conversations"),
        ({"near_limit": 1.5}, "near_limit"),
    ],
)
def test_bad_table_options_are_refused(options, problem):
    with pytest.raises(ValueError, match=problem):
        ConversationTable(**options)


def test_the_subscriber_feeds_the_table_from_many_managers_views():
    metrics = PrometheusMetrics(CollectorRegistry(), near_limit=0.8)
    bus = EventBus()
    bus.subscribe(metrics)

    async def publish() -> None:
        for number in range(30):
            tokens = 8_500 if number % 10 == 0 else 2_000
            await bus.publish(events.VIEW, view(f"c{number}", tokens, duration_s=0.001))

    asyncio.run(publish())
    bus.flush()
    read = metrics.registry.get_sample_value
    assert read("ctxkit_conversations") == 30
    assert read("ctxkit_conversations_near_limit") == 3
    assert read("ctxkit_conversations_over_threshold") == 3
    assert read("ctxkit_context_utilization_max_ratio") == 0.85
    assert read("ctxkit_view_utilization_ratio_count") == 30
