"""The ``hierarchical`` strategy: units full, as a paragraph or one line, coarser with age;
summaries made once per unit and level; the ids every coarse form carries, and the drill-down
tool that brings the unit back; the events; the conformance suite on it."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections import Counter
from typing import Any

import pydantic
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ctxkit import events
from ctxkit.conformance.judge.invariants import (
    check_attachments,
    check_ordering,
    check_preservation,
    check_tool_pairs,
    newest_user_message,
)
from ctxkit.conformance.judge.parts import calls, reasoning_id, results
from ctxkit.conformance.runner import RunOptions, run
from ctxkit.conformance.search.conversations import RoundTemplate, conversation_plans
from ctxkit.messages import inspect_message, text_of
from ctxkit.reference import (
    ConfigError,
    ContextBudgetExceeded,
    ReferenceContextManager,
    recall_tool,
)
from ctxkit.reference.drilldown import MAX_UNITS
from ctxkit.reference.strategies import SUMMARY_HEADER, extractive_unit_summary
from ctxkit.tokens import REPLY_PRIMING
from ctxkit.workload import Workload
from tests.test_provider_types import VALIDATORS

STRATEGY_SETS = st.sampled_from(
    [
        ("hierarchical",),
        ("truncate_outputs", "hierarchical"),
        ("hierarchical", "summarize"),
        ("truncate_outputs", "truncate", "hierarchical", "summarize"),
    ]
)
SHAPE_SETS = st.sampled_from(
    [("openai", "anthropic"), ("anthropic",), ("responses",), ("gemini",), ("bedrock",), ("genai",)]
)
MARKER = re.compile(r"^\[recall m(\d+)(?:-m(\d+))?\] ")


def coarse_ranges(view: list[dict[str, Any]]) -> list[tuple[int, tuple[int, int]]]:
    """``(view position, history range [start, stop))`` of each coarse form in a view, read from
    the marker its text starts with."""
    found = []
    for position, message in enumerate(view):
        match = MARKER.match(text_of(message))
        if match:
            first = int(match.group(1))
            last = int(match.group(2) or first)
            found.append((position, (first, last + 1)))
    return found


def run_async(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


class Recorder:
    def __init__(self, manager: ReferenceContextManager) -> None:
        self.events: list[events.Event] = []
        manager.bus.subscribe(self.events.append)

    def since(self, mark: int, name: str) -> list[dict[str, Any]]:
        return [dict(e.data) for e in self.events[mark:] if e.name == name]


def ends_plain(history: list[dict[str, Any]]) -> bool:
    """The history ends with a message that carries no call, no result and no reasoning."""
    last = history[-1]
    return not (calls(last) or results(last) or reasoning_id(last) is not None)


def minimal_view_tokens(manager: ReferenceContextManager, history: list[dict[str, Any]]) -> int:
    """What the smallest view that keeps what must stay costs, found without the manager's
    own grouping: every system message, the newest user turn and the last message (a plain
    one: see :func:`ends_plain`)."""
    keep = {i for i, m in enumerate(history) if m.get("role") == "system"}
    newest = newest_user_message(history)
    keep |= {len(history) - 1} | ({newest} if newest is not None else set())
    return sum(manager.counter.count_message(history[i]) for i in keep) + REPLY_PRIMING


async def checked_view(
    manager: ReferenceContextManager,
    recorder: Recorder,
    history: list[dict[str, Any]],
    budget: int,
) -> list[dict[str, Any]] | None:
    """A view, with every property that must hold of it checked; None if it overflowed, which
    it may only do when even the smallest view does not fit."""
    mark = len(recorder.events)
    try:
        view = await manager.get_messages_for_request(token_budget=budget)
    except ContextBudgetExceeded:
        if ends_plain(history):  # else what must stay is a whole tool unit: see the property
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
    assert seen["message_count"] == len(view)
    by_level = seen["units_by_level"]
    coarse = coarse_ranges(view)
    event("coarse forms in the view" if coarse else "no coarse form")
    assert by_level["paragraph"] + by_level["line"] == len(coarse)
    for _position, (start, stop) in coarse:
        assert 0 <= start < stop <= len(history)
    for post in recorder.since(mark, events.POST_COMPACT):
        assert post["token_count"] == tokens
        assert post["units_by_level"] == by_level
    summaries = manager._planner.levels
    assert summaries.made == len(summaries)  # no unit summarised at a level twice
    return view


# -- properties --------------------------------------------------------------------------------


@given(
    plan=conversation_plans(),
    shapes=SHAPE_SETS,
    share=st.floats(0.05, 1.5),
    strategies=STRATEGY_SETS,
)
def test_any_view_keeps_pairs_order_the_newest_user_turn_and_the_budget(
    plan, shapes, share, strategies
):
    """Budgets as a share of the history, so most views compact; asking again, or asking a
    second manager with the same history, gives the same view."""
    history = plan.messages(shapes)

    async def check() -> None:
        manager = ReferenceContextManager(strategies=strategies)
        await manager.set_messages(history)
        budget = max(60, int(share * manager.usage()["history_tokens"]))
        view = await checked_view(manager, Recorder(manager), history, budget)
        if view is None:
            return
        assert await manager.get_messages_for_request(token_budget=budget) == view
        twin = ReferenceContextManager(strategies=strategies)
        await twin.set_messages(history)
        assert await twin.get_messages_for_request(token_budget=budget) == view

    run_async(check())


@given(
    plan=conversation_plans(max_turns=10),
    shapes=SHAPE_SETS,
    budget=st.integers(300, 4_000),
    strategies=STRATEGY_SETS,
)
def test_agent_loop_views_hold_and_summarise_each_unit_and_level_once(
    plan, shapes, budget, strategies
):
    """One message at a time, a view after each: compactions come and go with the hysteresis,
    units age through the levels, and the summarizer still sees each unit at each level once."""
    history = plan.messages(shapes)
    calls: Counter[tuple[str, int]] = Counter()

    async def summarizer(messages: list[dict[str, Any]], *, max_tokens: int) -> str:
        calls[(json.dumps(messages, sort_keys=True), max_tokens)] += 1
        return " ".join(text_of(m)[:40] for m in messages) or "tool traffic"

    async def check() -> None:
        manager = ReferenceContextManager(
            max_tokens=budget,
            strategies=strategies,
            summarizer=summarizer,
            summary_max_tokens=30,  # the running summary's calls ask for 30 tokens at most
            hierarchical={"paragraph_tokens": 157, "line_tokens": 37},
        )
        recorder = Recorder(manager)
        for count, message in enumerate(history, start=1):
            await manager.add_message(message)
            await checked_view(manager, recorder, history[:count], budget)
        level_calls = {key: n for key, n in calls.items() if key[1] in (157, 37)}
        assert all(n == 1 for n in level_calls.values()), level_calls

    run_async(check())


@settings(max_examples=25)
@given(plan=conversation_plans(max_turns=8), shapes=SHAPE_SETS, share=st.floats(0.1, 0.6))
def test_every_coarse_form_names_what_it_stands_for_and_recall_brings_it_back(plan, shapes, share):
    history = plan.messages(shapes)

    async def check() -> None:
        manager = ReferenceContextManager(strategies=["hierarchical"])
        await manager.set_messages(history)
        budget = max(60, int(share * manager.usage()["history_tokens"]))
        try:
            view = await manager.get_messages_for_request(token_budget=budget)
        except ContextBudgetExceeded:
            return
        tool = recall_tool(manager)
        for position, (start, stop) in coarse_ranges(view):
            assert view[position]["role"] == "user"
            ids = f"m{start}" if stop - start == 1 else f"m{start}-m{stop - 1}"
            answer = json.loads(await tool.handler({"ids": [ids]}))
            assert answer["unknown"] == []
            (unit,) = answer["recalled"]
            assert unit["ids"] == ids
            assert unit["messages"] == history[start:stop]

    run_async(check())


# -- how a long conversation is shown --------------------------------------------------------


def long_history(shape: str = "openai", size: int = 400) -> list[dict[str, Any]]:
    """Synthetic agent traffic, cut after the assistant's last words (a small newest unit)."""
    messages = Workload(seed=3, shape=shape).messages(size)
    while messages:
        info = inspect_message(messages[-1])
        if info.role == "assistant" and not (info.call_ids or info.leads):
            break
        messages.pop()
    return messages


