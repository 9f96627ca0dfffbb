"""instrument(): the same events for any manager, nothing changed, broken managers caught live."""

from __future__ import annotations

import asyncio
import copy
import importlib
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from ctxkit import events
from ctxkit.conformance.judge.invariants import HistoryIndex, match_view
from ctxkit.conformance.search.conversations import conversations
from ctxkit.demo import agent_turns
from ctxkit.reference import ReferenceContextManager
from ctxkit.telemetry import PrometheusMetrics, instrument
from tests.rewrites import REWRITES, rewrite
from tests.telemetry_cases import Recorder


def _zoo(name: str, **kwargs: Any) -> Any:
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(f"tests.zoo.{module}"), attr)(**kwargs)


async def _drive(manager: Any, turns: int, budget: int) -> list[Any]:
    """The demo's agent: a view before every model call, over ``turns`` turns."""
    views = []
    conversation = agent_turns(seed=3)
    for _ in range(turns):
        for step in next(conversation):
            for message in step:
                await manager.add_message(message)
            views.append(await manager.get_messages_for_request(token_budget=budget))
    return views


def test_wrapping_the_reference_gives_its_own_exact_token_counts():
    """Two independent counts of the same views (the reference's plan, and instrument()'s
    count of what came back) must agree to the token, breakdown included."""
    reference = ReferenceContextManager(max_tokens=8_000, conversation_id="inner")
    inner = Recorder(reference.bus)
    wrapped = instrument(reference, conversation_id="outer")
    outer = Recorder(wrapped.bus)
    asyncio.run(_drive(wrapped, 12, 8_000))
    mine, theirs = outer.of(events.VIEW), inner.of(events.VIEW)
    assert len(mine) == len(theirs) > 12
    for seen, own in zip(mine, theirs, strict=True):
        assert seen["token_count"] == own["token_count"]
        assert seen["message_count"] == own["message_count"]
        assert seen["history_tokens"] == own["history_tokens"]
        assert seen["breakdown"] == own["breakdown"]
        assert seen["kinds"] == own["kinds"]
        assert seen["compacted"] == own["compacted"]
        # The prefix kept of the previous view: by fingerprints here, by the messages there.
        assert seen["prefix_tokens"] == own["prefix_tokens"]
        assert seen["previous_tokens"] == own["previous_tokens"]
        assert seen["conversation_id"] == "outer"
    compactions = outer.of(events.POST_COMPACT)
    assert compactions, "a 8k budget over 12 turns must compact"
    assert all(c["strategy"] == "external" and c["tokens_saved"] >= 0 for c in compactions)
    assert len(outer.of(events.PRE_COMPACT)) == len(compactions)


