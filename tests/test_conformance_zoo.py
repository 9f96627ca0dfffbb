"""The checker against the zoo: every broken manager caught under the right property id, every
correct-but-unusual one passing every required property."""

from __future__ import annotations

import ast
import inspect
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis.stateful import RULE_MARKER

from ctxkit.adapters.reports import history_before_view
from ctxkit.cli.conformance import exit_code
from ctxkit.conformance.reports.formats import summary
from ctxkit.conformance.reports.results import without_times
from ctxkit.conformance.runner import CUT_SHORT, RunOptions, SetupError, run
from ctxkit.conformance.schedule import DEFAULT_MAX_TOKENS
from ctxkit.conformance.search import cache_stability
from ctxkit.conformance.search.machine import SteeredMachine
from ctxkit.prefix import STABILITY_THRESHOLD
from tests.shared_runs import shared
from tests.zoo import ZOO, Member

ROOT = Path(__file__).resolve().parent.parent
REQUIRED = {"tool_pair_integrity", "ordering", "non_destructive", "lifecycle"}


def check(member: Member, **overrides: Any) -> dict[str, Any]:
    """The run's outcome for a member, with its config: the default run, judged in the shapes
    the member declares (or Chat Completions), unless the member names its --shapes."""
    overrides["config"] = tuple(dict(overrides.get("config", member.config)).items())
    if member.format is not None:
        overrides.setdefault("shapes", tuple(member.format.split(",")))
    return _check(member.target, tuple(sorted(overrides.items(), key=str)))


def deep(member: Member) -> dict[str, Any]:
    """A fault that needs 40+ messages needs the default profile's longer runs."""
    return {"profile": "default"} if "40+" in member.note else {}


