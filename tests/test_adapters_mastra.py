"""Mastra's TokenLimiter through the Node harness (js:@mastra/core:TokenLimiter): messages cross
to the provider prompt it trims and back faithfully in both shapes; the suite's verdicts and
their causes (a tool call's input counted below its text, a bug with a verified upstream
reproducer; a TripWire instead of an empty prompt and best-fit trimming, design); each option
reaching Mastra as written, null included. @mastra/core comes from tests/js (`npm ci` in
.ci/run; no network at test time)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from ctxkit.adapters import JS_ADAPTERS
from ctxkit.adapters.mastra import bug_report
from ctxkit.conformance.judge.comes_from import equivalent
from ctxkit.conformance.replay import check, open_manager
from ctxkit.conformance.reports.results import Report
from ctxkit.conformance.runner import RunOptions, run
from ctxkit.conformance.search.conversations import conversations
from ctxkit.survey.matrix import row_from_report
from tests.adapter_runs import SHORT, assert_judged
from tests.processes import ctxkit, json_lines
from tests.system import missing, require_binary

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "js"
TARGET = "js:@mastra/core:TokenLimiter"
ADAPTER_PART = {"non_destructive", "isolation", "robustness", "concurrency"}
PINNED = json.loads((FIXTURES / "package.json").read_text())["dependencies"]["@mastra/core"]


@pytest.fixture(scope="module", autouse=True)
def installed() -> None:
    require_binary("node")
    if not (FIXTURES / "node_modules" / "@mastra" / "core").is_dir():
        missing("tests/js has no @mastra/core: run `npm ci --prefix tests/js`")


@pytest.fixture(scope="module")
def roundtrip() -> Iterator[Callable[[Any], Any]]:
    with json_lines(["node", "roundtrip.mjs", "mastra"], cwd=FIXTURES) as ask:
        yield ask


@pytest.fixture(scope="module")
def limiter() -> Iterator[Callable[..., dict[str, Any]]]:
    """``limiter(history, budget, **config)``: the adapter built and viewed in one Node process,
    with what the TokenLimiter that made the view holds (tests/js/mastra-limiter.mjs)."""
    with json_lines(["node", "mastra-limiter.mjs"], cwd=FIXTURES) as ask:
        yield lambda history, budget, **config: ask(
            {"config": config, "history": history, "budget": budget}
        )


@pytest.fixture(scope="module")
def report() -> Report:
    """One short run of the suite, from tests/js (where the library is)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(FIXTURES)
        patch.setenv("PYTHONPATH", str(ROOT))  # reproducers import this ctxkit
        # the default profile's 80 examples (about 15 s): the budget fault (tool calls counted
        # below their text) and the preservation fault need a tool round over a tight budget,
        # which a short search does not always reach
        return run(RunOptions(target=TARGET, **{**SHORT, "profile": "default", "max_examples": 80}))


def view_of(history: list[dict], budget: int, config: dict | None = None) -> list[dict]:
    """The view through the real harness, as `ctxkit conformance` builds the manager."""

    async def scenario() -> list[dict]:
        manager, _events = await open_manager(TARGET, config)
        try:
            await manager.set_messages(history)
            return await manager.get_messages_for_request(token_budget=budget)
        finally:
            manager.close()

    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(FIXTURES)  # the library is resolved from where ctxkit runs
        return asyncio.run(scenario())


def calls(count: int) -> list[dict]:
    """An assistant message of ``count`` tool calls with input {}, and their empty results."""
    ids = [f"call_{n}" for n in range(count)]
    asking = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            for i in ids
        ],
    }
    return [asking, *({"role": "tool", "tool_call_id": i, "content": ""} for i in ids)]


@settings(max_examples=40, deadline=None)
@given(conversations(shapes=("openai",)) | conversations(shapes=("anthropic",)))
def test_a_history_crosses_to_the_prompt_and_back_unchanged(roundtrip, history):
    back = roundtrip(history)
    assert len(back) == len(history)
    for got, want in zip(back, history, strict=True):
        assert equivalent(got, want), (got, want)


