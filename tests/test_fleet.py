"""``ctxkit demo --processes N``: how conversations are shared out, the configuration written,
and the mistakes refused before any process starts. (A real fleet under a real Prometheus
is tests/test_prometheus_server.py.)"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxkit.cli.errors import EXIT_INTERRUPTED
from ctxkit.fleet import budget_mix, plan, prometheus_config
from tests.ports import free_ports
from tests.processes import kill_marked, left_after, marked, marked_environment, new_marker


@given(
    conversations=st.integers(1, 2_000),
    processes=st.integers(1, 16),
    near=st.integers(0, 2_000),
    port=st.none() | st.integers(1_024, 60_000),
)
def test_every_conversation_goes_to_exactly_one_process(conversations, processes, near, port):
    if conversations < processes:
        return
    near = min(near, conversations)
    members = plan(conversations, processes, near, port)
    assert sum(m.conversations for m in members) == conversations
    assert sum(m.near_limit for m in members) == near
    numbers = [m.first_conversation + i for m in members for i in range(m.conversations)]
    assert numbers == list(range(1, conversations + 1))  # contiguous blocks, in order
    assert max(m.conversations for m in members) - min(m.conversations for m in members) <= 1
    for member in members:  # near-limit conversations are the first ones of the fleet
        assert member.near_limit <= member.conversations
        if member.near_limit:
            assert member.first_conversation + member.near_limit - 1 <= near
    expected = [None] * processes if port is None else list(range(port, port + processes))
    assert [m.port for m in members] == expected


def test_the_configuration_scrapes_every_process():
    text = prometheus_config("127.0.0.1", [9464, 9465, 9466])
    assert 'targets: ["127.0.0.1:9464", "127.0.0.1:9465", "127.0.0.1:9466"]' in text
    assert "job_name: ctxkit-demo" in text
    assert budget_mix(20_000) == (20_000, 30_000, 40_000, 60_000)


def demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxkit", "demo", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--processes", "0"], "--processes must be 1-64"),
        (["--processes", "3", "--conversations", "2"], "must be at least --processes (3)"),
        (["--processes", "2", "--conversations", "4", "--metrics-port", "0"], "serve P to P+1"),
        (["--processes", "2", "--conversations", "4", "--prometheus-config", "p.yml"], "needs"),
        (["--processes", "2", "--conversations", "4", "--events", "e.jsonl"], "--events"),
        (["--processes", "2", "--conversations", "4", "--near-limit", "5"], "--near-limit"),
        (["--processes", "2", "--conversations", "2001"], "per process"),
        (["--near-limit", "1", "--manager", "ctxkit.reference:mount"], "leave out --manager"),
    ],
)
def test_fleet_mistakes_are_refused_before_any_process_starts(args, words, tmp_path: Path):
    done = demo(*args, "--duration", "1")
    assert done.returncode == 2, done.stdout + done.stderr
    assert words in done.stderr
    assert "Traceback" not in done.stderr
    assert "[process" not in done.stdout


def test_a_small_fleet_runs_and_reports_each_process(tmp_path: Path):
    config = tmp_path / "prometheus.yml"
    port = free_ports(2)
    done = demo(
        "--processes", "2", "--conversations", "5", "--near-limit", "1", "--duration", "1",
        "--metrics-port", str(port), "--prometheus-config", str(config),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "[process 0] ran" in done.stdout
    assert "[process 1] ran" in done.stdout
    assert "3 conversations" in done.stdout  # 5 shared as 3 and 2
    shown = f"2 processes, 5 conversations (1 near their limit) on 127.0.0.1:{port}-{port + 1}"
    assert shown in done.stderr
    assert f'"127.0.0.1:{port + 1}"' in config.read_text()


@pytest.mark.parametrize("seen", [2, 3])
def test_stopping_the_fleet_with_sigterm_stops_every_process_of_it(seen: int):
    """``terminate()`` of the fleet (a test's teardown, a CI timeout) must not leave its demos
    running out their ``--duration``: they did, 100 s of CPU after the run was stopped. Sent
    while the second process is being started (``seen`` 2) or once both run (3), a few
    times: a stop that lands between a fork and the list of processes left one running."""
    for _ in range(3):
        marker = new_marker()
        fleet = subprocess.Popen(
            [sys.executable, "-m", "ctxkit", "demo", "--processes", "2", "--conversations", "4",
             "--duration", "60", "--rate", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=marked_environment(marker),
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while len(marked(marker)) < seen and time.monotonic() < deadline:
                time.sleep(0.002)
            assert len(marked(marker)) >= seen, "the fleet did not start its processes"
            fleet.terminate()
            _, stderr = fleet.communicate(timeout=30)
            assert left_after(marker, 10) == []
            assert fleet.returncode == EXIT_INTERRUPTED, stderr
            assert "interrupted" in stderr
            assert "Traceback" not in stderr
        finally:
            fleet.kill()
            kill_marked(marker)
