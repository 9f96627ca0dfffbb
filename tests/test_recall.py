"""Recall in the reference manager: the units a view left out (or showed coarse) that the newest
user message asks about come back whole, in history order, within their share of the budget;
the memory follows the history (writes behind it, rebuilt from it) and survives what the
history survives; the conformance suite with recall on, alone and with ``hierarchical``."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from ctxkit import events
from ctxkit.conformance.judge.invariants import (
    check_attachments,
    check_ordering,
    check_preservation,
    check_tool_pairs,
)
from ctxkit.conformance.runner import RunOptions, run
from ctxkit.conformance.search.conversations import conversation_plans
from ctxkit.messages import group_units, inspect_message, text_of, validate_history
from ctxkit.reference import ConfigError, ContextBudgetExceeded, ReferenceContextManager
from ctxkit.reference.memory import HashEmbedder, MemoryFileCorrupt
from ctxkit.reference.recall import memory_path_for
from ctxkit.workload import Workload
from tests.test_hierarchical import SHAPE_SETS, Recorder, ends_plain, minimal_view_tokens

STRATEGY_SETS = st.sampled_from(
    [
        ("truncate",),
        ("truncate_outputs", "truncate"),
        ("truncate", "summarize"),
        ("importance",),
        ("hierarchical",),
        ("truncate_outputs", "hierarchical"),
        ("truncate_outputs", "truncate", "hierarchical", "summarize"),
    ]
)
RECALL_OPTIONS = st.fixed_dictionaries(
    {
        "share": st.sampled_from([0.1, 0.2, 0.4]),
        "threshold": st.sampled_from([0.0, 0.3, 0.7]),
        "limit": st.integers(1, 6),
    }
)


def run_async(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def left_out_by_audit(manager: ReferenceContextManager) -> set[int]:
    """The history messages some compaction left out or showed coarse, by the audit log."""
    found: set[int] = set()
    for entry in manager.audit():
        for start, stop in [*entry["dropped"], *entry["summarized"]]:
            found.update(range(start, stop))
    return found


def coarse_by_audit(manager: ReferenceContextManager) -> set[int]:
    """The history messages some compaction showed as a paragraph or a line (or summarized)."""
    return {
        index
        for entry in manager.audit()
        for start, stop in entry["summarized"]
        for index in range(start, stop)
    }


async def checked_view(
    manager: ReferenceContextManager,
    recorder: Recorder,
    history: list[dict[str, Any]],
    budget: int,
    recall: dict[str, Any],
) -> list[dict[str, Any]] | None:
    """A view with every property checked that recall must keep; None if it overflowed, which
    it may only do when even the smallest view does not fit."""
    mark = len(recorder.events)
    try:
        view = await manager.get_messages_for_request(token_budget=budget)
    except ContextBudgetExceeded:
        if ends_plain(history):
            assert minimal_view_tokens(manager, history) > budget
        return None
    assert check_tool_pairs(view) == []
    assert check_ordering(history, view) == []
    assert check_attachments(history, view) == []
    assert check_preservation(history, view) == []
    tokens = manager.counter.count_messages(view)
    assert tokens <= budget
    (seen,) = recorder.since(mark, events.VIEW)
    assert seen["token_count"] == tokens
    rows = seen["listing"]
    recalled = [row for row in rows if row["fate"] == "recalled"]
    shown = [row for row in rows if row["fate"] in ("kept", "truncated", "summary", "recalled")]
    assert len(shown) == len(view)
    # Whole units, as the events name them, each of them left out or coarse before.
    units = group_units(validate_history(history))
    starts, stops = {u.start for u in units}, {u.stop for u in units}
    ranges = seen["recalled_ranges"]
    in_ranges = [i for start, stop in ranges for i in range(start, stop)]
    assert [row["index"] for row in recalled] == in_ranges
    assert all(start in starts and stop in stops for start, stop in ranges)
    whole = [u for u in units if any(u.start <= i < u.stop for i in in_ranges)]
    assert seen["units_recalled"] == len(whole) <= recall["limit"]
    assert set(in_ranges) <= left_out_by_audit(manager)
    # The share bounds the recalled units' tokens as the view shows them, also with levels,
    # where a recalled unit replaces its paragraph or line (and adds only the difference).
    assert sum(row["tokens"] for row in recalled) <= recall["share"] * budget
    coarse_before = coarse_by_audit(manager)
    if any(index in coarse_before for index in in_ranges):
        event("recalled a unit shown coarse before")
    event("recalled" if recalled else "nothing recalled")
    for post in recorder.since(mark, events.POST_COMPACT):
        assert post["token_count"] == tokens
        assert post["units_recalled"] == seen["units_recalled"]
    return view


# -- properties --------------------------------------------------------------------------------


@settings(max_examples=60)
@given(
    plan=conversation_plans(),
    shapes=SHAPE_SETS,
    share=st.floats(0.05, 1.5),
    strategies=STRATEGY_SETS,
    recall=RECALL_OPTIONS,
)
def test_any_view_recalls_whole_left_out_units_in_order_within_the_budget(
    plan, shapes, share, strategies, recall
):
    """One view of a whole history: pairs, order, the newest user message and the budget
    hold; what came back is whole units a compaction had left out or shown coarse, within
    the share; asking again, or asking a twin, gives the same view."""
    # About 20 s on a loaded machine: each of the 60 examples loads a whole generated history
    # into two managers (one the twin) and compacts it with recall.
    history = plan.messages(shapes)

    async def check() -> None:
        config = {"strategies": strategies, "recall": recall, "view_listing": True}
        manager = ReferenceContextManager(**config)
        await manager.set_messages(history)
        budget = max(60, int(share * manager.usage()["history_tokens"]))
        view = await checked_view(manager, Recorder(manager), history, budget, recall)
        if view is None:
            return
        assert await manager.get_messages_for_request(token_budget=budget) == view
        twin = ReferenceContextManager(**config)
        await twin.set_messages(history)
        assert await twin.get_messages_for_request(token_budget=budget) == view
        manager.close()
        twin.close()

    run_async(check())


@settings(max_examples=30)
@given(
    plan=conversation_plans(max_turns=10),
    shapes=SHAPE_SETS,
    budget=st.integers(300, 4_000),
    strategies=STRATEGY_SETS,
    recall=RECALL_OPTIONS,
)
def test_agent_loop_views_with_recall_hold_at_every_step(plan, shapes, budget, strategies, recall):
    """One message at a time, a view after each: each new user turn asks again, compactions
    keep room for what it finds, and every view keeps what the first property checks."""
    history = plan.messages(shapes)

    async def check() -> None:
        manager = ReferenceContextManager(
            max_tokens=budget, strategies=strategies, recall=recall, view_listing=True
        )
        recorder = Recorder(manager)
        for count, message in enumerate(history, start=1):
            await manager.add_message(message)
            await checked_view(manager, recorder, history[:count], budget, recall)
        manager.close()

    run_async(check())


# -- what comes back ---------------------------------------------------------------------------

FACT_OUTPUT = "\n".join(
    [
        "deploy log",
        *(f"step {i}: pulled layer {i * 7919 % 65536:04x}, ok" for i in range(30)),
        "release checksum of Vexaron: 7f3a9c2e",
        "done",
    ]
)


def long_conversation(rounds: int = 60) -> list[dict[str, Any]]:
    """A system prompt, an early tool call whose output holds a fact, then many turns of
    agent traffic that say nothing of it."""
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a deploy assistant."},
        {"role": "user", "content": "Deploy Vexaron and keep the log."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_deploy",
                    "type": "function",
                    "function": {"name": "deploy", "arguments": '{"service": "Vexaron"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_deploy", "content": FACT_OUTPUT},
        {"role": "assistant", "content": "Deployed."},
    ]
    traffic = Workload(seed=5, shape="openai").messages(rounds * 6)
    for message in traffic:
        if message.get("role") == "system":
            continue
        history.append(message)
    while inspect_message(history[-1]).call_ids or history[-1].get("role") == "tool":
        history.pop()
    return history


ASK = {"role": "user", "content": "What was the release checksum of Vexaron?"}


def last_view_event(recorder: Recorder) -> dict[str, Any]:
    return recorder.since(0, events.VIEW)[-1]


def test_an_old_tool_result_asked_about_again_returns_with_its_call():
    history = long_conversation()

    async def check() -> None:
        manager = ReferenceContextManager(
            strategies=["truncate_outputs", "truncate"], recall={}, view_listing=True
        )
        recorder = Recorder(manager)
        await manager.set_messages(history)
        budget = manager.usage()["history_tokens"] // 4
        view = await manager.get_messages_for_request(token_budget=budget)
        assert all("7f3a9c2e" not in text_of(m) for m in view)  # left out
        await manager.add_message(ASK)
        view = await manager.get_messages_for_request(token_budget=budget)
        seen = last_view_event(recorder)
        assert seen["recalled_ranges"] == [[2, 4]]  # the call and its result
        assert seen["units_recalled"] == 1
        position = view.index(history[2])
        assert view[position + 1] == history[3]
        assert view[-1] == ASK
        recalled = [row["index"] for row in seen["listing"] if row["fate"] == "recalled"]
        assert recalled == [2, 3]
        assert manager.counter.count_messages(view) <= budget
        manager.close()

    run_async(check())


def test_a_compaction_makes_room_for_what_is_found_up_to_the_midpoint_of_its_hysteresis():
    """The view lands on target_ratio; recalled units may take it up to the midpoint between
    target_ratio and compact_threshold, and when what is found needs more, the compaction
    keeps that room aside: the big result comes back and the view stays under the midpoint."""
    output = "\n".join([FACT_OUTPUT, *(f"layer {i} verified" for i in range(60))])
    history = long_conversation(rounds=0)
    history[3] = {**history[3], "content": output}
    for i in range(300):
        history += [
            {"role": "user", "content": f"status of job {i}?"},
            {"role": "assistant", "content": f"job {i} is running fine"},
        ]
    budget = 4_000

    async def check() -> None:
        manager = ReferenceContextManager(recall={"share": 0.2})
        recorder = Recorder(manager)
        await manager.set_messages([*history, ASK])
        found = manager.counter.count_messages(history[2:4])
        assert 0.1 * budget < found < 0.2 * budget
        view = await manager.get_messages_for_request(token_budget=budget)
        (post,) = recorder.since(0, events.POST_COMPACT)
        assert post["units_recalled"] == 1
        assert view[view.index(history[2]) + 1] == history[3]
        tokens = manager.counter.count_messages(view)
        assert post["token_count"] == tokens
        assert 0.5 * budget < tokens <= 0.6 * budget
        manager.close()

    run_async(check())


def test_recall_takes_at_most_its_share_and_its_limit_and_only_what_reaches_the_threshold():
    notes = [f"note {i}: the Vexaron rotation window is {i} days" for i in range(12)]
    filler = Workload(seed=9, shape="openai").messages(400)

    async def view_for(recall: dict[str, Any], ask: str) -> tuple[list[Any], dict[str, Any]]:
        manager = ReferenceContextManager(recall=recall, view_listing=True)
        recorder = Recorder(manager)
        history: list[dict[str, Any]] = []
        for note in notes:
            history += [{"role": "user", "content": note}, {"role": "assistant", "content": "ok"}]
        history += [m for m in filler if m.get("role") != "system"]
        while inspect_message(history[-1]).call_ids or history[-1].get("role") == "tool":
            history.pop()
        await manager.set_messages([*history, {"role": "user", "content": ask}])
        budget = manager.usage()["history_tokens"] // 5
        view = await manager.get_messages_for_request(token_budget=budget)
        seen = last_view_event(recorder)
        seen["budget"] = budget
        manager.close()
        return view, seen

    async def check() -> None:
        ask = "What is the Vexaron rotation window?"
        view, seen = await view_for({"limit": 3}, ask)
        assert seen["units_recalled"] == 3
        assert sum(1 for m in view if "rotation window is" in text_of(m)) == 3
        _view, seen = await view_for({"limit": 12, "share": 0.01}, ask)
        recalled = sum(row["tokens"] for row in seen["listing"] if row["fate"] == "recalled")
        assert 0 < recalled <= 0.01 * seen["budget"]
        _view, seen = await view_for({}, "Which kubernetes namespace holds the ingress?")
        assert seen["units_recalled"] == 0

    run_async(check())


def test_with_hierarchical_a_unit_shown_as_one_line_comes_back_whole():
    history = long_conversation(rounds=120)

    async def check() -> None:
        manager = ReferenceContextManager(strategies=["hierarchical"], recall={}, view_listing=True)
        recorder = Recorder(manager)
        await manager.set_messages(history)
        budget = manager.usage()["history_tokens"] // 5
        view = await manager.get_messages_for_request(token_budget=budget)
        assert history[3] not in view  # the result is only an outline now
        (post,) = recorder.since(0, events.POST_COMPACT)
        assert any(a <= 2 and b >= 4 for a, b, _level in post["level_ranges"])
        await manager.add_message(ASK)
        view = await manager.get_messages_for_request(token_budget=budget)
        seen = last_view_event(recorder)
        assert [2, 4] in seen["recalled_ranges"]
        assert view[view.index(history[2]) + 1] == history[3]
        rows = [row for row in seen["listing"] if row.get("stands_for") == [2, 4]]
        assert rows == []  # no longer shown as a line as well
        assert seen["units_by_level"]["full"] >= 1
        manager.close()

    run_async(check())


@settings(max_examples=25, deadline=None)
@example(share=0.05, divisor=3, n=69, limit=2, strategies=("hierarchical",))
@given(
    share=st.sampled_from([0.05, 0.1, 0.2, 0.3]),
    divisor=st.integers(3, 30),
    n=st.integers(0, 80),
    limit=st.integers(1, 5),
    strategies=st.sampled_from([("hierarchical",), ("truncate_outputs", "hierarchical")]),
)
def test_with_levels_recalled_units_take_at_most_their_share_as_the_view_shows_them(
    share, divisor, n, limit, strategies
):
    """With hierarchical levels a recalled unit replaces its paragraph or line, so the view
    grows by less than the unit costs; the share still bounds what the recalled units take
    as the view shows them (their listing rows), not only what they add. (The example: two
    units whose whole tokens passed the share by 1% while what they added did not.)"""
    history = long_conversation(rounds=30)
    deploys: list[dict[str, Any]] = []
    for k in range(4):  # four old deploys, each asked about by the same question
        output = "\n".join(
            [
                "deploy log",
                *(f"step {i}: pulled layer {(i + 31 * k) * 7919 % 65536:04x}" for i in range(n)),
                f"release checksum of Vexaron: {k}f3a9c2e",
            ]
        )
        call = {**history[2], "tool_calls": [{**history[2]["tool_calls"][0], "id": f"call_{k}"}]}
        deploys += [call, {"role": "tool", "tool_call_id": f"call_{k}", "content": output}]
    history = [*history[:2], *deploys, *history[4:]]
    recall = {"share": share, "limit": limit, "threshold": 0.3}

    async def check() -> None:
        manager = ReferenceContextManager(
            strategies=list(strategies), recall=recall, view_listing=True
        )
        recorder = Recorder(manager)
        await manager.set_messages(history)
        budget = manager.usage()["history_tokens"] // divisor
        await manager.get_messages_for_request(token_budget=budget)
        await manager.add_message(ASK)
        view = await checked_view(manager, recorder, [*history, ASK], budget, recall)
        assert view is not None
        seen = last_view_event(recorder)
        recalled = sum(row["tokens"] for row in seen["listing"] if row["fate"] == "recalled")
        assert recalled <= share * budget
        event(f"units recalled: {seen['units_recalled']}")
        manager.close()

    run_async(check())


def test_steps_between_user_turns_do_not_search_the_memory_again():
    history = long_conversation()

    async def check() -> None:
        manager = ReferenceContextManager(max_tokens=6_000, recall={})
        memory = manager.memory
        assert memory is not None
        searches = 0
        retrieve = memory.retrieve

        async def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal searches
            searches += 1
            return await retrieve(*args, **kwargs)

        memory.retrieve = counted  # type: ignore[method-assign]
        await manager.set_messages([*history, ASK])
        await manager.get_messages_for_request()
        asked = searches
        assert asked >= 1
        for i in range(5):  # a tool round per step, no user turn, no compaction
            await manager.add_message({"role": "assistant", "content": f"step {i}"})
            await manager.get_messages_for_request()
        assert searches == asked
        await manager.add_message({"role": "user", "content": "and the staging port?"})
        await manager.get_messages_for_request()
        assert searches == asked + 1
        manager.close()

    run_async(check())


# -- the memory follows the history ------------------------------------------------------------


def test_messages_are_stored_with_their_index_unit_role_and_conversation_by_role():
    history = long_conversation(rounds=2)

    async def check() -> None:
        manager = ReferenceContextManager(
            recall={}, memory_roles=["tool"], conversation_id="conv-1"
        )
        await manager.set_messages(history)
        assert await manager.memory_synced()
        assert manager.memory is not None
        (hit,) = await manager.memory.retrieve("release checksum Vexaron", limit=3)
        assert hit.metadata == {"conversation": "conv-1", "index": 3, "unit": 2, "role": "tool"}
        tools = sum(1 for m in history if inspect_message(m).result_ids and text_of(m).strip())
        assert await manager.memory.count() == tools
        manager.close()

    run_async(check())


def test_add_message_does_not_wait_for_the_memory():
    """The embedder is held until every add has returned and the event loop has run on: an
    add that waited for it would leave it to give up, which fails the test (no wall-clock
    bound, which a loaded machine breaks)."""
    release, gave_up = threading.Event(), []

    class HeldEmbedder:
        name = "held"

        def __call__(self, texts: list[str]) -> list[list[float]]:
            if not gave_up and not release.wait(10):  # gives up once, then embeds at once
                gave_up.append(len(texts))
            return HashEmbedder(16)(texts)

    async def check() -> None:
        manager = ReferenceContextManager(recall={}, embedder=HeldEmbedder())
        ticked = asyncio.Event()

        async def ticker() -> None:
            for _ in range(5):
                await asyncio.sleep(0.01)
            ticked.set()

        task = asyncio.create_task(ticker())
        for i in range(20):
            await manager.add_message({"role": "user", "content": f"message number {i}"})
            await asyncio.sleep(0)
        # the loop goes on while the writer waits for the embedder
        await asyncio.wait_for(ticked.wait(), 10)
        release.set()
        assert await manager.memory_synced()
        task.cancel()
        assert not gave_up, "an add waited for the embedder"
        assert manager.memory is not None
        assert await manager.memory.count() == 20
        manager.close()

    run_async(check())


def test_set_messages_clear_and_restore_store_the_new_history_again(tmp_path: Path):
    first = long_conversation(rounds=3)

    async def check() -> None:
        manager = ReferenceContextManager(recall={}, storage_path=tmp_path / "c.jsonl")
        for message in first:
            await manager.add_message(message)
        point = await manager.checkpoint()
        await manager.set_messages([{"role": "user", "content": "a new start about kubernetes"}])
        assert await manager.memory_synced()
        memory = manager.memory
        assert memory is not None
        assert await memory.count() == 1
        assert await memory.retrieve("release checksum Vexaron") == []
        await manager.restore(point)
        assert await manager.memory_synced()
        (hit,) = await memory.retrieve("release checksum Vexaron", limit=2)
        assert hit.metadata["index"] == 3
        await manager.clear()
        assert await manager.memory_synced()
        assert await memory.count() == 0
        manager.close()

    run_async(check())


def test_the_memory_file_lives_beside_the_history_and_is_not_rebuilt_on_reopening(
    tmp_path: Path,
):
    path = tmp_path / "c.jsonl"
    history = long_conversation(rounds=3)

    async def check() -> None:
        async with ReferenceContextManager(recall={}, storage_path=path) as manager:
            for message in history:
                await manager.add_message(message)
        memory_file = memory_path_for(path)
        assert memory_file == tmp_path / "c.jsonl.memory.sqlite"
        assert memory_file.exists()
        manager = ReferenceContextManager(recall={}, storage_path=path)
        assert manager.memory is not None
        before = await manager.memory.count()
        assert await manager.memory_synced()
        assert await manager.memory.count() == before
        (hit,) = await manager.memory.retrieve("release checksum Vexaron", limit=1)
        assert hit.id <= before  # the same item, not stored again
        manager.close()

    run_async(check())


def test_a_memory_behind_its_history_catches_up_and_a_lost_one_is_rebuilt(tmp_path: Path):
    path = tmp_path / "c.jsonl"
    history = long_conversation(rounds=3)

    async def check() -> None:
        manager = ReferenceContextManager(recall={}, storage_path=path)
        for message in history[:5]:
            await manager.add_message(message)
        assert await manager.memory_synced()
        assert manager.memory is not None
        (early,) = await manager.memory.retrieve("release checksum Vexaron", limit=2)
        for message in history[5:]:
            await manager.add_message(message)  # no await that yields: never written
        manager.close()
        manager = ReferenceContextManager(recall={}, storage_path=path)
        assert await manager.memory_synced()  # the missing end found and stored
        assert manager.memory is not None
        stored = await manager.memory.count()
        (again,) = await manager.memory.retrieve("release checksum Vexaron", limit=2)
        assert again.id == early.id  # the stored start was kept, not stored again
        manager.close()
        for name in os.listdir(tmp_path):
            if ".memory.sqlite" in name:
                os.unlink(tmp_path / name)
        manager = ReferenceContextManager(recall={}, storage_path=path)
        assert await manager.memory_synced()
        assert await manager.memory.count() == stored  # type: ignore[union-attr]
        assert await manager.rebuild_memory() == stored
        (hit,) = await manager.memory.retrieve("release checksum Vexaron", limit=2)  # type: ignore[union-attr]
        assert hit.metadata["index"] == 3
        manager.close()

    run_async(check())


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from ctxkit.reference import ReferenceContextManager

    async def main(path):
        manager = ReferenceContextManager(recall={}, storage_path=path)
        i = len(await manager.get_messages())
        while True:
            await manager.add_message({"role": "user", "content": f"entry {i} planted word w{i}"})
            print(f"ack {i}", flush=True)
            await asyncio.sleep(0)  # the memory writer runs
            i += 1

    asyncio.run(main(sys.argv[1]))
    """
)


