"""Retention limits on the reference manager's views: count, time, size, and summarizing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ctxkit import events
from ctxkit.conformance.judge.invariants import (
    check_non_destructive,
    check_ordering,
    check_tool_pairs,
    match_view,
)
from ctxkit.conformance.search.conversations import conversations
from ctxkit.messages import group_units, validate_history
from ctxkit.reference import ConfigError, ReferenceContextManager
from ctxkit.reference.strategies import SUMMARY_HEADER
from tests.chat import call, reply, result, run, user

EXACT = frozenset()
"""match_view with no annotation keys ignored: test messages are told apart by metadata."""


SYSTEM = {"role": "system", "content": "You are a careful agent."}


def turns(count: int, start: int = 0, output: str = "out") -> list[dict[str, Any]]:
    """``count`` turns of four messages: a question, a tool call, its result, an answer."""
    messages = []
    for t in range(start, start + count):
        messages += [user(f"question {t}"), call(f"c{t}"), result(f"c{t}", f"{output} {t}")]
        messages.append(reply(f"answer {t}"))
    return messages


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Recorder:
    def __init__(self, manager: ReferenceContextManager) -> None:
        self.events: list[events.Event] = []
        manager.bus.subscribe(self.events.append)

    def of(self, name: str) -> list[dict[str, Any]]:
        return [dict(e.data) for e in self.events if e.name == name]


async def add_all(manager: ReferenceContextManager, messages: list[dict[str, Any]]) -> None:
    for message in messages:
        await manager.add_message(message)


def size(message: dict[str, Any]) -> int:
    return len(json.dumps(message, separators=(",", ":")).encode("utf-8"))


# -- each limit -------------------------------------------------------------------------------


def test_count_keeps_the_newest_whole_units_within_the_limit():
    manager = ReferenceContextManager(retain_messages=7)
    history = [SYSTEM, *turns(5)]
    run(add_all(manager, history))
    view = run(manager.get_messages_for_request())
    # system (pinned) + the newest turn (4) + the answer before it (1); the tool pair before
    # that (2 messages) would cross the limit, so it leaves whole, and so does all before it.
    assert view == [SYSTEM, history[-5], *history[-4:]]
    assert check_tool_pairs(view) == []
    assert run(manager.get_messages()) == history


def test_count_moves_forward_as_messages_arrive():
    manager = ReferenceContextManager(retain_messages=5)
    run(manager.add_message(SYSTEM))
    history = [SYSTEM]
    for turn in turns(6):
        run(manager.add_message(turn))
        history.append(turn)
        view = run(manager.get_messages_for_request())
        assert len(view) <= 5 or all(m in (SYSTEM, history[-1]) for m in view)
        assert check_ordering(history, view) == []
        assert check_tool_pairs(view) == []
    assert view == [SYSTEM, *history[-4:]]


def test_time_leaves_out_units_older_than_the_limit():
    clock = Clock()
    manager = ReferenceContextManager(retain_seconds=60, clock=clock)
    run(manager.add_message(SYSTEM))
    for t in range(4):
        run(add_all(manager, turns(1, start=t)))
        clock.now += 30
    # Turn t arrived at 1000 + 30 t; now is 1120: turns 0 and 1 (at 1000, 1030) are old.
    view = run(manager.get_messages_for_request())
    assert view == [SYSTEM, *turns(2, start=2)]
    clock.now += 1_000  # everything is old now: only the pinned units stay
    view = run(manager.get_messages_for_request())
    assert view == [SYSTEM, user("question 3"), reply("answer 3")]


def test_a_unit_is_old_only_when_its_newest_message_is():
    clock = Clock()
    manager = ReferenceContextManager(retain_seconds=10, clock=clock)
    run(add_all(manager, [SYSTEM, user("go"), call("slow")]))
    clock.now += 100
    run(add_all(manager, [result("slow", "finally"), reply("done")]))
    view = run(manager.get_messages_for_request())
    # The call is 100 s old, its result is new: the pair stays, whole.
    assert view == [SYSTEM, user("go"), call("slow"), result("slow", "finally"), reply("done")]


def test_size_keeps_the_view_within_the_bytes():
    history = [SYSTEM, *turns(6)]
    limit = sum(size(m) for m in history[-10:])
    manager = ReferenceContextManager(retain_bytes=limit)
    run(add_all(manager, history))
    view = run(manager.get_messages_for_request())
    assert sum(size(m) for m in view) <= limit
    assert view[0] == SYSTEM
    assert view[-4:] == history[-4:]
    # Nothing more would have fit: the next older unit crosses the limit.
    first = history.index(view[1])
    older = history[first - 2 : first] if history[first - 1]["role"] == "tool" else []
    older = older or [history[first - 1]]
    assert sum(size(m) for m in [*view, *older]) > limit


def test_limits_combine_and_the_tightest_wins():
    clock = Clock()
    manager = ReferenceContextManager(
        retain_messages=9, retain_seconds=45, retain_bytes=10_000, clock=clock
    )
    run(manager.add_message(SYSTEM))
    for t in range(6):
        run(add_all(manager, turns(1, start=t)))
        clock.now += 20
    # Turn t arrived at 1000 + 20 t, now is 1120. Count alone keeps 9 messages (system and
    # two turns); time alone keeps turns from 1075 on (turns 4 and 5): both left turn 3 out.
    view = run(manager.get_messages_for_request())
    assert view == [SYSTEM, *turns(2, start=4)]
    (entry,) = manager.audit()
    assert entry["reason"] == "retention"
    assert entry["limits"] == ["count", "time"]


def test_pinned_units_stay_beyond_every_limit():
    pinned = {"role": "user", "content": "deploy to eu-west", "metadata": {"pin": True}}
    reminder = {"role": "system", "content": "Reminder: be brief."}
    history = [SYSTEM, pinned, reply("noted"), *turns(3), reminder, user("the last question")]
    history += [call("x"), result("x", "big " * 50), call("y"), result("y")]
    manager = ReferenceContextManager(retain_messages=1, retain_bytes=10)
    run(add_all(manager, history))
    view = run(manager.get_messages_for_request())
    assert view == [SYSTEM, pinned, reminder, user("the last question"), call("y"), result("y")]
    assert check_tool_pairs(view) == []


def test_an_earlier_newest_user_turn_leaves_once_a_newer_one_comes():
    manager = ReferenceContextManager(retain_messages=3)
    run(add_all(manager, [SYSTEM, user("first"), call("a"), result("a"), call("b"), result("b")]))
    assert run(manager.get_messages_for_request()) == [
        SYSTEM,
        user("first"),
        call("b"),
        result("b"),
    ]
    run(manager.add_message(user("second")))
    # "first" is no longer the newest user turn: it leaves now, with the pair retention
    # passed (the newest unit is "second" now).
    assert run(manager.get_messages_for_request()) == [SYSTEM, user("second")]
    entries = manager.audit()
    assert [e["dropped"] for e in entries] == [[[2, 4]], [[1, 2], [4, 6]]]


def test_pending_calls_do_not_count_and_pairs_never_split():
    manager = ReferenceContextManager(retain_messages=4)
    run(add_all(manager, [SYSTEM, user("go"), call("a"), result("a"), call("b", "c")]))
    run(manager.add_message(result("b")))
    view = run(manager.get_messages_for_request())
    assert view == [SYSTEM, user("go"), call("a"), result("a")]
    run(manager.add_message(result("c")))
    view = run(manager.get_messages_for_request())
    # The newest unit (three messages) and the pinned system and user leave no room.
    assert view == [SYSTEM, user("go"), call("b", "c"), result("b"), result("c")]
    assert check_tool_pairs(view) == []


def test_history_is_never_changed():
    manager = ReferenceContextManager(retain_messages=3, summarize_on_truncate=True)
    history = [SYSTEM, *turns(8)]
    run(add_all(manager, history))
    run(manager.get_messages_for_request())
    run(manager.get_messages_for_request(token_budget=500))
    assert check_non_destructive(history, run(manager.get_messages())) == []


# -- summarizing, events, listing ------------------------------------------------------------------


def test_summarize_on_truncate_stands_for_what_retention_left_out():
    manager = ReferenceContextManager(retain_messages=6, summarize_on_truncate=True)
    recorder = Recorder(manager)
    history = [SYSTEM, *turns(6, output="a long tool output line\n" * 20)]
    run(add_all(manager, history))
    view = run(manager.get_messages_for_request())
    assert view[0] == SYSTEM
    assert view[1]["role"] == "user"
    assert view[1]["content"].startswith(SUMMARY_HEADER)
    assert "- user asked: question 0" in view[1]["content"]
    assert view[2:] == history[-5:]
    (entry,) = manager.audit()
    assert entry["summarized"] == [[1, len(history) - 5]]
    assert entry["dropped"] == []
    (include,) = recorder.of(events.INCLUDE)
    assert include["content"] == view[1]["content"]
    (post,) = recorder.of(events.POST_COMPACT)
    assert post["units_summarized"] == post["units_dropped"] > 0


def test_retention_publishes_a_compaction_pair_once_per_decision():
    manager = ReferenceContextManager(retain_messages=5)
    recorder = Recorder(manager)
    run(add_all(manager, [SYSTEM, *turns(3)]))
    view = run(manager.get_messages_for_request())
    assert run(manager.get_messages_for_request()) == view
    (pre,) = recorder.of(events.PRE_COMPACT)
    (post,) = recorder.of(events.POST_COMPACT)
    assert pre["strategy"] == post["strategy"] == "retention"
    assert pre["message_count"] == 13
    assert post["message_count"] == len(view) == 5
    assert post["token_count"] == manager.counter.count_messages(view)
    assert post["tokens_saved"] == pre["token_count"] - post["token_count"] > 0
    (seen, again) = recorder.of(events.VIEW)
    assert seen["compacted"] is True
    assert again["compacted"] is False


def test_listing_shows_retention_as_dropped_or_summarized():
    for summarize, fate in ((False, "dropped"), (True, "summarized")):
        manager = ReferenceContextManager(
            retain_messages=5, summarize_on_truncate=summarize, view_listing=True
        )
        recorder = Recorder(manager)
        run(add_all(manager, [SYSTEM, *turns(3, output="a long tool output line\n" * 20)]))
        run(manager.get_messages_for_request())
        listing = recorder.of(events.VIEW)[-1]["listing"]
        left_out = [row for row in listing if row["fate"] in ("dropped", "summarized")]
        assert [(row["index"], row["count"], row["fate"]) for row in left_out] == [(1, 8, fate)]


def test_budget_compaction_works_on_what_retention_keeps():
    manager = ReferenceContextManager(retain_messages=30, max_tokens=300)
    recorder = Recorder(manager)
    history = [SYSTEM, *[m for t in range(20) for m in (user(f"q{t} " * 8), reply("a " * 8))]]
    run(add_all(manager, history))
    view = run(manager.get_messages_for_request())
    strategies = [post["strategy"] for post in recorder.of(events.POST_COMPACT)]
    assert strategies == ["retention", "truncate_outputs+truncate"]
    assert manager.counter.count_messages(view) <= 150
    reasons = [entry["reason"] for entry in manager.audit()]
    assert reasons == ["retention", "budget"]
    retained, budget = manager.audit()
    assert retained["dropped"] == [[1, len(history) - 29]]
    assert budget["dropped"][0][0] == len(history) - 29  # it starts where retention stopped


def test_without_limits_views_are_as_before():
    history = [SYSTEM, *turns(30)]
    plain = ReferenceContextManager(max_tokens=400)
    configured = ReferenceContextManager(
        max_tokens=400,
        retain_messages=None,
        retain_seconds=None,
        retain_bytes=None,
        summarize_on_truncate=True,
    )
    for manager in (plain, configured):
        run(manager.set_messages(history))
    assert run(configured.get_messages_for_request()) == run(plain.get_messages_for_request())
    assert [e["reason"] for e in configured.audit()] == ["budget"]


# -- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"retain_messages": 0}, "retain_messages must be an integer >= 1"),
        ({"retain_messages": 2.5}, "retain_messages"),
        ({"retain_messages": True}, "retain_messages"),
        ({"retain_bytes": -1}, "retain_bytes must be an integer >= 1"),
        ({"retain_bytes": "1k"}, "retain_bytes"),
        ({"retain_seconds": 0}, "retain_seconds must be a positive number"),
        ({"retain_seconds": float("inf")}, "retain_seconds"),
        ({"retain_seconds": "1h"}, "retain_seconds"),
        ({"retain_seconds": False}, "retain_seconds"),
        ({"summarize_on_truncate": "yes"}, "summarize_on_truncate must be true or false"),
    ],
)
def test_bad_retention_config_is_rejected_with_the_key_named(config, fragment):
    with pytest.raises(ConfigError, match=fragment):
        ReferenceContextManager.from_config(config)


def test_retention_keys_are_mount_config_keys():
    manager = ReferenceContextManager.from_config(
        {
            "retain_messages": 10,
            "retain_seconds": 3_600,
            "retain_bytes": 65_536,
            "summarize_on_truncate": True,
        }
    )
    assert manager.retention.messages == 10
    assert manager.retention.seconds == 3_600.0
    assert manager.retention.size == 65_536
    assert manager.retention.summarize is True


# -- properties ------------------------------------------------------------------------------


def tagged(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each message told apart from any other by ``metadata.seq``, for exact matching."""
    return [{**m, "metadata": {"seq": i}} for i, m in enumerate(history)]


