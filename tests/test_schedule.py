"""The schedules (ctxkit.conformance.schedule): the same answer for the same seed with work
beside the search, the same verdicts in every schedule, one search where the others search
again, and split searches (--jobs)."""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxkit.conformance.runner import RunOptions, SetupError, run
from ctxkit.conformance.shards import MIN_EXAMPLES, search_elsewhere, split
from tests.shared_runs import shared

pytestmark = pytest.mark.xdist_group("schedule")


def test_an_unknown_schedule_is_a_setup_error():
    with pytest.raises(SetupError, match="unknown schedule 'fast'; choose single, overlap, serial"):
        run(RunOptions(target="tests.zoo.base:GoodManager", schedule="fast"))


@shared
def _report(target: str, schedule: str, attempt: int) -> dict[str, Any]:
    """What a quick run says, as far as the same seed must say it again."""
    report = run(
        RunOptions(
            target=target,
            schedule=schedule,
            profile="quick",
            max_examples=12,
            seed=3,
            timeout=5.0,
            stability_steps=20,  # the fewest views that give a figure
        )
    )
    failed = {p.id: p for p in report.properties if p.status == "failed"}
    return {
        "verdict": report.verdict,
        "failed": sorted(failed),
        "required": sorted(k for k, p in failed.items() if p.level == "required"),
        "counterexamples": {k: p.counterexample for k, p in failed.items()},
        "verified": {k: p.verified for k, p in failed.items()},
        "per_search": report.depth["examples_per_search"],
        "cache": next(p.figure for p in report.properties if p.id == "cache_stability"),
        "phases": report.phases,
    }  # fmt: skip


def test_the_same_seed_gives_the_same_answer_with_work_beside_the_search():
    """The cache loop and the verifications run in threads of their own beside the search:
    what the search finds must not depend on them. In the default schedule nothing depends on
    the clock, so the counterexamples are the same too."""
    first = _report("tests.zoo.forms:keep_last_messages", "single", 1)
    again = _report("tests.zoo.forms:keep_last_messages", "single", 2)
    assert first["verdict"] == "fail"
    assert set(first["phases"]["beside"]) == {"cache_loop", "verify"}
    for key in ("verdict", "failed", "cache", "counterexamples"):
        assert first[key] == again[key], key
    assert all(first["verified"].values())


def test_a_seed_searches_the_same_whatever_local_modules_a_process_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hypothesis draws some values from the constants of every local module loaded so far.
    The searches must not: a command-line run, a test session and a benchmark load different
    modules, and one seed would answer three ways."""
    first = _report("tests.zoo.forms:keep_last_messages", "single", 1)  # maybe another worker's
    many = "\n".join(f"N{i} = {i}" for i in range(1000))  # small ones: indices, counts
    (tmp_path / "ctxkit_constants_here.py").write_text(many + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("ctxkit_constants_here")
    again = _report("tests.zoo.forms:keep_last_messages", "single", 3)
    for key in ("verdict", "failed", "counterexamples"):
        assert first[key] == again[key], key


@pytest.mark.parametrize(
    "target",
    [
        pytest.param(  # fails three properties; three runs of it: its group goes first
            "tests.zoo.forms:keep_last_messages", marks=pytest.mark.long
        ),
        "tests.zoo.pairs:SplitsPairsOpenAI",
        "tests.zoo.unusual:InsertsSummary",  # correct but unusual: passes
    ],
)
def test_every_schedule_gives_the_same_verdicts(target: str):
    single, overlap, serial = (_report(target, s, 1) for s in ("single", "overlap", "serial"))
    assert single["verdict"] == overlap["verdict"] == serial["verdict"]
    assert single["required"] == overlap["required"] == serial["required"]
    assert overlap["failed"] == serial["failed"]  # the same searches
    assert single["cache"] == overlap["cache"] == serial["cache"]  # the same loop anywhere
    assert serial["phases"]["beside"] == []
    # single searches once, failures or not; the others search again after each failure
    assert single["per_search"] == [12]
    if serial["failed"]:
        assert len(serial["per_search"]) > 1


def test_the_command_a_reproducer_cites_repeats_the_split():
    """The answer for a seed depends on --jobs wherever it splits a search (not serial)."""
    assert RunOptions(seed=1, jobs=2).command == "ctxkit conformance --seed 1 --jobs 2"
    overlap = RunOptions(seed=1, schedule="overlap", jobs=2).command
    assert overlap == "ctxkit conformance --seed 1 --schedule overlap --jobs 2"
    serial = RunOptions(seed=1, schedule="serial", jobs=2).command
    assert serial == "ctxkit conformance --seed 1 --schedule serial"


@given(examples=st.integers(0, 2_000), seed=st.integers(0, 2**31), jobs=st.integers(1, 4))
def test_a_long_search_is_split_into_shares_with_seeds_of_their_own(
    examples: int, seed: int, jobs: int
):
    shares = split(examples, seed, jobs)
    assert sum(share.examples for share in shares) == examples
    assert shares[0].seed == seed  # this process's share: the run's own seed
    assert len({share.seed for share in shares}) == len(shares)
    if jobs == 1 or examples < MIN_EXAMPLES:
        assert len(shares) == 1
    else:
        assert len(shares) == jobs
        assert max(s.examples for s in shares) - min(s.examples for s in shares) <= 1


def test_a_share_searched_elsewhere_checks_only_what_it_is_given():
    """What the second process runs: one search of the properties still open, its failures
    made small there, how to verify them sent back (verified by the run that takes them)."""
    options = RunOptions(
        target="tests.zoo.pairs:SplitsPairsOpenAI",
        profile="quick",
        seed=5,
        max_examples=10,
        max_rounds=1,
        only=frozenset({"tool_pair_integrity", "ordering"}),
        stability_steps=0,
        verify=False,
        jobs=1,
        found_by="ctxkit conformance tests.zoo.pairs:SplitsPairsOpenAI --seed 5",
    )
    report = search_elsewhere(run, options, 60.0, time.time() - 100)
    by_id = {p.id: p for p in report.properties}
    assert by_id["tool_pair_integrity"].status == "failed"
    assert by_id["ordering"].status == "passed"
    assert all(p.status == "skipped" for p in report.properties if p.id not in options.only)
    failed = by_id["tool_pair_integrity"]
    assert failed.verified is None  # verified by the run that takes it
    assert "--seed 5" in failed.reproducer  # cites the command the user ran
    assert failed.time_to_failure_s >= 100  # counted from the caller's start
    assert report.checks["tool_pair_integrity"]["kind"] == "tool_pairs"
    assert report.checks["tool_pair_integrity"]["calls"] == failed.counterexample["calls"]


def test_a_split_search_gives_the_verdicts_of_one_process():
    said: list[str] = []
    runs = {
        jobs: run(
            RunOptions(
                target="tests.zoo.forms:keep_last_messages",
                profile="quick",
                max_examples=MIN_EXAMPLES,
                seed=3,
                timeout=5.0,
                stability_steps=0,
                jobs=jobs,
            ),
            progress=said.append if jobs == 2 else None,
        )
        for jobs in (1, 2)
    }
    failed = {
        jobs: sorted(p.id for p in report.properties if p.status == "failed")
        for jobs, report in runs.items()
    }
    assert failed[1] == failed[2]
    assert failed[2]
    assert runs[1].verdict == runs[2].verdict == "fail"
    assert runs[2].depth["jobs"] == 2
    assert runs[1].depth["jobs"] == 1
    assert any("(20 here, 20 in 1 more process(es))" in line for line in said)
    assert all(p.verified for p in runs[2].properties if p.status == "failed")