def test_sigkill_during_memory_writes_loses_no_message_and_the_memory_catches_up(
    tmp_path: Path,
):
    path = tmp_path / "c.jsonl"
    acked = -1
    for _round in range(3):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout is not None
        for line in writer.stdout:
            acked = int(line.split()[1])
            if acked % 40 == 39:
                break
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()

    async def check() -> None:
        manager = ReferenceContextManager(recall={}, storage_path=path)
        messages = await manager.get_messages()
        assert len(messages) >= acked + 1  # every acknowledged message is in the history
        assert await manager.memory_synced()
        assert await manager.memory.count() == len(messages)  # type: ignore[union-attr]
        (hit,) = await manager.memory.retrieve(f"w{acked}", limit=3)  # type: ignore[union-attr]
        assert hit.metadata["index"] == acked
        manager.close()

    run_async(check())


def test_a_damaged_memory_file_is_refused_with_a_sentence_and_the_history_stays_usable(
    tmp_path: Path,
):
    path = tmp_path / "c.jsonl"
    memory_file = memory_path_for(path)
    memory_file.write_bytes(b"SQLite format 3\x00" + b"\x13" * 4_000)
    before = memory_file.read_bytes()
    with pytest.raises(MemoryFileCorrupt, match="rebuilt from the history"):
        ReferenceContextManager(recall={}, storage_path=path)
    assert memory_file.read_bytes() == before
    manager = ReferenceContextManager(  # the history file was released
        recall={}, storage_path=path, memory_path=tmp_path / "new.memory.sqlite"
    )
    manager.close()


