"""The opt-in ``listing`` of a view event: what each view message is, and what was left out."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit import events
from ctxkit.conformance.search.conversations import conversations
from ctxkit.events import LISTING_FATES, LISTING_ROWS
from ctxkit.messages import group_units, validate_history
from ctxkit.reference import ContextBudgetExceeded, ReferenceContextManager
from ctxkit.reference.manager import ConfigError
from ctxkit.reference.mount import mount
from ctxkit.reference.planner import Spans
from ctxkit.telemetry import EventStream, instrument
from ctxkit.tokens import REPLY_PRIMING, TokenCounter
from ctxkit.workload import conversation
from tests.chat import call, reply, result, user
from tests.telemetry_cases import Recorder, compacting_manager, marked_conversation

LEFT_OUT = ("dropped", "summarized")
VIEW_FATES = ("kept", "truncated", "summary")
SETTINGS = settings()  # the profile from conftest.py
STRATEGY_SETS = st.sampled_from(
    [
        ("truncate",),
        ("truncate_outputs", "truncate"),
        ("truncate_outputs", "importance"),
        ("truncate_outputs", "truncate", "summarize"),
        ("importance", "summarize"),
    ]
)

COUNTER = TokenCounter()


def whole(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` cut back to its last complete unit (no call left waiting)."""
    units = group_units(validate_history(messages))
    while units and units[-1].status != "complete":
        units.pop()
    return messages[: units[-1].stop] if units else []


def last_view(recorder: Recorder) -> dict[str, Any]:
    return recorder.of(events.VIEW)[-1]


def check_listing(
    seen: dict[str, Any],
    history: Sequence[dict[str, Any]],
    view: Sequence[dict[str, Any]],
    *,
    in_order: bool = True,
) -> None:
    """Everything a listing promises about one view event, checked against the view and the
    history it came from (the whole listing: nothing may be omitted)."""
    listing = seen["listing"]
    assert seen["listing_omitted"] == 0
    assert all(set(row) == {"index", "count", "role", "tokens", "fate"} for row in listing)
    assert all(row["fate"] in LISTING_FATES for row in listing)
    shown = [row for row in listing if row["fate"] in VIEW_FATES]
    # The view rows are the view, message by message, with its exact tokens.
    assert len(shown) == seen["message_count"] == len(view)
    priming = REPLY_PRIMING if view else 0
    assert sum(row["tokens"] for row in shown) + priming == seen["token_count"]
    for row, message in zip(shown, view, strict=True):
        assert row["count"] == 1
        assert row["role"] == message["role"]
        assert row["tokens"] == COUNTER.message_cost(message).total
        if row["fate"] == "summary":
            assert row["index"] is None
        elif row["fate"] == "kept":
            assert message == history[row["index"]]
        else:
            original = history[row["index"]]
            assert message != original
            assert message["role"] == original["role"]
    # Left-out rows are runs of history messages, costed whole, one row per run and fate.
    for row in listing:
        if row["fate"] in LISTING_FATES[3:]:
            run = history[row["index"] : row["index"] + row["count"]]
            assert len(run) == row["count"] >= 1
            assert row["tokens"] == sum(COUNTER.message_cost(m).total for m in run)
            roles = {m["role"] for m in run}
            assert row["role"] == (run[0]["role"] if len(roles) == 1 else "mixed")
    for before, after in itertools.pairwise(listing):
        if before["fate"] in LEFT_OUT and after["fate"] in LEFT_OUT:
            assert before["fate"] != after["fate"] or (
                before["index"] + before["count"] != after["index"]
            )
    # Together, view rows and left-out rows name every history message once.
    covered = [
        index
        for row in listing
        if row["index"] is not None
        for index in range(row["index"], row["index"] + row["count"])
    ]
    if in_order:
        assert covered == list(range(len(history)))
    else:
        assert sorted(covered) == list(range(len(history)))


# -- the reference manager ------------------------------------------------------------------


def test_off_by_default():
    manager = ReferenceContextManager(max_tokens=2_000)
    recorder = Recorder(manager.bus)
    asyncio.run(manager.set_messages(conversation(40, seed=1)))
    asyncio.run(manager.get_messages_for_request())
    assert "listing" not in last_view(recorder)
    assert "listing_omitted" not in last_view(recorder)