def test_a_user_message_reaches_the_limiter_as_a_text_part_it_counts(limiter):
    # as a bare string, the limiter would count its characters as nothing and keep it
    history = [{"role": "user", "content": "word " * 400}, {"role": "user", "content": "short?"}]
    assert limiter(history, 100)["view"] == [history[1]]


# -- the suite's verdicts ------------------------------------------------------------------------


def test_the_adapters_own_part_passes_and_every_failure_is_verified_and_classified(report):
    findings = next(a for a in JS_ADAPTERS if a.name == TARGET).findings
    assert_judged(report, ADAPTER_PART, findings)
    statuses = {p.id: p.status for p in report.properties}
    assert statuses["tool_pair_integrity"] == statuses["ordering"] == "passed"
    assert {p for p, s in statuses.items() if s == "failed"} == set(findings)
    assert findings["budget"].kind == "bug"
    assert findings["lifecycle"].kind == findings["preservation"].kind == "design"


def test_lifecycle_fails_because_an_empty_history_trips_the_wire(report):
    (lifecycle,) = [p for p in report.properties if p.id == "lifecycle"]
    assert lifecycle.status == "failed"
    assert "No messages to process" in lifecycle.message
    with pytest.raises(Exception, match="No messages to process"):
        view_of([], 1_000_000)


def test_preservation_fails_because_best_fit_skips_the_newest_question(report):
    (preservation,) = [p for p in report.properties if p.id == "preservation"]
    assert preservation.status == "failed"
    assert "the newest user message" in preservation.message
    history = [
        {"role": "assistant", "content": "read the file"},
        {"role": "user", "content": "fix the failing test in config.py"},
    ]
    # 24 tokens a conversation plus its estimate leave no room for the question, but the older
    # answer fits: best-fit keeps it alone; contiguous stops at the question and keeps nothing
    assert view_of(history, 37) == [history[0]]
    with pytest.raises(Exception, match="No messages fit within the remaining token budget"):
        view_of(history, 37, {"trimMode": "contiguous"})


def test_budget_fails_because_tool_calls_count_below_their_text(report, tmp_path):
    (budget,) = [p for p in report.properties if p.id == "budget"]
    assert budget.status == "failed"
    assert budget.verified
    assert "the view has" in budget.message
    # the counterexample's own history shows the discount in an upstream-ready script
    row = row_from_report(TARGET, report.to_json())
    text = bug_report("budget", row.cells["budget"])
    script = text.split("```js\n", 1)[1].split("```", 1)[0]
    assert "ctxkit" not in script  # @mastra/core's own types and function only
    path = FIXTURES / f"reproduce-{tmp_path.name}.mjs"
    path.write_text(script)
    try:
        done = subprocess.run(["node", path.name], capture_output=True, text=True, cwd=FIXTURES)
    finally:
        path.unlink()
    assert done.returncode == 1, done.stdout
    assert "an input object is counted below its own text" in done.stderr


def test_thirty_tool_calls_count_below_zero_so_a_view_holds_far_more_than_the_budget():
    history = [{"role": "user", "content": "word " * 150}, *calls(30)]
    view = view_of(history, 100)
    assert view == history
    with pytest.raises(AssertionError, match="at a budget of 100 the view has"):
        check.fits(view, 100)
    # the same turn with one call is counted honestly enough to drop the long question
    assert view_of([history[0], *calls(1)], 100) == calls(1)


def test_no_report_for_other_properties_or_a_history_without_tool_calls(report):
    row = row_from_report(TARGET, report.to_json())
    assert bug_report("preservation", row.cells["preservation"]) == ""
    trace = [{"op": "add", "value": {"role": "user", "content": "hi"}}, {"op": "request"}]
    assert bug_report("budget", type("Cell", (), {"trace": trace})()) == ""


# -- options -------------------------------------------------------------------------------------

SHORT_TURN = [{"role": "user", "content": "hi"}]
GAP = [
    {"role": "user", "content": "first"},
    {"role": "assistant", "content": "long " * 300},
    {"role": "user", "content": "second"},
]


