"""The schedules (ctxkit.conformance.schedule): the budget a later search gets, the same answer
for the same seed, and the same verdicts as the full schedule, with the cache loop beside."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxkit.conformance.runner import RunOptions, SetupError, run
from ctxkit.conformance.schedule import SCHEDULES
from tests.shared_runs import shared

pytestmark = pytest.mark.xdist_group("schedule")


@given(max_examples=st.integers(1, 1_000), clean=st.integers(0, 5_000), search=st.integers(2, 6))
def test_a_later_search_runs_what_is_left_but_never_less_than_a_quarter(
    max_examples: int, clean: int, search: int
):
    budget, full = SCHEDULES["budget"], SCHEDULES["full"]
    assert budget.examples(max_examples, clean, 1) == max_examples  # the first: all of them
    given_later = budget.examples(max_examples, clean, search)
    assert max_examples / 4 <= given_later <= max_examples
    assert given_later == max(max_examples - clean, -(-max_examples // 4))
    assert full.examples(max_examples, clean, search) == max_examples


def test_an_unknown_schedule_is_a_setup_error():
    with pytest.raises(SetupError, match="unknown schedule 'fast'; choose budget, full"):
        run(RunOptions(target="tests.zoo.base:GoodManager", schedule="fast"))


@shared
def _report(target: str, schedule: str, attempt: int) -> dict[str, Any]:
    """What a quick run says, as far as the same seed must say it again."""
    report = run(
        RunOptions(
            target=target,
            schedule=schedule,
            profile="quick",
            seed=3,
            timeout=5.0,
            stability_steps=40,
        )
    )
    failed = {p.id: p for p in report.properties if p.status == "failed"}
    return {
        "verdict": report.verdict,
        "failed": sorted(failed),
        "verified": {k: p.verified for k, p in failed.items()},
        "per_search": report.depth["examples_per_search"],
        "cache": next(p.figure for p in report.properties if p.id == "cache_stability"),
        "phases": report.phases,
    }  # fmt: skip


def test_the_same_seed_gives_the_same_answer_with_work_beside_the_search():
    """The cache loop and the verifications run in threads of their own beside the search:
    what the search finds, and what a later search is given, must not depend on when they
    run nor on how long Hypothesis shrank (its limits are in seconds, so the counterexamples'
    sizes may differ by a step between runs on a busy machine; the verdicts may not)."""
    first = _report("tests.zoo.forms:keep_last_messages", "budget", 1)
    again = _report("tests.zoo.forms:keep_last_messages", "budget", 2)
    assert first["verdict"] == "fail"
    assert set(first["phases"]["beside"]) == {"cache_loop", "verify"}
    for key in ("verdict", "failed", "per_search", "cache"):
        assert first[key] == again[key], key
    assert len(first["per_search"]) == 2  # the second search for what the first did not fail
    assert all(first["verified"].values())


@pytest.mark.parametrize(
    "target",
    [
        "tests.zoo.forms:keep_last_messages",  # fails three properties, in two searches
        "tests.zoo.pairs:SplitsPairsOpenAI",
        "tests.zoo.unusual:InsertsSummary",  # correct but unusual: passes
    ],
)
def test_budget_and_full_give_the_same_verdicts(target: str):
    budget = _report(target, "budget", 1)
    full = _report(target, "full", 1)
    assert budget["verdict"] == full["verdict"]
    assert budget["failed"] == full["failed"]
    assert budget["cache"] == full["cache"]  # the loop is the same wherever it runs
    assert full["phases"]["beside"] == []
    if len(budget["per_search"]) > 1:  # a later search ran what the first left, or a quarter
        assert 7 <= budget["per_search"][1] <= full["per_search"][1] == 25