def view_levels(manager: ReferenceContextManager, budget: int) -> tuple[list[Any], dict, dict]:
    """The view, its view event and its post_compact event."""
    recorder = Recorder(manager)
    view = run_async(manager.get_messages_for_request(token_budget=budget))
    (seen,) = recorder.since(0, events.VIEW)
    posts = recorder.since(0, events.POST_COMPACT)
    return view, seen, posts[-1] if posts else {}


def test_a_long_conversation_is_newest_full_then_paragraphs_then_lines():
    history = long_history()
    manager = ReferenceContextManager(strategies=["hierarchical"])
    run_async(manager.set_messages(history))
    view, seen, post = view_levels(manager, 30_000)
    by_level = seen["units_by_level"]
    assert by_level["paragraph"] > 0
    assert by_level["line"] > 0
    assert by_level["full"] > 0
    runs = post["level_ranges"]
    starts = {
        level: sorted(start for start, _stop, lv in runs if lv == level)
        for level in ("line", "paragraph")
    }
    assert runs[0][2] == "line"  # coarser with age: the oldest shown are lines,
    assert runs[-1][2] == "paragraph"  # the newest coarse ones paragraphs
    middle = {level: found[len(found) // 2] for level, found in starts.items()}
    assert middle["line"] < middle["paragraph"]
    newest_coarse = runs[-1][1]
    full_after = [m for m in history[newest_coarse:] if m in view]
    assert full_after == history[newest_coarse:]  # the newest units are all there, whole
    assert view[-1] == history[-1]
    assert manager.counter.count_messages(view) <= 30_000


def test_units_are_dropped_only_when_even_one_line_each_does_not_fit():
    history = long_history(size=600)
    roomy = ReferenceContextManager(strategies=["hierarchical"])
    run_async(roomy.set_messages(history))
    _view, _seen, post = view_levels(roomy, 60_000)
    assert post["units_dropped"] == 0
    assert post["units_by_level"]["line"] > 0
    tight = ReferenceContextManager(strategies=["hierarchical"], view_listing=True)
    run_async(tight.set_messages(history))
    view, seen, post = view_levels(tight, 6_000)
    assert post["units_dropped"] > 0
    # what is left out is the oldest (what must stay aside: system messages, the newest user
    # turn), and only because the next one line did not fit: the view is full to one line
    rows = seen["listing"]
    pinned = {newest_user_message(history)}
    shown = [
        row["stands_for"][0] if row.get("stands_for") else row["index"]
        for row in rows
        if row["fate"] != "dropped" and row["role"] != "system" and row["index"] not in pinned
    ]
    dropped_end = max(row["index"] + row["count"] for row in rows if row["fate"] == "dropped")
    assert dropped_end <= min(i for i in shown if i is not None)
    tokens = tight.counter.count_messages(view)
    assert 0.5 * 6_000 - 80 < tokens <= 0.5 * 6_000


def test_with_summarize_what_no_line_fits_goes_into_the_one_summary():
    history = long_history(size=600)
    manager = ReferenceContextManager(strategies=["hierarchical", "summarize"])
    run_async(manager.set_messages(history))
    view, _seen, post = view_levels(manager, 6_000)
    assert post["units_dropped"] > 0
    assert post["units_summarized"] == post["units_dropped"]
    assert sum(text_of(m).startswith(SUMMARY_HEADER) for m in view) == 1
    (entry,) = manager.audit()
    dropped_to_summary = sum(b - a for a, b in entry["summarized"])
    assert dropped_to_summary > 0
    assert entry["dropped"] == []


def test_truncate_outputs_shortens_what_is_shown_full():
    history = long_history()
    plain = ReferenceContextManager(strategies=["hierarchical"])
    shortening = ReferenceContextManager(
        strategies=["truncate_outputs", "hierarchical"], tool_output_max_bytes=400
    )
    for manager in (plain, shortening):
        run_async(manager.set_messages(history))
    _v, plain_seen, _p = view_levels(plain, 30_000)
    _v, short_seen, post = view_levels(shortening, 30_000)
    assert post["units_truncated"] > 0
    assert short_seen["units_by_level"]["full"] >= plain_seen["units_by_level"]["full"]


@pytest.mark.parametrize("shape", ["anthropic", "responses", "gemini", "bedrock"])
def test_views_with_coarse_forms_are_requests_the_provider_takes(shape):
    """The coarse forms are plain text messages of the history's shape: the SDK's own request
    types take the whole view (no field a provider would reject)."""
    history = long_history(shape, 300)
    manager = ReferenceContextManager(strategies=["truncate_outputs", "hierarchical"])
    run_async(manager.set_messages(history))
    view, seen, _post = view_levels(manager, 20_000)
    assert seen["units_by_level"]["line"] > 0
    VALIDATORS[shape](view)
    assert check_tool_pairs(view) == []
    assert check_attachments(history, view) == []


# -- summaries ---------------------------------------------------------------------------------


class CountingSummarizer:
    def __init__(self) -> None:
        self.calls: Counter[tuple[str, int]] = Counter()

    async def __call__(self, messages: list[dict[str, Any]], *, max_tokens: int) -> str:
        self.calls[(json.dumps(messages, sort_keys=True), max_tokens)] += 1
        return f"SUMMARY of {len(messages)} messages"


def test_the_configured_summarizer_writes_the_levels_once_per_unit_and_level():
    summarizer = CountingSummarizer()
    manager = ReferenceContextManager(
        max_tokens=12_000, strategies=["hierarchical"], summarizer=summarizer
    )
    history = long_history(size=300)
    steps = 0
    for message in history:
        run_async(manager.add_message(message))
        if message.get("role") == "assistant" and not message.get("tool_calls"):
            view = run_async(manager.get_messages_for_request())
            steps += 1
    assert steps > 20
    assert any("SUMMARY of" in text_of(m) for m in view)
    assert summarizer.calls
    assert set(summarizer.calls.values()) == {1}
    levels = manager._planner.levels
    assert levels.made == sum(summarizer.calls.values())
    # The same history again (a new plan, decided at once): units that need a level they
    # never had are summarised, the others not again; and again, nothing new at all.
    for _ in range(2):
        run_async(manager.set_messages(history))
        run_async(manager.get_messages_for_request())
        assert set(summarizer.calls.values()) == {1}
        assert levels.made == sum(summarizer.calls.values()) == len(levels)
    made = levels.made
    run_async(manager.set_messages(history))
    run_async(manager.get_messages_for_request())
    assert levels.made == made


def test_a_unit_shorter_than_its_summary_stays_whole():
    async def verbose(messages: list[dict[str, Any]], *, max_tokens: int) -> str:
        return "a rather long description of a very short message " * 20

    manager = ReferenceContextManager(strategies=["hierarchical"], summarizer=verbose)
    history = [{"role": "system", "content": "Be brief."}]
    for i in range(60):
        history += [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": "ok"}]
    run_async(manager.set_messages(history))
    view, seen, _post = view_levels(manager, 200)
    assert coarse_ranges(view) == []
    assert seen["units_by_level"]["paragraph"] == seen["units_by_level"]["line"] == 0


# -- events, listing, audit ------------------------------------------------------------------


def test_events_say_each_units_level_and_the_tokens_each_level_saved():
    history = long_history()
    manager = ReferenceContextManager(strategies=["hierarchical"], view_listing=True)
    run_async(manager.set_messages(history))
    view, seen, post = view_levels(manager, 30_000)
    count = manager.counter.count_message
    saved: Counter[str] = Counter()
    shown: dict[tuple[int, int], str] = {}
    assert post["level_ranges"]
    for position, (start, stop) in coarse_ranges(view):
        level = next(lv for a, b, lv in post["level_ranges"] if a <= start and stop <= b)
        shown[(start, stop)] = level
        saved[level] += sum(count(m) for m in history[start:stop]) - count(view[position])
    assert post["tokens_saved_by_level"] == dict(saved)
    assert seen["tokens_saved_by_level"] == dict(saved)
    covered = sum(b - a for a, b, _lv in post["level_ranges"])
    assert covered == sum(stop - start for start, stop in shown)
    rows = [row for row in seen["listing"] if row.get("level")]
    assert rows
    assert all(row["fate"] == "summary" and row["index"] is None for row in rows)
    for row in rows:
        assert shown[tuple(row["stands_for"])] == row["level"]
    assert seen["kinds"]["summary"] == len(shown)


def test_the_audit_records_a_unit_once_when_it_leaves_full_detail():
    history = long_history()
    manager = ReferenceContextManager(max_tokens=30_000, strategies=["hierarchical"])
    for message in history:
        run_async(manager.add_message(message))
        if message.get("role") == "assistant" and not message.get("tool_calls"):
            run_async(manager.get_messages_for_request())
    entries = manager.audit()
    assert len(entries) >= 2
    seen: Counter[int] = Counter()
    for entry in entries:
        for start, stop in entry["summarized"]:
            seen.update(range(start, stop))
    assert seen
    assert set(seen.values()) == {1}


# -- configuration -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"strategies": ["hierarchical", "importance"]}, "cannot be combined"),
        ({"hierarchical": {"line_tokens": 20}}, "'hierarchical' is not among the strategies"),
        ({"strategies": ["hierarchical"], "hierarchical": {"lines": 3}}, "unknown hierarchical"),
        ({"strategies": ["hierarchical"], "hierarchical": [1]}, "must be a mapping"),
        (
            {"strategies": ["hierarchical"], "hierarchical": {"full_share": 1.5}},
            "hierarchical.full_share must be a share",
        ),
        (
            {"strategies": ["hierarchical"], "hierarchical": {"line_tokens": 0}},
            "hierarchical.line_tokens must be an integer >= 1",
        ),
        (
            {
                "strategies": ["hierarchical"],
                "hierarchical": {"full_share": 0.8, "paragraph_share": 0.3},
            },
            "must not exceed 1",
        ),
    ],
)
def test_impossible_configurations_are_refused_with_a_sentence(config, fragment):
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        ReferenceContextManager.from_config(config)


def test_options_change_the_shares_and_the_lengths():
    history = long_history()
    manager = ReferenceContextManager.from_config(
        {
            "strategies": ["hierarchical"],
            "hierarchical": {"full_share": 0.2, "paragraph_share": 0, "line_tokens": 12},
        }
    )
    run_async(manager.set_messages(history))
    view, seen, _post = view_levels(manager, 30_000)
    assert seen["units_by_level"]["paragraph"] == 0
    for position, _span in coarse_ranges(view):
        text = MARKER.sub("", text_of(view[position]))
        assert "\n" not in text
        assert manager.counter.count_text(text) <= 12


# -- the drill-down tool -----------------------------------------------------------------------

STRICT = pydantic.ConfigDict(extra="forbid", strict=True)


def test_the_recall_tool_declares_itself_in_each_providers_own_types():
    # Imported here, not with the module: every xdist worker collects every file, and these
    # SDKs cost each worker two seconds that only this test needs.
    from anthropic.types import ToolParam
    from google.genai import types as genai_types
    from openai.types.chat import ChatCompletionToolParam
    from openai.types.responses import FunctionToolParam

    tool = recall_tool(ReferenceContextManager())
    for kind, entry in (
        (ChatCompletionToolParam, tool.openai),
        (FunctionToolParam, tool.responses),
        (ToolParam, tool.anthropic),
    ):
        (checked,) = pydantic.TypeAdapter(list[kind], config=STRICT).validate_python([entry])
        assert json.loads(json.dumps(checked, default=list)) == entry
    parsed = genai_types.Tool.model_validate_json(json.dumps(tool.gemini))
    (declaration,) = parsed.function_declarations
    assert declaration.name == tool.name == "recall"
    assert declaration.parameters.required == ["ids"]
    assert tool.openai["function"]["parameters"] == tool.parameters
    assert tool.parameters["additionalProperties"] is False  # what strict mode asks for


def test_recall_takes_each_providers_arguments_and_says_what_it_does_not_know():
    history = long_history(size=120)
    manager = ReferenceContextManager()
    run_async(manager.set_messages(history))
    tool = recall_tool(manager)
    call_id = history[2]["tool_calls"][0]["id"]
    as_string = json.loads(run_async(tool.handler(json.dumps({"ids": ["m2", call_id]}))))
    as_dict = json.loads(run_async(tool.handler({"ids": "m2"})))
    (unit,) = as_string["recalled"]
    assert as_dict["recalled"] == [unit]
    assert unit["messages"][0] == history[2]
    assert all(m.get("role") == "tool" for m in unit["messages"][1:])
    middle = json.loads(run_async(tool.handler({"ids": ["m3"]})))  # a result: its whole unit
    assert middle["recalled"] == [unit]
    unknown = json.loads(run_async(tool.handler({"ids": ["m99999", "call_nowhere", "x-y"]})))
    assert unknown == {"recalled": [], "unknown": ["m99999", "call_nowhere", "x-y"]}
    wide = json.loads(run_async(tool.handler({"ids": [f"m0-m{len(history) - 1}"]})))
    assert len(wide["recalled"]) == MAX_UNITS
    assert wide["left_out"]
    for bad in ("{not json", json.dumps([1]), {"ids": []}, {"ids": [3]}):
        assert "error" in json.loads(run_async(tool.handler(bad)))


# -- the conformance suite ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shapes", "strategies"),
    [
        (("openai", "anthropic"), ["hierarchical"]),
        (("openai", "anthropic"), ["truncate_outputs", "hierarchical", "summarize"]),
        (("responses",), ["truncate_outputs", "hierarchical"]),
        (("gemini",), ["hierarchical", "summarize"]),
    ],
)
def test_the_reference_manager_passes_the_suite_with_hierarchical(shapes, strategies):
    """As ``ctxkit conformance --config '{"strategies": [...]}' --shapes ...``, quick."""
    report = run(
        RunOptions(
            config={"strategies": strategies},
            profile="quick",
            seed=5,
            shapes=shapes,
            timeout=20,
            stability_steps=0,
        )
    )
    failed = {p.id: p.message for p in report.properties if p.status not in ("passed", "skipped")}
    assert report.verdict == "pass"
    assert failed == {}
    required = [p for p in report.properties if p.level == "required"]
    assert required
    assert all(p.status == "passed" for p in required)
    assert report.depth["examples"] > 0