@shared
def _check(target: str, overrides: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """One run per target and options, shared by the tests that look at it."""
    options = RunOptions(
        target=target,
        profile="quick",
        seed=8,  # any seed: what matters is that every member is found at it
        timeout=3.0,
        max_rounds=2,
        shrink_seconds=1.5,  # the minimizer's own pass goes on from there
        stability_steps=40,  # the advisory loop, short: tests/test_prefix.py judges it whole
    )
    for key, value in overrides:
        setattr(options, key, dict(value) if key == "config" else value)
    report = run(options)
    return {
        "verdict": report.verdict,
        "shapes": report.shapes,
        "failed": {p.id for p in report.properties if p.status == "failed"},
        "errors": {p.id: p.message for p in report.properties if p.status == "error"},
        "messages": " ".join(p.message for p in report.properties),
        "properties": {p.id: p for p in report.properties},
        "depth": report.depth,
        "summary": summary(report),
    }


def _id(member: Member) -> str:
    """A member's target, with its --shapes where one target is checked in several."""
    return member.target if member.format is None else f"{member.target}[{member.format}]"


@pytest.mark.parametrize(
    "member",
    [pytest.param(m, marks=pytest.mark.long) if deep(m) else m for m in ZOO if m.outcome == "fail"],
    ids=_id,
)
def test_broken_manager_is_caught_under_its_property(member: Member):
    # LateSplitter's run takes about 40 s: its fault needs 40+ messages, so the default
    # profile's long runs (deep()); the run is shared with the test that shows it whole.
    outcome = check(member, **deep(member))
    assert member.expect <= outcome["failed"], (member.note, outcome["depth"], outcome["messages"])
    others = (outcome["failed"] & REQUIRED) - member.expect - {p for p, _ in member.also}
    assert not others, f"{member.target} fails no other required property: {outcome['messages']}"
    for property_id in member.expect:
        result = outcome["properties"][property_id]
        assert result.counterexample["steps"], "a failure comes with the steps that show it"
        assert result.verified, result.verification
        assert result.time_to_failure_s is not None
    if member.expect & REQUIRED:
        expected, code = "fail", 1
    else:  # a manager that never compacts was never tested where it compacts
        expected, code = ("pass", 0) if member.compacts else ("inconclusive", 4)
    assert outcome["verdict"] == expected, outcome["depth"]
    assert exit_code(outcome["verdict"]) == code


@pytest.mark.parametrize("member", [m for m in ZOO if m.outcome == "inconclusive"], ids=_id)
def test_a_manager_that_never_compacts_is_inconclusive_never_a_pass(member: Member):
    """Every required property holds, but no view was ever compacted, though one history was
    grown to --max-tokens: the verdict says so, with its figures and what to change, and
    has an exit code of its own."""
    outcome = check(member)
    assert not outcome["failed"] & REQUIRED, outcome["messages"]
    assert outcome["verdict"] == "inconclusive"
    assert exit_code(outcome["verdict"]) == 4
    depth = outcome["depth"]
    assert depth["compacted_views"] == 0
    assert depth["views"] > 100
    assert depth["largest_history_tokens"] >= 0.95 * DEFAULT_MAX_TOKENS, depth
    said = outcome["summary"].splitlines()
    (verdict,) = [line for line in said if line.startswith("INCONCLUSIVE")]
    assert "never compacted" in verdict
    assert f"histories reached {depth['largest_history_tokens']:,} tokens" in verdict
    assert "--max-tokens" in verdict


def test_a_fault_past_the_size_the_search_reaches_is_found_by_growing_a_history():
    """SplitsPastItsWindow compacts only past 60,000 tokens of its own count, which a short
    search's histories do not reach: the run grows one there, then searches from that size,
    and finds the split pair."""
    (member,) = [m for m in ZOO if m.target.endswith(":SplitsPastItsWindow") and m.compacts]
    outcome = check(member, max_examples=5)
    depth = outcome["depth"]
    assert "tool_pair_integrity" in outcome["failed"], outcome["messages"]
    # four characters of JSON a token is fewer tokens than tiktoken counts in the log read;
    # doubling alone stopped at 130,423, the halvings after it come down near the trigger
    assert 60_000 < depth["grown_to_tokens"] < 100_000, depth
    assert depth["searches"] == 2, "the short search, then the one from the grown size"


def test_a_steered_example_keeps_the_size_it_starts_at():
    """A steered example starts where the target compacts; a rule that cleared or replaced
    the history would send the rest of its steps back to the small histories the first
    search has already covered (they compacted 2 views an example, and missed a split)."""
    rules = {
        name for name, value in inspect.getmembers(SteeredMachine) if hasattr(value, RULE_MARKER)
    }
    assert not rules & {"clear_history", "set_messages", "set_messages_then_edit"}
    assert {"add_message", "run_tool_round", "run_turn", "request_view"} <= rules


@pytest.mark.parametrize("member", [m for m in ZOO if m.outcome == "pass"], ids=_id)
def test_correct_but_unusual_manager_passes_every_required_property(member: Member):
    outcome = check(member)
    assert not outcome["failed"] & REQUIRED, outcome["messages"]
    # for the right reason: judged in the shapes it speaks, said as the report says it
    declared = outcome["shapes"]
    if member.format is not None:
        assert declared.source == "shapes"
    elif member.target.startswith(("tests.zoo.amplifier:", "tests.zoo.contract_one:")):
        assert declared.source == "amplifier"
    elif member.target.startswith("tests.zoo.forms:") and "Session" not in member.target:
        assert (declared.source, declared.shapes) == ("default", ("openai",))
    else:
        assert declared.source in ("declared", "default"), declared
    assert outcome["verdict"] == "pass"
    assert exit_code(outcome["verdict"]) == 0


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("DropsReasoning", "without its required 'reasoning' item"),
        ("DropsThinking", "must start with a thinking block"),
        ("FirstResponseOnly", "number of function response parts is equal"),
        ("HoistsServerResults", "no server_tool_use before it in the same message"),
        # the newest items, whatever they are: an output without its call, or a call without
        # the reasoning item before it, whichever the search meets first
        ("LastItems", "no function_call item in the view calls|without its required 'reasoning'"),
    ],
)
def test_a_broken_provider_rule_is_named_with_the_providers_own_error(name: str, words: str):
    """Each member of the newer shapes is caught for its own rule, and the finding quotes the
    error the provider would answer with (conformance/rules/)."""
    member = next(m for m in ZOO if m.target.endswith(f"shapes:{name}"))
    result = check(member, **deep(member))["properties"]["tool_pair_integrity"]
    assert any(w in result.message for w in words.split("|")), result.message