def test_a_failing_embedder_falls_back_to_text_search_and_says_so_once(caplog):
    class Failing:
        name = "failing"

        def __call__(self, texts: list[str]) -> list[list[float]]:
            raise ConnectionError("the embeddings endpoint is down")

    history = long_conversation()

    async def check() -> None:
        manager = ReferenceContextManager(recall={}, embedder=Failing())
        await manager.set_messages([*history, ASK])
        budget = manager.usage()["history_tokens"] // 4
        view = await manager.get_messages_for_request(token_budget=budget)
        assert history[3] in view
        await manager.add_message({"role": "user", "content": "again: the checksum of Vexaron?"})
        await manager.get_messages_for_request(token_budget=budget)
        manager.close()

    with caplog.at_level(logging.WARNING, logger="ctxkit.reference.recall"):
        run_async(check())
    said = [r.getMessage() for r in caplog.records if "endpoint is down" in r.getMessage()]
    assert len(said) == 1
    assert "text only" in said[0]


def test_a_real_embedder_searches_by_vector_and_text():
    history = long_conversation()

    async def check() -> None:
        manager = ReferenceContextManager(recall={}, embedder=HashEmbedder(64))
        await manager.set_messages([*history, ASK])
        budget = manager.usage()["history_tokens"] // 4
        view = await manager.get_messages_for_request(token_budget=budget)
        assert history[3] in view
        stats = await manager.memory.stats()  # type: ignore[union-attr]
        assert stats.vectors == stats.items > 0
        assert stats.dimensions == 64
        manager.close()

    run_async(check())


