"""Replay candidates that attack the process running them (tests/zoo/replay_hostile.py and
tests/zoo_js/replay_hostile.mjs) are contained as conformance contains a target: each one's
exit, kill, hang or BaseException is that candidate's failure in that conversation, in one
sentence; a well-behaved candidate beside them keeps its exact figures; the report is
written; and the gate fails (exit 1), never green, never ctxkit's own error nor the
candidate's exit code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.processes import interruptible
from tests.schemas import valid
from tests.system import require_binary

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = "tests.zoo.replay_hostile:Hostile"
JS_HOSTILE = "tests/zoo_js/replay_hostile.mjs:Hostile"
CONVERSATIONS = 2
REQUESTS = 3

EITHER = "add_message or get_messages_for_request"
"""Where a process that gave no answer (a hang, a kill) was: one round trip makes both calls
of a model call (the protocol's ``turn``)."""

SAID = {
    "exit0": "the target called sys.exit(0) during get_messages_for_request",
    "exit3": "the target called sys.exit(3) during get_messages_for_request",
    "os_exit": f"the target's process died during {EITHER} (exit code 0)",
    "sigkill": f"during {EITHER} (killed by SIGKILL)",
    "sleep": f"timed out: {EITHER} did not return within 1 s",
    "await": f"timed out: {EITHER} did not return within 1 s",
    "spin": f"timed out: {EITHER} did not return within 1 s",
    "cancelled": "CancelledError",
    "base": "BaseException: a bare BaseException",
    "str": "get_messages_for_request returned a str ('the view, as one string'), not a list of "
    "messages",
    "none": "get_messages_for_request returned None, not a list of messages",
    "exits_five": "the target called sys.exit(5) during get_messages_for_request",
    "js_exit": "the target called process.exit(0) during get_messages_for_request",
    "js_loop": f"timed out: {EITHER} did not return within 1 s",
}
"""What each candidate's conversations end with, at its second request (index 1)."""

STOPPED = {"exit0", "exit3", "os_exit", "sigkill", "sleep", "await", "spin", "exits_five"}
STOPPED |= {"js_exit", "js_loop"}
"""The candidates whose process ended (the others raised, or answered what is no view)."""

UNHARMED = ("prints", "closes_stdout")
"""Candidates whose attack is on their own output: contained, they replay as the good one."""


def _recording(folder: Path) -> Path:
    """``CONVERSATIONS`` conversations of ``REQUESTS`` requests, plain request bodies."""
    lines = []
    for c in range(CONVERSATIONS):
        messages: list[dict[str, Any]] = [{"role": "system", "content": "You help."}]
        for turn in range(REQUESTS):
            messages.append({"role": "user", "content": f"question {turn} of conversation {c}"})
            body = {"model": "gpt-4o", "messages": list(messages)}
            body["metadata"] = {"conversation_id": f"c{c}"}
            lines.append(json.dumps({"timestamp": 1_770_000_000_000_000_000 + turn, "body": body}))
            messages.append({"role": "assistant", "content": f"answer {turn}"})
    path = folder / "bodies.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _replay(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxkit", "replay", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )


def _candidates() -> list[str]:
    args = ["--manager", "good=tests.replay_managers:everything"]
    for how in [*SAID, *UNHARMED, "raises", "close_exit"]:
        if how == "exits_five":
            args += ["--manager", "exits_five=tests.zoo.replay_hostile:exits_five"]
        elif how.startswith("js_"):
            args += ["--manager", f"{how}={JS_HOSTILE}", "--config", json.dumps({"how": how[3:]})]
        else:
            args += ["--manager", f"{how}={HOSTILE}", "--config", json.dumps({"how": how})]
    return args


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """One replay through every hostile candidate at once, and the good one."""
    require_binary("node")
    folder = tmp_path_factory.mktemp("hostile")
    report = folder / "report.json"
    done = _replay(
        str(_recording(folder)), *_candidates(), "--timeout", "1", "--report-json", str(report)
    )
    assert report.exists(), done.stdout + done.stderr
    return done, json.loads(report.read_text())