def test_cache_stability_is_an_advisory_figure_that_fails_no_run():
    """A window whose start moves every request is correct (it passes) and costs a prompt
    cache nearly everything: the advisory property says so with its figure."""
    outcome = check(_member("SlidesEveryTurn"))
    stability = outcome["properties"]["cache_stability"]
    assert (stability.level, stability.status) == ("advisory", "below")
    assert stability.figure is not None
    assert stability.figure < STABILITY_THRESHOLD
    assert "below the 70% threshold" in stability.message
    assert outcome["verdict"] == "pass"
    assert exit_code(outcome["verdict"]) == 0


def test_a_permissive_manager_passes_by_default_because_it_is_judged_in_its_own_shape():
    """The Chat Completions manager that stores any dict is correct where it is judged by
    default; judged in every shape (--shapes all) it misreads the ones it was never written for
    and splits their pairs. The default is what keeps a correct manager from being accused."""
    member = _member("PermissiveChat")
    default = check(member)
    assert (default["shapes"].source, default["shapes"].shapes) == ("default", ("openai",))
    assert "--shapes all" in default["shapes"].hint(member.target)
    everything = check(
        member, shapes=("openai", "anthropic", "responses", "gemini", "bedrock", "genai")
    )
    assert "tool_pair_integrity" in everything["failed"], everything["messages"]


def test_a_store_that_normalizes_text_parts_passes_and_the_report_says_so():
    outcome = check(_member("TextPartsAsStrings"))
    assert not outcome["failed"] & REQUIRED, outcome["messages"]
    said = outcome["depth"]["normalized"]
    assert "'content': [{'type': 'text'" in said, said
    assert said.endswith("was given"), said


def test_amplifiers_first_contract_is_judged_with_non_destructive_not_applicable():
    """compact() rewrites the stored history by that contract: non_destructive is n/a, and
    what a request sends (get_messages() after compacting) is judged like any view."""
    outcome = check(_member("CompactsWholeUnits"))
    result = outcome["properties"]["non_destructive"]
    assert (result.status, result.message[:4]) == ("skipped", "n/a:"), result.message
    assert "compact() rewrites the stored history" in result.message
    assert outcome["properties"]["tool_pair_integrity"].status == "passed"
    split = check(_member("CompactsMessages"))["properties"]["tool_pair_integrity"]
    assert "manager = CompactingManager(CompactsMessages(**CONFIG))" in split.reproducer


def test_a_refusal_that_edits_history_is_charged_to_non_destructive_alone():
    """Once non_destructive has failed, later searches must not blame what a refused view
    did to the history on whichever property looks next (robustness, isolation)."""
    result = check(_member("DropsThenRefuses"))
    assert "non_destructive" in result["failed"]
    assert "raised" in result["properties"]["non_destructive"].message
    assert result["failed"] <= {"non_destructive", "lifecycle"}  # refusing too eagerly is one


def test_a_hang_is_an_error_that_says_timed_out():
    (member,) = [m for m in ZOO if m.target.endswith(":Hangs")]
    outcome = check(member, timeout=1.0)
    assert outcome["verdict"] == "error"
    assert outcome["errors"]
    assert all("timed out" in message for message in outcome["errors"].values())


def test_plain_function_methods_are_a_usage_error_that_names_them():
    (member,) = [m for m in ZOO if m.target.endswith(":SyncMethods")]
    with pytest.raises(SetupError) as raised:
        check(member)
    message = str(raised.value)
    assert "add_message, get_messages_for_request, get_messages, set_messages and clear" in (
        message
    )
    assert "declare them `async def`" in message


def test_a_manager_lacking_a_method_fails_lifecycle():
    outcome = _check("tests.zoo.misc:LacksClear", (("shapes", ("openai",)),))
    assert outcome["verdict"] == "fail"
    assert outcome["failed"] == {"lifecycle"}
    assert "lacks clear" in outcome["properties"]["lifecycle"].message


def test_an_import_error_cannot_be_checked():
    (member,) = [m for m in ZOO if m.target.endswith("broken_import:Manager")]
    with pytest.raises(SetupError, match="does_not_exist_ctxkit_zoo"):
        check(member)