# -- the default summarizer --------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", ["openai", "anthropic", "responses", "gemini", "bedrock", "genai"]
)
def test_the_extractive_unit_summary_reads_calls_and_results_in_every_shape(shape):
    round_ = RoundTemplate(shape, ("first line\nsecond\nthird", "Error: no such file"), (1, 0))
    messages = round_.messages(itertools.count(1))
    paragraph = run_async(extractive_unit_summary(messages, max_tokens=160)).splitlines()
    assert any(line.startswith("called bash(") for line in paragraph)
    assert any("first line (+2 lines)" in line for line in paragraph)
    assert any("no such file" in line for line in paragraph)
    assert "  second" in paragraph  # room left takes more lines of the outputs
    short = run_async(extractive_unit_summary(messages, max_tokens=10))
    assert 0 < len(short) <= 30
    assert paragraph[0].startswith(short.rstrip("…"))  # the start of the same account


@settings(max_examples=40)
@given(plan=conversation_plans(max_turns=3), shapes=SHAPE_SETS, tokens=st.integers(1, 300))
def test_the_extractive_unit_summary_stays_within_about_its_tokens(plan, shapes, tokens):
    messages = plan.messages(shapes)
    text = run_async(extractive_unit_summary(messages, max_tokens=tokens))
    assert len(text) <= 3 * tokens
    assert run_async(extractive_unit_summary(messages, max_tokens=tokens)) == text


def test_prometheus_counts_units_by_level_and_the_tokens_each_level_saved():
    """The view event's levels reach /metrics, exactly as the event gives them."""
    from prometheus_client import CollectorRegistry

    from ctxkit.telemetry.prometheus import PrometheusMetrics

    registry = CollectorRegistry()
    manager = ReferenceContextManager(strategies=["hierarchical"])
    manager.bus.subscribe(PrometheusMetrics(registry))
    run_async(manager.set_messages(long_history()))
    _, seen, _ = view_levels(manager, 30_000)
    manager.bus.flush()
    sample = registry.get_sample_value
    for level, units in seen["units_by_level"].items():
        assert sample("ctxkit_view_units_by_level_total", {"level": level}) == units
    for level, tokens in seen["tokens_saved_by_level"].items():
        assert sample("ctxkit_view_level_tokens_saved_total", {"level": level}) == tokens
    assert seen["units_by_level"]["line"] > 0
    assert sample("ctxkit_view_units_recalled_total") == 0
