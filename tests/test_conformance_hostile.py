"""Hostile and noisy targets (tests/zoo/hostile.py) end to end: each gets a verdict with a clear
reason and exit status 0 or 1 (never 3, an internal error), and nothing of it outlives ctxkit,
however ctxkit ends."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from ctxkit.cli import main
from ctxkit.conformance.child import Child, TargetUnusable
from ctxkit.conformance.runner import RunOptions, run
from tests.processes import alive, cpu_seconds, left_after, marked, start_conformance

# The hostile targets speak Chat Completions and Anthropic messages.
FAST = ["--format", "openai,anthropic", "--profile", "quick", "--max-examples", "5", "--seed", "2"]
FAST += ["--timeout", "5"]


def check(name: str, *args: str, marker: str) -> subprocess.CompletedProcess[str]:
    """``ctxkit conformance tests.zoo.hostile:NAME`` with the fast options; asserts it ends
    with a verdict (0 or 1), not an internal error, and leaves nothing running."""
    process = start_conformance(f"tests.zoo.hostile:{name}", *FAST, *args, marker=marker)
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
    assert "timed out: get_messages_for_request did not return within 2 s (it printed " in reason
    assert "meanwhile)" in reason
    assert time.monotonic() - started < 30  # 2 s, repeated with 6 s, then 2 s twice


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


# -- ctxkit itself ended ----------------------------------------------------------------------


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
    with pytest.raises(SystemExit):
        main(["conformance", "--help"])
    out = capsys.readouterr().out
    for fragment in ("--memory-limit SIZE", "containment:", "4G by default", "0 or none"):
        assert fragment in out


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


def test_a_hanging_constructor_gets_the_timeout_not_the_import_allowance():
    started = time.monotonic()
    report = run(RunOptions(target="tests.zoo.hostile:HangsWhenBuilt", timeout=1.0))
    assert time.monotonic() - started < 10
    assert report.verdict == "error"
    (lifecycle,) = [p for p in report.properties if p.status == "error"]
    assert lifecycle.message == "timed out: building the manager did not return within 1 s"
    assert all(
        p.message == "not checked: no manager could be built"
        for p in report.properties
        if p.id != "lifecycle"
    )