def test_hoisting_system_messages_passes_once_allowed():
    (member,) = [m for m in ZOO if m.target.endswith(":HoistsSystem")]
    assert "ordering" in check(member)["failed"]
    outcome = check(member, allow=("hoisted-system",))
    assert "ordering" not in outcome["failed"]
    assert outcome["verdict"] == "pass"


def test_the_fault_that_needs_more_than_40_messages_is_found_and_shown_whole():
    (member,) = [m for m in ZOO if m.target.endswith(":LateSplitter")]
    outcome = check(member, **deep(member))
    result = outcome["properties"]["tool_pair_integrity"]
    assert result.status == "failed"
    assert result.counterexample["messages"] > 40


EQUIVALENT = (
    "FlipsTextShape",
    "NullsEmptyContent",
    "ReserializesArguments",
    "RebuildsMessages",
    "ClearsOldToolOutputs",
)
"""Members that rewrite view messages into shapes a provider reads the same (issue 12)."""


def _member(name: str) -> Member:
    (member,) = [m for m in ZOO if m.target.endswith(f":{name}")]
    return member


@pytest.mark.parametrize("name", EQUIVALENT)
def test_equivalent_rewrites_break_no_property_at_all(name: str):
    """Not only the required ones: preservation holds too, the rewritten system messages and
    newest user message being the same messages to a provider."""
    outcome = check(_member(name))
    assert outcome["failed"] == set(), outcome["messages"]


def test_merged_system_messages_are_reported_as_merged():
    outcome = check(_member("MergesSystem"))
    assert outcome["verdict"] == "pass"
    assert outcome["failed"] == {"preservation"}
    assert "are merged into view[" in outcome["properties"]["preservation"].message
    allowed = check(_member("MergesSystem"), allow=("dropped-system",))
    assert allowed["failed"] == set(), allowed["messages"]


def test_merging_system_messages_passes_once_merged_system_is_allowed():
    outcome = check(_member("MergesSystem"), allow=("merged-system",))
    assert outcome["failed"] == set(), outcome["messages"]


def test_results_of_parallel_calls_sorted_by_call_id_break_nothing():
    """The APIs take the results of parallel calls in any order (issue 45): a view that sorts
    them by call id keeps the history's order as they read it, no --allow needed."""
    outcome = check(_member("SortsResultsById"))
    assert outcome["failed"] == set(), outcome["messages"]
    assert outcome["properties"]["ordering"].status == "passed"


def test_the_failure_shown_is_the_real_reorder_not_results_in_another_order():
    """AnswerAheadOfTools sorts results by call id (which the APIs take) and sends its answer
    ahead of the tool round before it (a reorder): the smallest case is the answer, moved."""
    result = check(_member("AnswerAheadOfTools"))["properties"]["ordering"]
    assert result.status == "failed"
    said = re.search(r"view\[(\d+)\] \(history\[(\d+)\]\) moved (ahead|behind)", result.message)
    assert said, result.message
    history, _ = history_before_view(result.counterexample["trace"])
    moved = history[int(said.group(2))]
    assert said.group(3) == "ahead", result.message
    assert moved["role"] == "assistant", moved
    assert not moved.get("tool_calls"), moved
    assert not [b for b in moved.get("content") or () if isinstance(b, dict) and "id" in b]


def test_events_are_skipped_when_nothing_was_emitted_not_passed():
    (member,) = [m for m in ZOO if m.target.endswith(":NeverEmits")]
    result = check(member)["properties"]["events"]
    assert result.status == "skipped"
    assert result.message.startswith("no events observed")


def test_a_target_that_changes_nothing_it_is_given_passes_events():
    (member,) = [m for m in ZOO if m.target.endswith(":GoodManager")]
    assert check(member)["properties"]["events"].status == "passed"