# -- configuration -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"recall": {"share": 0}}, "recall.share must be a share of the budget in (0, 1)"),
        ({"recall": {"share": 0.6}}, "must be below target_ratio (0.5)"),
        ({"recall": {"limit": 0}}, "recall.limit must be an integer >= 1"),
        ({"recall": {"threshold": 1.5}}, "recall.threshold must be a score in [0, 1]"),
        ({"recall": {"top_k": 3}}, "unknown recall options ['top_k']"),
        ({"recall": [0.2]}, "recall must be a mapping"),
        ({"memory_path": "m.sqlite"}, "memory_path is set but recall is not"),
        ({"memory_roles": ["user"]}, "memory_roles is set but recall is not"),
        ({"recall": {}, "memory_roles": ["robot"]}, "memory_roles must be a non-empty list"),
        ({"recall": {}, "memory_roles": "user"}, "memory_roles must be a non-empty list"),
        ({"recall": {}, "embedder": "bge-small"}, "embedder is not a config key"),
    ],
)
def test_impossible_recall_configurations_are_refused_with_a_sentence(config, fragment):
    with pytest.raises(ConfigError) as caught:
        ReferenceContextManager.from_config(config)
    assert fragment in str(caught.value)


def test_the_embedder_is_passed_in_code_and_without_recall_the_manager_has_no_memory():
    manager = ReferenceContextManager.from_config({"recall": {}}, embedder=HashEmbedder(8))
    assert manager.memory is not None
    assert manager.memory.embedder is not None
    manager.close()
    assert ReferenceContextManager().memory is None
    with pytest.raises(ConfigError, match="embedder is set but recall is not"):
        ReferenceContextManager(embedder=HashEmbedder(8))


