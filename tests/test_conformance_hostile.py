"""Hostile and noisy targets (tests/zoo/hostile.py) end to end: each gets a verdict with a clear
reason and exit status 0 or 1 (never 3, an internal error), and nothing of it outlives ctxkit,
however ctxkit ends."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest

from ctxkit.cli import main
from ctxkit.conformance.runner import LOAD_TIMEOUT, RunOptions, _Worker, run
from ctxkit.conformance.targets.worker_client import CLOSE_GRACE_S, Child, TargetUnusable
from tests.processes import (
    ROOT,
    alive,
    cpu_seconds,
    left_after,
    marked,
    marked_environment,
    start_conformance,
)
from tests.zoo.slow_import import IMPORT_SECONDS_VARIABLE

# The hostile targets speak Chat Completions and Anthropic messages.
FAST = ["--shapes", "openai,anthropic", "--profile", "quick", "--max-examples", "5", "--seed", "2"]
FAST += ["--timeout", "5", "--shrink-seconds", "3"]


def check(
    name: str, *args: str, marker: str, module: str = "tests.zoo.hostile"
) -> subprocess.CompletedProcess[str]:
    """``ctxkit conformance tests.zoo.hostile:NAME`` with the fast options; asserts it ends
    with a verdict (0 or 1), not an internal error, and leaves nothing running."""
    process = start_conformance(f"{module}:{name}", *FAST, *args, marker=marker)
    stdout, stderr = process.communicate(timeout=120)
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    assert done.returncode in (0, 1), stdout + stderr
    assert "internal error" not in stderr
    assert "Traceback" not in stderr
    assert not left_after(marker, 3.0), "processes outlived the run"
    return done


def lifecycle_reason(done: subprocess.CompletedProcess[str]) -> str:
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("lifecycle error: ")]
    return line


# -- noise ----------------------------------------------------------------------------------


def test_json_looking_prints_of_a_correct_target_are_not_answers(marker):
    done = check("PrintsJsonLines", marker=marker)
    assert done.returncode == 0
    assert "PASS: every required property holds" in done.stdout


def test_prints_do_not_hide_a_split_pair(marker):
    done = check("SplitsPairsAndPrints", marker=marker)
    assert done.returncode == 1
    assert "tool_pair_integrity failed: view[" in done.stdout


def test_garbage_in_the_protocol_channel_is_named_as_such(marker):
    done = check("WritesIntoProtocol", marker=marker)
    assert done.returncode == 1
    assert lifecycle_reason(done).startswith(
        "lifecycle error: the target wrote into the protocol channel: "
        "b'GARBAGE from the target\\n' (during get_messages_for_request)"
    )


def test_output_without_end_is_a_timeout_that_says_how_much_was_printed(marker):
    started = time.monotonic()
    done = check("PrintsForever", "--timeout", "2", marker=marker)
    assert done.returncode == 1
    reason = lifecycle_reason(done)
    assert re.search(
        r"timed out: get_messages_for_request did not return within 2 s"
        r"(, nor within 6 s when given longer)? \(it printed .+ meanwhile\)",
        reason,
    ), reason
    assert time.monotonic() - started < 30  # 6 s (a grace after the first 2 s), then 2 s twice


# -- hostile ----------------------------------------------------------------------------------


def test_children_and_a_double_forked_daemon_end_with_the_run(marker, tmp_path):
    record = tmp_path / "pids"
    done = check("SpawnsChildren", "--config", f'{{"record": "{record}"}}', marker=marker)
    assert done.returncode == 0, done.stdout
    started = record.read_text().split()
    assert len(started) >= 5, "the target should have started a daemon and children"


def test_a_view_that_is_not_a_list_gets_a_verdict(marker):
    done = check("ReturnsFortyTwo", marker=marker)
    assert done.returncode == 1


def test_closing_fd_0_costs_nothing(marker):
    done = check("ClosesStdin", marker=marker)
    assert done.returncode == 1
    assert "tool_pair_integrity failed: view[" in done.stdout


def test_unbounded_memory_exceeds_the_memory_limit_not_the_timeout(marker):
    started = time.monotonic()
    done = check("EatsMemory", "--memory-limit", "512M", marker=marker)
    assert done.returncode == 1
    assert lifecycle_reason(done).startswith(
        "lifecycle error: the target exceeded the memory limit (512 MiB) during "
        "get_messages_for_request"
    )
    assert time.monotonic() - started < 30


# -- what a target leaves behind, how long it loads, how it dies ------------------------------


def test_a_stubborn_target_costs_no_more_time_than_a_well_behaved_one(marker):
    """A target that ignores SIGTERM and leaves a non-daemon thread running (Stubborn) once
    held every worker's end, and its reproducer's check, until they were killed: a quick run
    of 10 s took minutes. The same pair-splitting manager with and without the stubbornness,
    the same options: the stubborn one takes at most twice as long."""
    started = time.monotonic()
    plain = check("SplitsPairsOpenAI", marker=marker, module="tests.zoo.pairs")
    plain_s = time.monotonic() - started
    started = time.monotonic()
    stubborn = check("StubbornSplitsPairs", marker=marker)
    stubborn_s = time.monotonic() - started
    for done in (plain, stubborn):
        assert done.returncode == 1
        assert "tool_pair_integrity failed: view[" in done.stdout
        assert "(verified: the script fails" in done.stdout
    assert stubborn_s <= 2 * plain_s, (stubborn_s, plain_s)


def test_a_worker_leaves_without_waiting_for_what_the_target_left_running():
    with loaded("Stubborn") as child:
        assert child.call("view", token_budget=1000).ok
        pid = child.pid
        started = time.monotonic()
        child.close()
        took = time.monotonic() - started
    assert took < CLOSE_GRACE_S / 2, took  # it left by itself: the grace was not waited out
    assert not alive(pid)


def slow_import(
    seconds: float, *args: str, marker: str, tmp_path: Path
) -> tuple[subprocess.CompletedProcess[str], float, dict]:
    """``ctxkit conformance tests.zoo.slow_import:SlowToImport`` whose import takes
    ``seconds``, with a JSON and a JUnit report: (the run, its wall time, the JSON report)."""
    env = dict(marked_environment(marker), **{IMPORT_SECONDS_VARIABLE: str(seconds)})
    report = tmp_path / "report.json"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ctxkit", "conformance", "tests.zoo.slow_import:SlowToImport",
         *FAST, *args, "--report-json", str(report), "--junit", str(tmp_path / "junit.xml")],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120, check=False,
    )  # fmt: skip
    took = time.monotonic() - started
    assert "Traceback" not in done.stderr
    assert not left_after(marker, 3.0), "processes outlived the run"
    return done, took, json.loads(report.read_text())


def test_a_load_past_the_load_timeout_writes_an_error_report(marker, tmp_path):
    done, took, report = slow_import(30, "--load-timeout", "3", marker=marker, tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr
    assert took < 30, took  # it did not wait for the import (a loaded machine starts slowly)
    reason = (
        "tests.zoo.slow_import:SlowToImport: loading the target did not return within 3 s "
        "(--load-timeout); give it more with --load-timeout SECONDS"
    )
    assert f"ctxkit: cannot check: {reason}" in done.stderr
    assert report["verdict"] == "error"
    lifecycle = next(p for p in report["properties"] if p["id"] == "lifecycle")
    assert (lifecycle["status"], lifecycle["message"]) == ("error", reason)
    junit = ElementTree.parse(tmp_path / "junit.xml").getroot()
    assert junit.get("errors") == "1"
    assert junit.find("testcase[@name='lifecycle']/error").get("message") == reason


def test_loading_counts_against_the_deadline_and_the_target_is_still_judged(marker, tmp_path):
    """No --load-timeout: loading may take the rest of the deadline (no fixed 60 s), and the
    run still ends by its deadline, with its verdict and report."""
    done, took, report = slow_import(5, "--deadline", "15", marker=marker, tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS: every required property holds" in done.stdout
    assert report["verdict"] == "pass"
    assert report["duration_s"] >= 5  # the load is part of the run
    assert report["duration_s"] < 15 + 2, report["duration_s"]  # the run keeps its deadline
    # and the process ends with it; its own start (Python, the imports) comes before the run's
    # clock does (the whole took 20.4 s once, on a slow machine busy with a test run)
    assert took < 15 + 10, (took, report["duration_s"])


def test_the_load_allowance_is_the_load_timeout_else_the_rest_of_the_deadline():
    def allowance(deadline_in: float, **options: object) -> float:
        worker = _Worker(RunOptions(**options), time.monotonic() + deadline_in)  # type: ignore[arg-type]
        return worker._allowance()

    assert allowance(300) == pytest.approx(300, abs=1)  # no fixed 60 s: a 90 s import loads
    assert allowance(300, load_timeout=3) == 3
    assert allowance(2, load_timeout=30) == pytest.approx(2, abs=0.5)  # never past the deadline
    assert allowance(float("inf")) == LOAD_TIMEOUT


def test_a_deterministic_crash_is_a_finding_with_a_reproducer_that_crashes_the_same_way(
    marker, tmp_path
):
    folder = tmp_path / "repro"
    report_path = tmp_path / "report.json"
    done = check(
        "CrashesOnSecondView", "--reproducers", str(folder), "--report-json", str(report_path),
        marker=marker,
    )  # fmt: skip
    assert done.returncode == 1
    report = json.loads(report_path.read_text())
    assert report["verdict"] == "error"
    (finding,) = [p for p in report["properties"] if p["reproducer"]]
    assert finding["status"] == "error"
    assert "killed by SIGSEGV" in finding["message"]
    steps = finding["counterexample"]["steps"]
    assert len(steps) == 3, steps  # the two views, nothing else, then the crash
    assert all("get_messages_for_request(" in step for step in steps[:2])
    assert finding["verified"], finding["verification"]
    assert "ends the same way (killed by SIGSEGV)" in finding["verification"]
    (script,) = folder.iterdir()
    assert script.name == f"test_{finding['id']}_tests_zoo_hostile_CrashesOnSecondView.py"
    env = marked_environment(marker)
    as_script = subprocess.run(
        [sys.executable, str(script)], capture_output=True, cwd=tmp_path, env=env, timeout=60
    )
    assert as_script.returncode == -signal.SIGSEGV
    under_pytest = subprocess.run(
        [sys.executable, "-m", "pytest", str(folder), "-p", "no:cacheprovider"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert under_pytest.returncode == 1, under_pytest.stdout  # a failed test, not a dead pytest
    assert "1 failed" in under_pytest.stdout
    assert "the calls end the process (killed by SIGSEGV)" in under_pytest.stdout


# -- ctxkit itself ended ----------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_writes_the_report_it_was_asked_for(marker, tmp_path, signum):
    report = tmp_path / "report.json"
    process = start_conformance(
        "tests.zoo.hostile:Spins", *FAST[:-1], "60", "--report-json", str(report), marker=marker
    )
    try:
        _spinning_worker(marker)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert "ctxkit: interrupted" in stderr
    written = json.loads(report.read_text())
    assert written["verdict"] == "error"
    lifecycle = next(p for p in written["properties"] if p["id"] == "lifecycle")
    assert lifecycle["message"] == "interrupted before the run ended"
    assert not left_after(marker, 3.0)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_ending_ctxkit_ends_a_spinning_worker(marker, signum):
    process = start_conformance("tests.zoo.hostile:Spins", *FAST[:-1], "60", marker=marker)
    try:
        worker = _spinning_worker(marker)
        process.send_signal(signum)
        process.wait(5)
        assert not left_after(marker, 3.0), f"worker {worker} outlived ctxkit"
    finally:
        process.kill()
        process.communicate()


def _spinning_worker(marker: str) -> int:
    """The worker's pid, once it has spun for half a second of CPU."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for pid in marked(marker):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    is_worker = b"ctxkit.conformance.worker" in cmdline.read()
                if is_worker and cpu_seconds(pid) > 0.5:
                    return pid
            except OSError:
                continue
        time.sleep(0.05)
    raise AssertionError("no worker started spinning")