def test_option_is_validated_and_accepted_from_config():
    mounted: dict[str, Any] = {}
    coordinator = SimpleNamespace(mount=lambda point, module: mounted.update({point: module}))
    asyncio.run(mount(coordinator, {"view_listing": True}))
    assert mounted["context"].view_listing is True
    with pytest.raises(ConfigError, match="view_listing"):
        ReferenceContextManager.from_config({"view_listing": "yes"})
    with pytest.raises(TypeError, match="view_listing"):
        instrument(ReferenceContextManager(), view_listing=1)  # type: ignore[arg-type]


def test_a_view_under_its_threshold_is_all_kept():
    history = whole(conversation(30, seed=2))
    manager = ReferenceContextManager(view_listing=True)
    recorder = Recorder(manager.bus)
    asyncio.run(manager.set_messages(history))
    view = asyncio.run(manager.get_messages_for_request())
    seen = last_view(recorder)
    assert {row["fate"] for row in seen["listing"]} == {"kept"}
    check_listing(seen, history, view)


def test_summarize_lists_summarized_runs_and_one_summary_after_them():
    history = marked_conversation(80)
    manager = compacting_manager(view_listing=True)
    recorder = Recorder(manager.bus)

    async def agent() -> None:
        for count, message in enumerate(history, start=1):
            await manager.add_message(message)
            view = await manager.get_messages_for_request()
            check_listing(last_view(recorder), history[:count], view)

    asyncio.run(agent())
    listing = last_view(recorder)["listing"]
    fates = [row["fate"] for row in listing]
    assert fates.count("summary") == 1
    assert "summarized" in fates
    assert "truncated" in fates
    summary = fates.index("summary")
    assert fates[summary - 1] == "summarized"  # what it stands for comes right before it
    assert listing[summary]["role"] == "user"


def test_a_summary_that_would_cost_more_leaves_its_units_plainly_dropped():
    async def verbose(messages: list[dict[str, Any]], *, max_tokens: int) -> str:
        return "word " * 10 * max_tokens  # clipped to the cap: more than the four it stands for

    history = [{"role": "system", "content": "Be brief."}]
    history += [user("q0"), reply("a0"), user("q1"), reply("a1"), user("big " * 720)]
    manager = ReferenceContextManager(
        max_tokens=1_000,
        strategies=["truncate", "summarize"],
        summarizer=verbose,
        view_listing=True,
    )
    recorder = Recorder(manager.bus)
    asyncio.run(manager.set_messages(history))
    view = asyncio.run(manager.get_messages_for_request())
    seen = last_view(recorder)
    check_listing(seen, history, view)
    assert [(row["index"], row["count"], row["fate"]) for row in seen["listing"]] == [
        (0, 1, "kept"),
        (1, 4, "dropped"),
        (5, 1, "kept"),
    ]


def test_truncate_outputs_lists_truncated_messages_at_their_shortened_cost():
    big = "\n".join(f"row {i}" for i in range(2_000))
    history = [{"role": "system", "content": "Be careful."}, user("scan"), call("s")]
    history += [result("s", big), reply("scanned"), user("next"), reply("ok")]
    manager = ReferenceContextManager(max_tokens=4_000, view_listing=True)
    recorder = Recorder(manager.bus)
    asyncio.run(manager.set_messages(history))
    view = asyncio.run(manager.get_messages_for_request())
    seen = last_view(recorder)
    check_listing(seen, history, view)
    (truncated,) = [row for row in seen["listing"] if row["fate"] == "truncated"]
    assert (truncated["index"], truncated["role"]) == (3, "tool")
    assert truncated["tokens"] < COUNTER.message_cost(history[3]).total


def test_broken_and_pending_units_are_listed_as_dropped():
    history = [user("go"), result("ghost"), call("x"), user("stop!"), reply("ok"), call("y")]
    manager = ReferenceContextManager(view_listing=True)
    recorder = Recorder(manager.bus)
    asyncio.run(manager.set_messages(history))
    view = asyncio.run(manager.get_messages_for_request())
    seen = last_view(recorder)
    check_listing(seen, history, view)
    assert [(row["index"], row["count"], row["fate"]) for row in seen["listing"]] == [
        (0, 1, "kept"),
        (1, 2, "dropped"),  # an orphan result and an unanswered call: one run
        (3, 1, "kept"),
        (4, 1, "kept"),
        (5, 1, "dropped"),  # still waiting for its result
    ]
    assert seen["listing"][1]["role"] == "mixed"