def _manager(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(m for m in report["managers"] if m["name"] == name)


def test_the_gate_fails_and_the_report_is_written(hostile_run):
    done, report = hostile_run
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    valid("replay-report", report)
    assert "FAIL good" not in done.stdout


@pytest.mark.parametrize("how", list(SAID))
def test_each_hostile_candidate_stops_in_each_conversation_with_its_sentence(hostile_run, how):
    done, report = hostile_run
    manager = _manager(report, how)
    for conversation in manager["conversations"]:
        assert conversation["error"].startswith("request 1: "), conversation["error"]
        assert SAID[how] in conversation["error"], conversation["error"]
        assert conversation["stopped"] is (how in STOPPED)
        assert conversation["requests"] == 1  # its figures are up to where it struck
    verb = "stopped" if how in STOPPED else "failed"
    assert f"FAIL {how}: {verb} in {CONVERSATIONS} of {CONVERSATIONS} conversation(s)" in (
        done.stdout
    )


def test_a_candidate_that_raised_everywhere_checked_nothing_and_fails_the_gate(hostile_run):
    done, report = hostile_run
    raises = _manager(report, "raises")
    assert raises["totals"]["requests"] == 0
    assert raises["totals"]["errors"] == CONVERSATIONS
    assert f"FAIL raises: failed in {CONVERSATIONS} of {CONVERSATIONS}" in done.stdout


def test_a_close_that_exits_costs_the_conversation_after_it(hostile_run):
    _, report = hostile_run
    first, *later = _manager(report, "close_exit")["conversations"]
    assert not first["error"]
    assert first["requests"] == REQUESTS
    for conversation in later:
        assert "called sys.exit(7)" in conversation["error"], conversation["error"]


@pytest.mark.parametrize("name", ["good", *UNHARMED])
def test_the_others_keep_the_figures_of_the_recording(hostile_run, name):
    done, report = hostile_run
    recorded, figures = _manager(report, "recorded")["totals"], _manager(report, name)["totals"]
    assert figures["errors"] == 0
    for key in ("requests", "tokens_sent", "billed_tokens", "prefix_kept"):
        assert figures[key] == recorded[key], key
    assert len(done.stdout) < 50_000  # 4 MB a call printed, none of it in the table


def test_memory_past_the_cap_is_that_candidates_stop(tmp_path):
    report = tmp_path / "report.json"
    done = _replay(
        str(_recording(tmp_path)),
        "--manager",
        "good=tests.replay_managers:everything",
        "--manager",
        f"leaks={HOSTILE}",
        "--config",
        '{"how": "leaks"}',
        "--memory-limit",
        "256M",
        "--report-json",
        str(report),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    leaks = _manager(json.loads(report.read_text()), "leaks")
    said = [c["error"] for c in leaks["conversations"] if c["error"]]
    assert said
    assert all("exceeded the memory limit (256 MiB)" in s for s in said), said
    assert _manager(json.loads(report.read_text()), "good")["totals"]["errors"] == 0


def test_with_jobs_an_exiting_candidate_is_the_same_sentence_not_a_broken_pool(tmp_path):
    report = tmp_path / "report.json"
    done = _replay(
        str(_recording(tmp_path)),
        "--manager",
        f"os_exit={HOSTILE}",
        "--config",
        '{"how": "os_exit"}',
        "--jobs",
        "2",
        "--report-json",
        str(report),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "BrokenProcessPool" not in done.stdout + done.stderr
    conversations = _manager(json.loads(report.read_text()), "os_exit")["conversations"]
    errors = [c["error"] for c in conversations]
    assert errors == [f"request 1: {SAID['os_exit']}"] * CONVERSATIONS


def test_one_interrupt_stops_a_replay_held_in_a_hang_and_leaves_no_process(tmp_path):
    marker = f"ctxkit-hang-{os.getpid()}-{time.monotonic_ns()}"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ctxkit",
            "replay",
            str(_recording(tmp_path)),
            "--manager",
            f"sleep={HOSTILE}",
            "--config",
            '{"how": "sleep"}',
            "--timeout",
            "600",
        ],
        cwd=ROOT,
        env=dict(os.environ, CTXKIT_TEST_MARKER=marker),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    try:
        waited = time.monotonic() + 120
        while not _workers_with(marker) and time.monotonic() < waited and process.poll() is None:
            time.sleep(0.2)  # a loaded machine takes a while to start the candidate's worker
        assert _workers_with(marker), "the candidate's worker never started"
        time.sleep(2)  # its first view answered, its second held in the sleep
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)  # the hang would hold it 600 s
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert "Traceback" not in err
    time.sleep(0.5)
    assert not _processes_with(marker)


def _workers_with(marker: str) -> list[int]:
    """The candidate workers among :func:`_processes_with`."""
    found = []
    for pid in _processes_with(marker):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"ctxkit.conformance.worker" in command:
            found.append(pid)
    return found


def _processes_with(marker: str) -> list[int]:
    """Processes whose environment holds ``marker``: the replay and what it started."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if marker.encode() in environ:
                found.append(int(entry.name))
    return found