def pinned_units(history: list[dict[str, Any]]) -> tuple[list[Any], set[int]]:
    """The complete units of ``history`` and the indices (into that list) of the pinned."""
    infos = validate_history(history)
    units = [u for u in group_units(infos) if u.status == "complete"]
    pinned = set()
    newest_user = None
    for k, unit in enumerate(units):
        if infos[unit.start].role in ("system", "developer"):
            pinned.add(k)
        if any(info.user_turn for info in infos[unit.start : unit.stop]):
            newest_user = k
    if newest_user is not None:
        pinned.add(newest_user)
    if units:
        pinned.add(len(units) - 1)
    return units, pinned


@settings()
@given(
    history=conversations(max_turns=8),
    retain_messages=st.none() | st.integers(1, 30),
    retain_seconds=st.none() | st.integers(1, 60),
    retain_bytes=st.none() | st.integers(50, 6_000),
    summarize=st.booleans(),
    shares=st.lists(st.floats(0.05, 2.0), min_size=1, max_size=2),
    steps=st.lists(st.integers(0, 20), min_size=1, max_size=80),
)
def test_any_retained_view_keeps_the_limits_and_accounts_for_every_message(
    history, retain_messages, retain_seconds, retain_bytes, summarize, shares, steps
):
    """Messages arrive one at a time, the clock moves, views are asked at a few budgets;
    each view keeps order and pairs, each limit holds but for pinned units, every pinned
    unit stays, and every message a view leaves out is in exactly one audit range."""
    history = tagged(history)
    clock = Clock()
    manager = ReferenceContextManager(
        retain_messages=retain_messages,
        retain_seconds=retain_seconds,
        retain_bytes=retain_bytes,
        summarize_on_truncate=summarize,
        strategies=("truncate_outputs", "truncate", "summarize"),
        on_overflow="best_effort",
        clock=clock,
    )
    total = sum(manager.counter.message_cost(m).total for m in history)
    budgets = sorted({max(60, int(total * share)) for share in shares})
    arrived: list[float] = []

    async def scenario() -> None:
        for position, message in enumerate(history):
            clock.now += steps[position % len(steps)]
            arrived.append(clock.now)
            await manager.add_message(message)
            for budget in budgets:
                view = await manager.get_messages_for_request(token_budget=budget)
                check_view(history[: position + 1], view, budget)
        assert await manager.get_messages() == history
        reasons = {(e["reason"], bool(e["summarized"])) for e in manager.audit()}
        for reason, summarized in sorted(reasons):
            event(f"audit: {reason}{' (summarized)' if summarized else ''}")

    def check_view(seen: list[dict[str, Any]], view: list[dict[str, Any]], budget: int) -> None:
        assert check_tool_pairs(view) == []
        assert check_ordering(seen, view, EXACT) == []
        matches = match_view(seen, view, EXACT)
        shown = {i for i in matches if i is not None}
        units, pinned = pinned_units(seen)
        in_view = {k for k, unit in enumerate(units) if unit.start in shown}
        assert pinned <= in_view  # every pinned unit stays, whole
        for k in in_view:
            assert set(range(units[k].start, units[k].stop)) <= shown  # never split
        unpinned = in_view - pinned
        if retain_messages is not None and len(shown) > retain_messages:
            assert not unpinned  # only pinned units alone may pass the count
        if retain_bytes is not None and sum(size(seen[i]) for i in shown) > retain_bytes:
            assert not unpinned
        if retain_seconds is not None:
            for k in unpinned:
                assert arrived[units[k].stop - 1] >= clock.now - retain_seconds
        # Nothing lost silently: each left-out message of a complete unit is in exactly one
        # dropped or summarized range recorded for this budget, and no shown message is in
        # any; the one exception is a summarized message recorded as dropped once the
        # summary had to go (see fates()).
        entries = manager.audit()
        fate = fates([e for e in entries if e["budget"] == budget])
        expected = [i for unit in units for i in range(unit.start, unit.stop) if i not in shown]
        assert sorted(fate) == expected
        synthetic = [m for m, i in zip(view, matches, strict=True) if i is None]
        assert len(synthetic) == (1 if "summarized" in fate.values() else 0)
        truncated = set(audited_truncated(entries, budget))
        for message, i in zip(view, matches, strict=True):
            if i is not None and message != seen[i]:
                assert i in truncated

    run(scenario())