# -- the option -----------------------------------------------------------------------------


def test_help_explains_containment_and_the_memory_limit(capsys):
    assert main(["help", "conformance", "containment"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for fragment in ("--memory-limit SIZE", "supervisor", "4G by default", "0 or none"):
        assert fragment in out
    assert main(["help", "conformance", "options"]) == 0
    assert "--memory-limit SIZE" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("lots", "not a size: 'lots'"), ("1M", "too little to start Python")],
)
def test_a_bad_memory_limit_is_bad_usage(capsys, value, fragment):
    with pytest.raises(SystemExit) as exited:
        main(["conformance", "--memory-limit", value])
    assert exited.value.code == 2
    assert fragment in capsys.readouterr().err


# -- the parent's side, directly --------------------------------------------------------------


def loaded(name: str, **options: object) -> Child:
    child = Child(timeout=5, **options)  # type: ignore[arg-type]
    assert child.hello(f"tests.zoo.hostile:{name}").ok
    assert child.call("reset").ok
    return child


def test_a_view_that_is_not_a_list_reaches_the_parent_as_data():
    with loaded("ReturnsFortyTwo") as child:
        reply = child.call("view", token_budget=1000)
        assert (reply.ok, reply.value) == (True, 42)
        assert child.call("view", token_budget=1000, edit_after=True).value == 42


