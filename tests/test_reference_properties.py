"""Properties of the reference manager, checked with the suite's independent invariants."""

from __future__ import annotations

import asyncio
import copy
import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit import events
from ctxkit.conformance.judge.invariants import (
    check_non_destructive,
    check_ordering,
    check_preservation,
    check_tool_pairs,
)
from ctxkit.conformance.search.conversations import conversations
from ctxkit.reference import ContextBudgetExceeded, ReferenceContextManager

STRATEGY_SETS = st.sampled_from(
    [
        ("truncate",),
        ("truncate_outputs", "truncate"),
        ("truncate_outputs", "importance"),
        ("truncate_outputs", "truncate", "summarize"),
        ("importance", "summarize"),
    ]
)
SETTINGS = settings()  # the profile from conftest.py: HYPOTHESIS_PROFILE=stress digs deeper


class Recorder:
    """Collects the bus's events, for accounting checks."""

    def __init__(self, manager: ReferenceContextManager) -> None:
        self.events: list[events.Event] = []
        manager.bus.subscribe(self.events.append)

    def since(self, mark: int, name: str) -> list[dict[str, Any]]:
        return [dict(e.data) for e in self.events[mark:] if e.name == name]


async def _request(
    manager: ReferenceContextManager,
    recorder: Recorder,
    history: list[dict[str, Any]],
    budget: int,
) -> list[dict[str, Any]] | None:
    """Ask for a view and check every property that must hold of it; None if it overflowed."""
    mark = len(recorder.events)
    try:
        view = await manager.get_messages_for_request(token_budget=budget)
    except ContextBudgetExceeded as exc:
        overflow = exc
    else:
        overflow = None
    if overflow is not None:
        assert overflow.tokens > overflow.budget == budget
        return None
    assert check_tool_pairs(view) == []
    assert check_ordering(history, view) == []
    assert check_non_destructive(history, await manager.get_messages()) == []
    tokens = manager.counter.count_messages(view)
    assert tokens <= budget
    (seen,) = recorder.since(mark, events.VIEW)
    assert seen["token_count"] == tokens
    assert seen["message_count"] == len(view)
    for post in recorder.since(mark, events.POST_COMPACT):
        assert post["token_count"] == tokens  # exact accounting: the event is the view
        assert post["token_count"] <= post["tokens_before"]
    return view


@SETTINGS
@given(history=conversations(), share=st.floats(0.05, 1.5), strategies=STRATEGY_SETS)
def test_any_view_keeps_pairs_order_history_and_budget(history, share, strategies):
    """Budgets as a share of the history's tokens, so most views must compact."""

    async def run() -> None:
        manager = ReferenceContextManager(strategies=strategies)
        await manager.set_messages(history)
        budget = max(60, int(share * manager.usage()["history_tokens"]))
        recorder = Recorder(manager)
        view = await _request(manager, recorder, history, budget)
        if view is not None:
            assert check_preservation(history, view) == []

    asyncio.run(run())


@SETTINGS
@given(
    history=conversations(max_turns=10), budget=st.integers(300, 4_000), strategies=STRATEGY_SETS
)
def test_agent_loop_views_hold_after_every_message(history, budget, strategies):
    """Adding one message at a time and asking after each exercises the hysteresis."""

    async def run() -> None:
        manager = ReferenceContextManager(max_tokens=budget, strategies=strategies)
        recorder = Recorder(manager)
        for count, message in enumerate(history, start=1):
            await manager.add_message(message)
            await _request(manager, recorder, history[:count], budget)

    asyncio.run(run())


@SETTINGS
@given(history=conversations(), budget=st.integers(200, 4_000), strategies=STRATEGY_SETS)
def test_asking_twice_gives_the_same_view_and_no_second_compaction(history, budget, strategies):
    async def run() -> None:
        manager = ReferenceContextManager(max_tokens=budget, strategies=strategies)
        recorder = Recorder(manager)
        await manager.set_messages(history)
        try:
            first = await manager.get_messages_for_request()
        except ContextBudgetExceeded:
            return
        mark = len(recorder.events)
        assert await manager.get_messages_for_request() == first
        assert recorder.since(mark, events.PRE_COMPACT) == []

    asyncio.run(run())


@SETTINGS
@given(history=conversations(), budget=st.integers(200, 4_000))
def test_editing_a_view_or_an_added_message_changes_nothing_stored(history, budget):
    async def run() -> None:
        manager = ReferenceContextManager(max_tokens=budget, on_overflow="best_effort")
        mine = copy.deepcopy(history)
        for message in mine:
            await manager.add_message(message)
        for message in mine:  # the caller keeps editing its own dicts
            message["content"] = "edited"
        view = await manager.get_messages_for_request()
        for message in view:
            message["role"] = "assistant"
            if isinstance(message.get("content"), list):
                message["content"].clear()
        (await manager.get_messages())[0]["content"] = "edited too"
        assert await manager.get_messages() == history

    asyncio.run(run())


@SETTINGS
@given(history=conversations(), budget=st.integers(40, 600))
def test_best_effort_view_holds_only_what_must_stay(history, budget):
    """When pinned content overflows, best_effort still returns a valid view of pins only."""

    async def run() -> None:
        manager = ReferenceContextManager(max_tokens=budget, on_overflow="best_effort")
        await manager.set_messages(history)
        view = await manager.get_messages_for_request()
        assert check_tool_pairs(view) == []
        assert check_ordering(history, view) == []
        if manager.counter.count_messages(view) > budget:
            newest_user = max(
                (
                    i
                    for i, m in enumerate(history)
                    if m["role"] == "user" and isinstance(m["content"], str)
                ),
                default=0,
            )
            tail = iter(history[newest_user:])
            rest = [m for m in view if m["role"] != "system"]
            assert all(any(m == t for t in tail) for m in rest)  # a subsequence of the tail

    asyncio.run(run())


def test_concurrent_adds_from_many_tasks_and_threads_lose_nothing():
    manager = ReferenceContextManager()

    async def add_many(worker: int) -> None:
        for i in range(100):
            await manager.add_message({"role": "user", "content": f"w{worker} m{i}"})
            await asyncio.sleep(0)

    async def tasks(first: int) -> None:
        await asyncio.gather(*(add_many(first + k) for k in range(10)))

    threads = [threading.Thread(target=asyncio.run, args=(tasks(t * 10),)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    stored = asyncio.run(manager.get_messages())
    assert len(stored) == 40 * 100
    by_worker: dict[str, list[int]] = {}
    for message in stored:
        worker, number = message["content"].split()
        by_worker.setdefault(worker, []).append(int(number[1:]))
    assert all(numbers == list(range(100)) for numbers in by_worker.values())
    assert len(by_worker) == 40
    assert manager.usage()["history_tokens"] == sum(
        manager.counter.count_message(m) for m in stored
    )