def fates(entries: list[dict[str, Any]]) -> dict[int, str]:
    """Each message the entries left out, with its fate now (``dropped`` or ``summarized``),
    replaying them in order: a message is left out once, except that a summarized one is
    dropped when a later view could not fit its summary."""
    fate: dict[int, str] = {}
    for entry in entries:
        for key in ("summarized", "dropped"):
            for start, stop in entry[key]:
                for i in range(start, stop):
                    assert i not in fate or (key, fate[i]) == ("dropped", "summarized")
                    fate[i] = key
    return fate


def audited_truncated(entries: list[dict[str, Any]], budget: int) -> list[int]:
    return [i for entry in entries if entry["budget"] == budget for i in entry["truncated"]]


def test_a_summary_never_takes_a_view_over_its_budget():
    """Found by ``ctxkit conformance --config '{"retain_bytes": 600, "summarize_on_truncate":
    true}'``: the retention summary pushed a view with room for its pinned units only over
    the budget, and the request was refused."""
    manager = ReferenceContextManager(retain_messages=2, summarize_on_truncate=True)
    history = [call("a"), result("a", "first " * 40), call("b"), result("b")]
    run(add_all(manager, history))
    budget = manager.counter.count_messages(history[2:])
    assert run(manager.get_messages_for_request(token_budget=budget)) == history[2:]
    (entry,) = manager.audit()
    assert (entry["dropped"], entry["summarized"]) == ([[0, 2]], [])
    # With room for it, the same decision is summarized.
    view = run(manager.get_messages_for_request(token_budget=budget + 200))
    assert view[0]["content"].startswith(SUMMARY_HEADER)
    assert manager.audit()[-1]["summarized"] == [[0, 2]]