def test_an_empty_history_has_an_empty_listing():
    manager = ReferenceContextManager(view_listing=True)
    recorder = Recorder(manager.bus)
    assert asyncio.run(manager.get_messages_for_request()) == []
    assert last_view(recorder)["listing"] == []
    assert last_view(recorder)["listing_omitted"] == 0


def test_only_system_messages_kept_puts_the_summary_last():
    async def short(messages: list[dict[str, Any]], *, max_tokens: int) -> str:
        return "s"

    history = [{"role": "system", "content": "Rules."}]
    history += [reply("word " * 200), reply("more " * 200), {"role": "system", "content": "Note"}]
    manager = ReferenceContextManager(
        max_tokens=220,
        strategies=["truncate", "summarize"],
        summarizer=short,
        view_listing=True,
        on_overflow="best_effort",
    )
    recorder = Recorder(manager.bus)
    asyncio.run(manager.set_messages(history))
    view = asyncio.run(manager.get_messages_for_request())
    seen = last_view(recorder)
    check_listing(seen, history, view)
    assert [(row["index"], row["fate"]) for row in seen["listing"]] == [
        (0, "kept"),
        (1, "summarized"),
        (3, "kept"),
        (None, "summary"),
    ]
    assert seen["listing"][1]["role"] == "assistant"
    assert view[-1]["content"] == "s"


def _many_turns(turns: int) -> list[dict[str, Any]]:
    history = [{"role": "system", "content": "Be brief."}]
    for turn in range(turns):
        history += [user(f"question {turn}"), reply(f"answer {turn}")]
    return history


def test_only_the_newest_rows_are_kept_and_the_rest_counted(monkeypatch):
    history = _many_turns(300)  # 601 messages, all in a large budget's view
    manager = ReferenceContextManager(view_listing=True)
    recorder = Recorder(manager.bus)
    asyncio.run(manager.set_messages(history))
    view = asyncio.run(manager.get_messages_for_request())
    seen = last_view(recorder)
    assert len(view) == 601
    assert len(seen["listing"]) == LISTING_ROWS
    assert seen["listing_omitted"] == 601 - LISTING_ROWS
    assert [row["index"] for row in seen["listing"]] == list(range(401, 601))


@pytest.mark.parametrize("strategies", [("truncate",), ("truncate", "summarize")])
def test_the_capped_listing_is_the_tail_of_the_whole_one(monkeypatch, strategies):
    """The same requests with the cap lifted: the capped listing is the whole listing's
    newest rows, and ``listing_omitted`` counts exactly the rest."""
    history = _many_turns(1_500)

    async def listings() -> list[dict[str, Any]]:
        manager = ReferenceContextManager(
            max_tokens=12_000, strategies=strategies, view_listing=True
        )
        recorder = Recorder(manager.bus)
        await manager.set_messages(history[:900])
        await manager.get_messages_for_request()
        for count, message in enumerate(history[900:], start=901):
            await manager.add_message(message)
            if count % 300 == 0 or count == len(history):
                await manager.get_messages_for_request()
        return recorder.of(events.VIEW)

    capped = asyncio.run(listings())
    monkeypatch.setattr("ctxkit.reference.planner.LISTING_ROWS", 10**9)
    whole = asyncio.run(listings())
    assert any(seen["listing_omitted"] > 0 for seen in capped)
    assert any(seen["compacted"] for seen in capped)
    for small, full in zip(capped, whole, strict=True):
        assert full["listing_omitted"] == 0
        assert small["listing"] == full["listing"][-LISTING_ROWS:]
        assert small["listing_omitted"] == len(full["listing"]) - len(small["listing"])


def test_listing_rows_are_copies():
    manager = ReferenceContextManager(view_listing=True)
    recorder = Recorder(manager.bus)
    asyncio.run(manager.set_messages(_many_turns(3)))
    asyncio.run(manager.get_messages_for_request())
    recorder.events[-1].data["listing"][0]["fate"] = "edited"  # a careless subscriber
    asyncio.run(manager.get_messages_for_request())
    assert recorder.events[-1].data["listing"][0]["fate"] == "kept"