@pytest.mark.parametrize(
    ("option", "value", "held"),
    [
        ("strategy", "abort", "abort"),
        ("strategy", None, "truncate"),  # Mastra's `strategy || "truncate"`
        ("countMode", "part", "part"),
        ("countMode", None, "cumulative"),
        ("trimMode", "contiguous", "contiguous"),
        ("trimMode", None, "best-fit"),
        ("atMaxRemoveTokens", 10, 10),
        ("atMaxRemoveTokens", None, 25),  # `?? limit * 0.25`
        ("tokenCounter", None, None),
        ("tokenCounter", {"countMessage": 1}, {"countMessage": 1}),
        ("onMemoryTrim", None, None),
    ],
)
def test_each_option_reaches_the_limiter_as_written(limiter, option, value, held):
    answer = limiter(SHORT_TURN, 100, **{option: value})
    assert answer["limiter"][option] == held
    assert answer["limiter"]["limit"] == 100  # the request's budget
    assert answer["view"] == SHORT_TURN


@pytest.mark.parametrize("value", ["o200k_base", None])
def test_encoding_is_accepted_and_changes_nothing_as_mastra_ignores_it(limiter, value):
    assert limiter(GAP, 60, encoding=value)["view"] == limiter(GAP, 60)["view"]


@pytest.mark.parametrize("option", ["strategy", "countMode"])
def test_an_output_option_leaves_the_request_stage_alone(limiter, option):
    value = {"strategy": "abort", "countMode": "part"}[option]
    assert limiter(GAP, 60, **{option: value})["view"] == [GAP[0], GAP[2]]


def test_best_fit_keeps_an_older_message_past_one_that_does_not_fit_and_contiguous_stops(limiter):
    assert limiter(GAP, 60)["view"] == [GAP[0], GAP[2]]
    assert limiter(GAP, 60, trimMode=None)["view"] == [GAP[0], GAP[2]]
    assert limiter(GAP, 60, trimMode="contiguous")["view"] == [GAP[2]]


def test_memory_only_leaves_the_request_whole(limiter):
    assert limiter(GAP, 60, trimMode="memory-only")["view"] == GAP


def test_mastra_refuses_a_memory_only_removal_over_the_limit_when_the_manager_is_built(limiter):
    answer = limiter(GAP, 60, trimMode="memory-only", atMaxRemoveTokens=10**9)
    assert answer == {
        "refused": "Error: Memory token limits must be finite, non-negative, and "
        "atMaxRemoveTokens cannot exceed limit"
    }


def test_an_unknown_option_is_refused_with_a_sentence_naming_the_known_ones(limiter):
    assert limiter(SHORT_TURN, 100, maxTokens=5) == {
        "refused": "TypeError: js:@mastra/core:TokenLimiter (TokenLimiter) has no option "
        "'maxTokens'; its options are encoding, strategy, countMode, trimMode, "
        "atMaxRemoveTokens, tokenCounter, onMemoryTrim (and max_tokens, the budget when a "
        "request names none)"
    }


def test_the_limit_is_the_budget_and_cannot_be_set(limiter):
    assert "'limit' cannot be set: it is each request's budget" in limiter(
        SHORT_TURN, 100, limit=5
    ).get("refused", "")


def test_the_cli_refuses_an_unknown_option_with_exit_2_naming_the_known_ones():
    done = ctxkit("conformance", TARGET, "--config", '{"maxTokens": null}', cwd=FIXTURES)
    assert done.returncode == 2, done.stderr
    assert "has no option 'maxTokens'; its options are encoding, strategy" in done.stderr


# -- installation --------------------------------------------------------------------------------


def test_the_adapter_is_listed_with_the_installed_version():
    done = ctxkit("conformance", "--list-adapters", cwd=FIXTURES)
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith(TARGET)]
    assert line.split()[1:] == ["@mastra/core", PINNED]


def test_a_missing_library_says_what_to_install(tmp_path):
    done = ctxkit("conformance", TARGET, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "run `npm install @mastra/core` in this directory" in done.stderr