def test_garbage_raises_target_unusable_of_kind_protocol():
    with loaded("WritesIntoProtocol") as child:
        with pytest.raises(TargetUnusable) as caught:
            child.call("view", token_budget=1000)
        assert caught.value.kind == "protocol"
        assert not child.alive


def test_garbage_in_the_requests_is_named_by_the_worker():
    with loaded("WritesIntoRequests") as child:
        assert child.call("view", token_budget=1000).ok
        with pytest.raises(TargetUnusable) as caught:
            child.call("get")
        assert caught.value.kind == "protocol"
        assert caught.value.message == (
            "the target wrote into the protocol channel: b'GARBAGE from the target\\n' "
            "(during get_messages)"
        )


@pytest.mark.parametrize(
    ("name", "limit", "shown"),
    [
        ("EatsMemory", 256 << 20, "256 MiB"),  # a MemoryError
        ("AbortsOnAllocation", 1 << 30, "1 GiB"),  # a native allocator's abort, not a crash
    ],
)
def test_running_out_of_memory_raises_target_unusable_of_kind_memory(name, limit, shown):
    with loaded(name, memory_limit=limit) as child:
        with pytest.raises(TargetUnusable) as caught:
            child.call("view", token_budget=1000)
        assert caught.value.kind == "memory"
        assert caught.value.message == (
            f"the target exceeded the memory limit ({shown}) during get_messages_for_request"
        )