# -- the conformance suite ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shapes", "config"),
    [
        (("openai", "anthropic"), {"strategies": ["truncate_outputs", "truncate"], "recall": {}}),
        (
            ("openai", "anthropic"),
            {"strategies": ["truncate_outputs", "truncate"], "recall": {"threshold": 0.0}},
        ),
        (
            ("openai", "anthropic"),
            {"strategies": ["truncate_outputs", "hierarchical"], "recall": {"threshold": 0.0}},
        ),
        (("gemini",), {"strategies": ["hierarchical", "summarize"], "recall": {"threshold": 0}}),
        (("responses",), {"strategies": ["truncate", "summarize"], "recall": {"threshold": 0.3}}),
    ],
)
def test_the_reference_manager_passes_the_suite_with_recall(shapes, config):
    """As ``ctxkit conformance --config '{"recall": {...}}'``, quick; threshold 0 recalls
    whatever shares a word with the newest user message, so most views recall."""
    report = run(
        RunOptions(
            config=config, profile="quick", seed=5, shapes=shapes, timeout=20, stability_steps=0
        )
    )
    failed = {p.id: p.message for p in report.properties if p.status not in ("passed", "skipped")}
    assert report.verdict == "pass"
    assert failed == {}
    required = [p for p in report.properties if p.level == "required"]
    assert required
    assert all(p.status == "passed" for p in required)
    assert report.depth["examples"] > 0