@given(history=conversations(max_turns=5), share=st.integers(5, 150))
def test_the_wrapper_changes_nothing_the_manager_returns(history, share):
    async def run() -> None:
        plain = _zoo("unusual:InsertsSummary")
        wrapped = instrument(_zoo("unusual:InsertsSummary"), check_invariants=True)
        budget = max(10, len(str(history)) * share // 400)
        for message in history:
            await plain.add_message(copy.deepcopy(message))
            await wrapped.add_message(copy.deepcopy(message))
            ours = await wrapped.get_messages_for_request(token_budget=budget)
            theirs = await plain.get_messages_for_request(token_budget=budget)
            assert ours == theirs
        assert await wrapped.get_messages() == await plain.get_messages() == history
        assert wrapped.violations == 0

    asyncio.run(run())


def test_the_view_object_is_passed_through_untouched():
    class Fixed:
        def __init__(self) -> None:
            self.view = [{"role": "user", "content": "hi"}]

        async def add_message(self, message: dict[str, Any]) -> None: ...

        async def get_messages_for_request(self, token_budget: int | None = None) -> Any:
            return self.view

        async def get_messages(self) -> list[Any]:
            return [{"role": "user", "content": "hi"}]

    inner = Fixed()
    wrapped = instrument(inner)

    async def run() -> Any:
        await wrapped.add_message({"role": "user", "content": "hi"})
        return await wrapped.get_messages_for_request(100)

    view = asyncio.run(run())
    assert view is inner.view
    assert view == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("member", "prop"),
    [
        ("pairs:SplitsPairsOpenAI", "tool_pair_integrity"),
        ("pairs:DropsCallKeepsNothing", "tool_pair_integrity"),
        ("views:ReordersView", "ordering"),
        ("history:DestructiveCompaction", "non_destructive"),
        ("history:MutatesStoredContent", "non_destructive"),
    ],
)
def test_a_broken_manager_is_caught_live_and_counted(member, prop, caplog):
    registry = CollectorRegistry()
    wrapped = instrument(_zoo(member), check_invariants=True)
    wrapped.bus.subscribe(PrometheusMetrics(registry))
    recorder = Recorder(wrapped.bus)
    with caplog.at_level(logging.WARNING, logger="ctxkit.telemetry.instrument"):
        asyncio.run(_drive(wrapped, 10, 3_000))
    wrapped.bus.flush()
    found = recorder.of(events.INVARIANT_VIOLATION)
    assert prop in {v["property"] for v in found}
    counted = registry.get_sample_value("ctxkit_invariant_violations_total", {"property": prop})
    assert counted is not None
    assert counted >= 1
    assert any(f"broke {prop}" in r.getMessage() for r in caplog.records)
    if prop == "tool_pair_integrity":  # the log names the call ids involved
        ids = {i for v in found if v["property"] == prop for i in v["ids"]}
        assert ids
        assert any(any(i in r.getMessage() for i in ids) for r in caplog.records)


def test_lifecycle_is_checked_after_clear_and_set_messages():
    wrapped = instrument(_zoo("history:ClearKeepsHistory"), check_invariants=["lifecycle"])
    recorder = Recorder(wrapped.bus)

    async def run() -> None:
        await wrapped.add_message({"role": "user", "content": "hello"})
        await wrapped.clear()

    asyncio.run(run())
    assert [v["property"] for v in recorder.of(events.INVARIANT_VIOLATION)] == ["lifecycle"]


def test_a_correct_manager_shows_no_violation_and_compactions_once_each():
    wrapped = instrument(_zoo("base:GoodManager"), check_invariants=True)
    recorder = Recorder(wrapped.bus)
    asyncio.run(_drive(wrapped, 15, 3_000))
    assert recorder.of(events.INVARIANT_VIOLATION) == []
    views = recorder.of(events.VIEW)
    compactions = recorder.of(events.POST_COMPACT)
    assert 0 < len(compactions) == sum(v["compacted"] for v in views)
    for post in compactions:
        assert post["token_count"] <= post["tokens_before"]


@pytest.mark.parametrize("member", ["unusual:FlipsTextShape", "unusual:RebuildsMessages"])
def test_a_manager_that_rewrites_shapes_keeps_messages_and_does_not_compact(member):
    """Messages in an equivalent shape are kept, not altered: no compaction is reported while
    the view holds everything, and no ordering violation at all."""
    wrapped = instrument(_zoo(member), check_invariants=True)
    recorder = Recorder(wrapped.bus)
    views = asyncio.run(_drive(wrapped, 4, 1_000_000))
    assert any(view != [] for view in views)
    assert recorder.of(events.INVARIANT_VIOLATION) == []
    assert recorder.of(events.POST_COMPACT) == []
    for seen in recorder.of(events.VIEW):
        assert seen["kinds"] == {"kept": seen["message_count"], "shortened": 0, "summary": 0}
        assert seen["message_count"] == seen["history_messages"]


def test_bad_arguments_get_clear_errors():
    with pytest.raises(TypeError, match="add_message"):
        instrument(object())
    with pytest.raises(ValueError, match="unknown properties"):
        instrument(ReferenceContextManager(), check_invariants=["budget"])