@pytest.mark.long
def test_a_slow_target_gets_a_verdict_by_the_deadline_and_says_how_deep_it_got():
    """Views take 3 s: the run ends by its deadline with pass, not error, and a depth."""
    # About 25 s by design (the deadline is what is tested), mostly waiting, not computing.
    started = time.monotonic()
    report = run(
        RunOptions(target="tests.zoo.misc:SlowViews", profile="default", seed=1, deadline=30.0)
    )
    took = time.monotonic() - started
    assert report.duration_s < 30 + 2, report.duration_s  # the run keeps its deadline
    assert took < 30 + 10, (took, report.duration_s)  # and closes its workers after it
    # a pass only if the few views it had time for included a compacted one
    assert report.verdict == ("pass" if report.depth["compacted_views"] else "inconclusive")
    assert report.depth["ended"] == "deadline"
    assert report.depth["examples"] >= 1
    assert report.depth["steps"] > 3
    passed = [p for p in report.properties if p.status == "passed"]
    assert passed
    assert all("before the 30 s deadline" in p.message for p in passed)


def test_the_cache_loop_begins_no_step_it_cannot_end_by_the_deadline():
    """A step is begun only while the time left is at least the longest step so far: a loop
    of 3 s views must not begin one with less than 3 s left (found as a run of SlowViews that
    ended 2.7 s past its 30 s deadline)."""
    clock = [100.0]
    began = []
    for step in cache_stability._until(lambda: 110.0, iter(range(100)), clock=lambda: clock[0]):
        began.append(clock[0])
        clock[0] += 3.0 if step else 0.5  # the first step is quick, the others take 3 s
    assert began == [100.0, 100.5, 103.5, 106.5]  # not at 109.5: it would end at 112.5
    assert clock[0] <= 110.0


def _reproducers() -> dict[str, str]:
    """Every reproducer the zoo's broken members got, by a file name of its own."""
    found = {}
    for member in ZOO:
        if member.outcome not in ("fail", "error"):
            continue
        overrides = {"timeout": 1.0} if member.outcome == "error" else deep(member)
        for result in check(member, **overrides)["properties"].values():
            if result.reproducer:
                name = member.target.split(":")[-1].lower()
                found[f"test_{name}_{result.id}.py"] = result.reproducer
    return found


def test_every_reproducer_imports_its_target_and_the_public_api_and_fails_under_pytest(tmp_path):
    """The same scripts that fail when run with python (verified above) fail as tests."""
    # About 20 s on a loaded machine: it needs every broken member's run (shared with the
    # tests above: it waits for those another worker is making, makes the others), then one
    # pytest over all their reproducers.
    scripts = _reproducers()
    assert len(scripts) >= 20
    for name, script in scripts.items():
        tree = ast.parse(script)
        modules = {
            n.module if isinstance(n, ast.ImportFrom) else n.names[0].name
            for n in ast.walk(tree)
            if isinstance(n, ast.Import | ast.ImportFrom)
        }
        public = {
            *("asyncio", "json", "os", "sys"),
            *("ctxkit.conformance.replay", "ctxkit.forms", "ctxkit.messages"),
        }
        targets = modules - public  # the manager is imported as a test of one's own imports it
        assert len(targets) == 1, (name, modules)
        assert next(iter(targets)).startswith("tests.zoo."), name
        (tmp_path / name).write_text(script)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)), check=False,
    )  # fmt: skip
    assert f"{len(scripts)} failed" in done.stdout, done.stdout[-3000:]
    assert " passed" not in done.stdout.splitlines()[-1]


def test_a_call_slowed_once_is_given_more_time_and_not_charged():
    report = run(
        RunOptions(target="tests.zoo.misc:SlowFirstView", profile="quick", seed=1, timeout=1.0)
    )
    assert report.verdict == "pass", [(p.id, p.status, p.message) for p in report.properties]
    assert not [p for p in report.properties if p.status == "error"]
    assert report.depth["slow_calls"] == 1
    assert report.depth["timeout_s"] == 3.0
    assert report.depth["searches"] == 1  # the search went on past the slow call


def test_a_first_build_slowed_once_is_given_the_same_grace_and_not_charged():
    report = run(
        RunOptions(target="tests.zoo.misc:SlowFirstBuild", profile="quick", seed=1, timeout=1.0)
    )
    assert report.verdict == "pass", [(p.id, p.status, p.message) for p in report.properties]
    assert report.depth["slow_calls"] == 1
    assert report.depth["timeout_s"] == 3.0