def test_the_event_stream_writes_the_listing(tmp_path):
    manager = ReferenceContextManager(view_listing=True)
    stream = EventStream(tmp_path / "events.jsonl")
    manager.bus.subscribe(stream, deferred=False)
    asyncio.run(manager.set_messages(_many_turns(2)))
    asyncio.run(manager.get_messages_for_request())
    stream.close()
    (line,) = (tmp_path / "events.jsonl").read_text().splitlines()
    data = json.loads(line)["data"]
    assert data["listing"][0] == {
        "index": 0,
        "count": 1,
        "role": "system",
        "tokens": COUNTER.message_cost({"role": "system", "content": "Be brief."}).total,
        "fate": "kept",
    }
    assert data["listing_omitted"] == 0


@SETTINGS
@given(history=conversations(), share=st.floats(0.05, 1.5), strategies=STRATEGY_SETS)
def test_any_compacted_view_is_listed_exactly(history, share, strategies):
    async def run() -> None:
        manager = ReferenceContextManager(strategies=strategies, view_listing=True)
        recorder = Recorder(manager.bus)
        await manager.set_messages(history)
        budget = max(60, int(share * manager.usage()["history_tokens"]))
        try:
            view = await manager.get_messages_for_request(token_budget=budget)
        except ContextBudgetExceeded:
            return
        check_listing(last_view(recorder), history, view)

    asyncio.run(run())


@SETTINGS
@given(
    history=conversations(max_turns=10), budget=st.integers(300, 4_000), strategies=STRATEGY_SETS
)
def test_listings_kept_between_requests_stay_exact(history, budget, strategies):
    """One message at a time, a view after each: the rows kept between requests (extended
    as units arrive, started again by each compaction) must always list the view exactly."""

    async def run() -> None:
        manager = ReferenceContextManager(
            max_tokens=budget, strategies=strategies, view_listing=True
        )
        recorder = Recorder(manager.bus)
        for count, message in enumerate(history, start=1):
            await manager.add_message(message)
            try:
                view = await manager.get_messages_for_request()
            except ContextBudgetExceeded:
                continue
            check_listing(last_view(recorder), history[:count], view)

    asyncio.run(run())


# -- instrument() ---------------------------------------------------------------------------


class KeepNewest:
    """A plain manager that drops all but the newest ``keep`` messages (pairs be damned)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.messages: list[dict[str, Any]] = []

    async def add_message(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    async def get_messages(self) -> list[dict[str, Any]]:
        return list(self.messages)

    async def get_messages_for_request(self, token_budget: int | None = None) -> Any:
        return [dict(m) for m in self.messages[-self.keep :]]


def test_instrument_lists_what_a_simple_manager_dropped():
    history = conversation(30, seed=4)
    wrapped = instrument(KeepNewest(5), view_listing=True)
    recorder = Recorder(wrapped.bus)

    async def agent() -> None:
        for count, message in enumerate(history, start=1):
            await wrapped.add_message(message)
            view = await wrapped.get_messages_for_request(token_budget=100_000)
            check_listing(last_view(recorder), history[:count], view)

    asyncio.run(agent())
    listing = last_view(recorder)["listing"]
    assert listing[0] == {
        "index": 0,
        "count": 25,
        "role": "mixed",
        "tokens": sum(COUNTER.message_cost(m).total for m in history[:25]),
        "fate": "dropped",
    }
    assert [row["fate"] for row in listing[1:]] == ["kept"] * 5


def test_instrument_listing_is_off_by_default():
    wrapped = instrument(KeepNewest(2))
    recorder = Recorder(wrapped.bus)
    asyncio.run(wrapped.add_message(user("hi")))
    asyncio.run(wrapped.get_messages_for_request())
    assert "listing" not in last_view(recorder)


def test_instrument_caps_its_listing_like_the_reference():
    wrapped = instrument(KeepNewest(250), view_listing=True)
    recorder = Recorder(wrapped.bus)

    async def agent() -> None:
        await wrapped.add_message({"role": "system", "content": "Be brief."})
        for turn in range(150):
            await wrapped.add_message(user(f"question {turn}"))
            await wrapped.add_message(reply(f"answer {turn}"))
        await wrapped.get_messages_for_request()

    asyncio.run(agent())
    seen = last_view(recorder)
    assert len(seen["listing"]) == LISTING_ROWS
    assert seen["listing_omitted"] == 251 - LISTING_ROWS  # one dropped run and 250 kept
    assert seen["listing"][-1]["index"] == 300


def _as_seen_from_outside(listing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A reference listing as instrument() can know it: summarized is dropped, and runs that
    touch merge."""
    merged: list[dict[str, Any]] = []
    for row in listing:
        row = dict(row, fate="dropped") if row["fate"] == "summarized" else dict(row)
        last = merged[-1] if merged else None
        if (
            last is not None
            and row["fate"] == last["fate"] == "dropped"
            and last["index"] + last["count"] == row["index"]
        ):
            last["count"] += row["count"]
            last["tokens"] += row["tokens"]
            last["role"] = last["role"] if last["role"] == row["role"] else "mixed"
        else:
            merged.append(row)
    return merged