# -- the benchmark ---------------------------------------------------------------------------


def test_the_strategies_benchmark_runs_and_recall_finds_the_planted_facts(tmp_path: Path):
    out = tmp_path / "strategies.json"
    done = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve().parent.parent / "benchmarks" / "strategies.py"),
            *("--messages", "300", "--facts", "4", "--budget", "6000", "--json", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = {row["strategy"]: row for row in json.loads(out.read_text())["strategies"]}
    assert set(rows) == {"truncate", "summarize", "hierarchical", "recall", "hierarchical+recall"}
    assert rows["recall"]["facts"] == rows["hierarchical+recall"]["facts"] == 4
    assert rows["truncate"]["facts"] < 4
    assert all(row["tokens"] <= 6000 for row in rows.values())
    assert "hierarchical+recall" in done.stdout


# -- the inspector -----------------------------------------------------------------------------


def inspected_history() -> list[dict[str, Any]]:
    """A short deploy session: the log with the fact, then six health checks."""
    history = long_conversation(rounds=0)
    for i in range(6):
        output = "\n".join(f"node {i} probe {j}: latency {j * 7 % 50} ms, ok" for j in range(40))
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "health"}}
        call["function"]["arguments"] = json.dumps({"node": i})
        history += [
            {"role": "user", "content": f"Check the health of node {i}."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": output},
            {"role": "assistant", "content": f"Node {i} is healthy."},
        ]
    return history


def inspected_stream() -> list[str]:
    """What ctxkit's event stream writes for that session under hierarchical and recall, the
    question about the fact last, at fixed times."""
    from ctxkit.telemetry.stream import encode_event
    from tests.tui_cases import T0

    async def record() -> list[events.Event]:
        manager = ReferenceContextManager(
            strategies=["truncate_outputs", "hierarchical"],
            recall={},
            view_listing=True,
            conversation_id="deploy",
        )
        seen: list[events.Event] = []
        manager.bus.subscribe(seen.append)
        await manager.set_messages(inspected_history())
        await manager.get_messages_for_request(token_budget=2_000)
        await manager.add_message(ASK)
        await manager.get_messages_for_request(token_budget=2_000)
        manager.close()
        return seen

    return [
        encode_event(events.Event(e.name, {**e.data, "duration_s": 0.0002}, time=T0 + i))
        for i, e in enumerate(run_async(record()))
    ]


def test_the_inspector_keeps_each_rows_level_and_the_views_level_and_recall_figures():
    from ctxkit.tui.model import Inspector
    from ctxkit.tui.widgets.listing import listing_rows

    inspector = Inspector()
    inspector.feed_lines(inspected_stream())
    (figures,) = inspector.snapshot()["conversations"]
    assert figures["units_recalled"] == 1
    assert figures["units_by_level"]["line"] >= 1
    assert figures["units_by_level"]["paragraph"] >= 1
    rows = figures["listing"]
    assert [row["fate"] for row in rows[2:4]] == ["recalled", "recalled"]
    cells = [[str(cell) for cell in cells] for _key, cells in listing_rows(rows)]
    assert cells[2] == ["2", "assistant", "16", "recalled"]
    coarse = [row for row in rows if row.get("level")]
    assert coarse
    for row, shown in zip(rows, cells, strict=True):
        if row.get("level"):
            start, stop = row["stands_for"]
            assert shown[0] == f"({start}-{stop - 1})"
            assert shown[3] == f"summary ({row['level']})"


def test_the_view_pane_shows_levels_and_recalled_units(snap_compare, monkeypatch) -> None:
    """Pinned as an SVG: after a deliberate change, ``pytest tests/test_recall.py -n 0
    --snapshot-update -k view_pane`` and look at the new SVG before committing it."""
    from ctxkit.tui.app import InspectorApp
    from tests.tui_cases import fed_inspector, use_utc

    use_utc(monkeypatch)
    app = InspectorApp(fed_inspector(inspected_stream()))
    assert snap_compare(app, press=("3",), terminal_size=(100, 36))