def test_a_failing_add_is_not_remembered():
    wrapped = instrument(ReferenceContextManager(), check_invariants=True)
    recorder = Recorder(wrapped.bus)

    async def run() -> None:
        await wrapped.add_message({"role": "user", "content": "ok"})
        with pytest.raises(ValueError, match=r"role"):
            await wrapped.add_message({"role": "robot", "content": "no"})
        await wrapped.get_messages_for_request(1_000)

    asyncio.run(run())
    assert recorder.of(events.INVARIANT_VIOLATION) == []
    assert recorder.of(events.VIEW)[0]["history_messages"] == 1


# -- HistoryIndex gives match_view's answer --------------------------------------------------


@st.composite
def views_of(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[Any]]:
    history = draw(conversations(max_turns=4))
    history += draw(st.lists(st.sampled_from(history), max_size=3))  # exact duplicates
    picks = draw(st.lists(st.integers(0, len(history) - 1), max_size=12))
    view: list[Any] = []
    for pick in picks:
        message = copy.deepcopy(history[pick])
        change = draw(st.sampled_from(["same", "shorten", "synthetic", "annotate", "rewrite"]))
        if change == "rewrite":  # an equivalent shape: blocks, empty content, arguments, keys
            message = rewrite(message, draw(st.sampled_from(REWRITES)))
        elif change == "shorten" and isinstance(message.get("content"), str):
            message["content"] = message["content"][: len(message["content"]) // 2]
        elif change == "synthetic":
            message = {"role": "user", "content": draw(st.text(max_size=5))}
        elif change == "annotate":
            message["metadata"] = {"seen": True}
        view.append(message)
    return history, view


@given(views_of())
def test_history_index_matches_like_match_view(case):
    history, view = case
    index = HistoryIndex()
    for message in history:
        index.append(message)
    expected = match_view(history, view)
    assert index.match(view) == expected
    assert index.match(view, [index.fingerprint(m) for m in view]) == expected  # as instrument


def test_a_reasoning_item_dropped_from_a_view_is_caught_live():
    """What travels with a call is checked against the history in production too: a view
    that leaves out the reasoning item a function_call needs."""
    import itertools

    from ctxkit.conformance.search.conversations import RoundTemplate

    wrapped = instrument(_zoo("shapes:DropsReasoning"), check_invariants=True)
    recorder = Recorder(wrapped.bus)
    round_ = RoundTemplate("responses", ("ok",), (0,), extras=True).messages(itertools.count(1))

    async def run() -> None:
        for message in [{"role": "user", "content": "go"}, *round_]:
            await wrapped.add_message(message)
        await wrapped.get_messages_for_request(100_000)

    asyncio.run(run())
    wrapped.bus.flush()
    found = recorder.of(events.INVARIANT_VIOLATION)
    assert any("reasoning" in v["message"] for v in found), found


def test_a_views_events_reach_deferred_subscribers_before_the_call_returns():
    """Prometheus and OpenTelemetry subscribers are deferred: on a bus alone, what they count
    waits until the event loop runs. A counter read right after an instrumented call (no
    await in between) counts that view."""
    registry = CollectorRegistry()
    wrapped = instrument(ReferenceContextManager(max_tokens=8_000), check_invariants=True)
    wrapped.bus.subscribe(PrometheusMetrics(registry))
    seen: list[events.Event] = []
    wrapped.bus.subscribe(seen.append, deferred=True)

    async def run() -> None:
        await wrapped.bus.publish("control", {})
        assert seen == []  # deferred indeed: delivered once the loop runs
        await asyncio.sleep(0)
        for count, message in enumerate(next(agent_turns(seed=3))[0], start=1):
            await wrapped.add_message(message)
            await wrapped.get_messages_for_request(8_000)
            assert [e.name for e in seen].count(events.VIEW) == count
            assert registry.get_sample_value("ctxkit_views_total") == count

    asyncio.run(run())