def test_a_new_history_starts_retention_again():
    manager = ReferenceContextManager(retain_messages=3)
    run(manager.set_messages([SYSTEM, *turns(3)]))
    assert len(run(manager.get_messages_for_request())) == 3
    run(manager.set_messages([SYSTEM, user("fresh"), reply("start")]))
    assert run(manager.get_messages_for_request()) == [SYSTEM, user("fresh"), reply("start")]
    run(manager.clear())
    assert run(manager.get_messages_for_request()) == []
    run(manager.add_message(user("again")))
    assert run(manager.get_messages_for_request()) == [user("again")]
    assert [e["reason"] for e in manager.audit()] == ["retention"]


def words(n: int, seed: str) -> str:
    return " ".join(f"{seed}{i}" for i in range(n))


def test_a_summary_goes_when_the_pinned_units_no_longer_fit_with_it():
    """Found by ``ctxkit conformance --config '{"retain_bytes": 900, "summarize_on_truncate":
    true}'``: a summary made while it fitted stayed when the newest user turn grew, and the
    request was refused though the pinned units alone fitted."""
    manager = ReferenceContextManager(retain_messages=2, summarize_on_truncate=True)
    history = [user("first " + words(60, "q")), reply("answer " + words(60, "a"))]
    history += [user("second"), reply("ok")]
    run(add_all(manager, history))
    view = run(manager.get_messages_for_request(token_budget=200))
    assert view[0]["content"].startswith(SUMMARY_HEADER)
    third = user("third " + words(90, "t"))
    assert 200 - 19 < manager.counter.count_messages([third]) <= 200  # 19: the summary
    run(manager.add_message(third))
    assert run(manager.get_messages_for_request(token_budget=200)) == [third]
    summarized, retained, budget = manager.audit()
    assert summarized["summarized"] == [[0, 2]]
    assert retained["dropped"] == [[2, 3]]  # a new summary would not have fitted
    assert budget["dropped"] == [[0, 2], [3, 4]]  # what the summary stood for is now dropped