@pytest.mark.parametrize(
    "strategies", [("truncate_outputs", "truncate"), ("truncate_outputs", "truncate", "summarize")]
)
def test_instrument_sees_the_reference_listing(strategies):
    """Two independent listings of the same views (the reference's plan, and instrument()'s
    matching of what came back) agree row for row."""
    history = marked_conversation(120, seed=5)
    reference = compacting_manager(strategies=list(strategies), view_listing=True)
    inner = Recorder(reference.bus)
    wrapped = instrument(reference, view_listing=True)
    outer = Recorder(wrapped.bus)

    async def agent() -> None:
        for message in history:
            await wrapped.add_message(message)
            await wrapped.get_messages_for_request()

    asyncio.run(agent())
    theirs, mine = inner.of(events.VIEW), outer.of(events.VIEW)
    assert any(seen["compacted"] for seen in theirs)
    for own, seen in zip(theirs, mine, strict=True):
        assert seen["listing"] == _as_seen_from_outside(own["listing"])


@SETTINGS
@given(history=conversations(), keep=st.integers(1, 12))
def test_instrument_lists_any_kept_tail_exactly(history, keep):
    async def run() -> None:
        wrapped = instrument(KeepNewest(keep), view_listing=True)
        recorder = Recorder(wrapped.bus)
        for message in history:
            await wrapped.add_message(message)
        view = await wrapped.get_messages_for_request()
        seen = last_view(recorder)
        check_listing(seen, history, view)
        left_out = [row for row in seen["listing"] if row["fate"] == "dropped"]
        assert sum(row["count"] for row in left_out) == max(0, len(history) - keep)

    asyncio.run(run())


class Shuffled(KeepNewest):
    """Returns its newest messages backwards, with a note of its own in the middle."""

    async def get_messages_for_request(self, token_budget: int | None = None) -> Any:
        view = [dict(m) for m in reversed(self.messages[-self.keep :])]
        return [*view[:1], {"role": "user", "content": "a note"}, *view[1:]]


def test_instrument_lists_a_view_out_of_order_once_each():
    history = conversation(20, seed=6)
    wrapped = instrument(Shuffled(4), view_listing=True)
    recorder = Recorder(wrapped.bus)

    async def agent() -> list[dict[str, Any]]:
        for message in history:
            await wrapped.add_message(message)
        return await wrapped.get_messages_for_request()

    view = asyncio.run(agent())
    check_listing(last_view(recorder), history, view, in_order=False)


# -- the running totals ---------------------------------------------------------------------


def test_spans_give_tokens_and_role_of_any_run():
    spans = Spans()
    spans.extend([3, 4, 5], ["user", "user", "tool"])
    spans.extend([6], ["tool"])
    assert len(spans) == 4
    assert spans.row(0, 2, "dropped") == {
        "index": 0,
        "count": 2,
        "role": "user",
        "tokens": 7,
        "fate": "dropped",
    }
    assert spans.row(1, 3, "dropped")["role"] == "mixed"
    assert spans.row(2, 4, "summarized")["role"] == "tool"
    assert spans.row(2, 4, "summarized")["tokens"] == 11