def test_restart_ends_the_old_worker_and_starts_a_fresh_one():
    with loaded("ReturnsFortyTwo") as child:
        old = child.pid
        child.restart()
        assert child.pid != old
        assert not alive(old)
        assert child.hello("tests.zoo.base:GoodManager").ok


def test_a_call_after_the_worker_ended_is_an_ended_stop_not_a_crash_of_ctxkit():
    """Hypothesis replays an example after a call stopped the worker (under load, a timeout
    while shrinking): the replay must reach the runner as a stop of kind ``ended``, which it
    charges to no property, not as an error of ctxkit's own (found under a loaded machine)."""
    with loaded("ReturnsFortyTwo") as child:
        child.close()
        with pytest.raises(TargetUnusable) as caught:
            child.call("reset")
        assert caught.value.kind == "ended"
        assert caught.value.op == "reset"


def test_a_hanging_constructor_gets_the_timeout_not_the_import_allowance():
    started = time.monotonic()
    report = run(RunOptions(target="tests.zoo.hostile:HangsWhenBuilt", timeout=1.0))
    assert time.monotonic() - started < 10
    assert report.verdict == "error"
    (lifecycle,) = [p for p in report.properties if p.status == "error"]
    assert lifecycle.message == (
        "timed out: building the manager did not return within 1 s, nor within 3 s when given "
        "longer"
    )
    assert all(
        p.message == "not checked: no manager could be built"
        for p in report.properties
        if p.id != "lifecycle"
    )


def test_the_bytes_each_call_exchanges_are_counted():
    """The minimizer's work is the bytes it exchanges with the target (``Child.moved``): a
    call passing a 10,000-character message counts it going, a view holding it coming back,
    the same on every run."""
    text = "x" * 10_000
    with Child(timeout=5) as child:
        assert child.hello("tests.zoo.base:GoodManager").ok
        assert child.call("reset").ok
        before = child.moved
        assert child.call("add", message={"role": "user", "content": text}).ok
        added, before = child.moved - before, child.moved
        assert child.call("view", token_budget=100_000).value[0]["content"] == text
        viewed, before = child.moved - before, child.moved
        assert child.call("clear").ok
        cleared = child.moved - before
    assert len(text) < added < len(text) + 300
    assert len(text) < viewed < len(text) + 300
    assert cleared < 200