def test_a_hang_is_confirmed_before_it_is_charged():
    (member,) = [m for m in ZOO if m.target.endswith(":Hangs")]
    # A seed whose first hang is charged to lifecycle: only a run's first timeout gets a grace.
    lifecycle = check(member, timeout=1.0, seed=20261121)["properties"]["lifecycle"]
    assert lifecycle.status == "error"
    assert "did not return within 1 s, nor within 3 s when given longer" in lifecycle.message
    assert lifecycle.verified, lifecycle.verification  # beside the searches after it


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_robustness_tries_every_bad_message_of_the_judged_shapes_and_no_other(seed: int):
    """The same verdict and sentence on every seed: a manager of one API is never handed
    another API's bad messages, and every bad message of its own is tried."""
    quick = (("max_examples", 5), ("only", frozenset({"robustness"})), ("seed", seed))
    lenient = _check("tests.zoo.misc:AnthropicStrictChatLenient", quick)
    assert lenient["properties"]["robustness"].status == "passed", lenient["messages"]
    strict = _check("tests.zoo.misc:AnthropicLenient", quick)
    failure = strict["properties"]["robustness"]
    assert failure.status == "failed"
    assert failure.message.startswith("add_message accepted a tool_use block without an id")


_BUDGET_SAID = re.compile(r"budget of ([\d,]+)")
_BUDGET_ASKED = re.compile(
    r"token_budget=(\d+)|\"context_window\": (\d+), \"max_output_tokens\": (\d+)"
)


@pytest.mark.parametrize("member", [m for m in ZOO if m.outcome == "fail"], ids=_id)
def test_every_budget_a_sentence_names_is_the_one_its_script_asks(member: Member):
    """A sentence that says "a budget of 40" while its script asks 51 reads wrong: every
    budget a failure's sentence names is one its reproducer's views are asked with."""
    outcome = check(member, **deep(member))
    for property_id in member.expect:
        result = outcome["properties"][property_id]
        said = {int(n.replace(",", "")) for n in _BUDGET_SAID.findall(result.message)}
        asked = {dict(member.config).get("max_tokens")}  # a request that names none: its own
        if "named no budget" not in result.message:
            asked = set()
        for tokens, window, output in _BUDGET_ASKED.findall(result.reproducer or ""):
            asked.add(int(tokens) if tokens else int(window) - int(output))
        assert said <= asked, (result.message, sorted(asked))


@pytest.mark.parametrize(
    ("target", "config"),
    [
        ("tests.zoo.pairs:SplitsPairsOpenAI", {}),  # a failure, minimized and verified
        ("tests.zoo.views:DropsSystemPrompt", {}),  # a recommended failure, a pass
        ("tests.zoo.views:IgnoresBudget", {}),  # inconclusive, after growing a history
    ],
)
def test_the_same_run_twice_gives_the_same_report_but_for_times(target: str, config: dict):
    """The same command on the same code gives the same verdict, case and sentence: two
    runs with the default seed write the same JSON report, times aside."""
    options = {"target": target, "config": config, "profile": "quick", "max_tokens": 40_000}
    first, second = (run(RunOptions(**options)).to_json() for _ in range(2))
    assert first["seed"] == 1
    assert without_times(first) == without_times(second)


def test_a_minimizing_cut_short_by_time_says_so_and_one_bounded_by_work_does_not():
    """Work (bytes exchanged with the target) bounds the minimizer, so the case is the same
    on a busy machine; only the limit in time beside it, when met, leaves a case that may
    differ, and the sentence says so."""
    options = {"target": "tests.zoo.pairs:SplitsPairsOpenAI", "profile": "quick"}
    whole = run(RunOptions(**options)).to_json()
    cut = run(RunOptions(**options, minimize_seconds=0.001)).to_json()
    message = {p["id"]: p["message"] for p in whole["properties"]}["tool_pair_integrity"]
    cut_message = {p["id"]: p["message"] for p in cut["properties"]}["tool_pair_integrity"]
    assert CUT_SHORT not in message
    assert cut_message.endswith(f"({CUT_SHORT})"), cut_message
