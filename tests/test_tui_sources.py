"""The inspector's sources, run on a thread as the screen runs them: follow, replay, demo."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ctxkit import events
from ctxkit.demo import DemoOptions
from ctxkit.tui.model import Inspector
from ctxkit.tui.sources import DemoSource, FollowSource, ReplaySource


def view_line(tokens: int, ts: float) -> str:
    data = {"message_count": 1, "token_count": tokens, "budget": 10_000, "conversation_id": "c"}
    return json.dumps({"v": 1, "ts": ts, "event": events.VIEW, "data": data}) + "\n"


def recording(path: Path, timestamps: list[float]) -> Path:
    path.write_text("".join(view_line(100 + n, ts) for n, ts in enumerate(timestamps)))
    return path


@contextmanager
def running(source: object, inspector: Inspector) -> Iterator[threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=source.run, args=(inspector, stop), daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(10)
        assert not thread.is_alive(), "the source did not stop when asked"


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_replay_at_speed_zero_reads_everything_at_once(tmp_path: Path) -> None:
    path = recording(tmp_path / "r.jsonl", [0.0, 3600.0, 7200.0])
    inspector = Inspector()
    source = ReplaySource(path, speed=0)
    source.run(inspector, threading.Event())
    assert inspector.events == 3
    assert source.finished
    assert "to its end" in inspector.status


def test_replay_keeps_the_recorded_pace_scaled_by_speed(tmp_path: Path) -> None:
    # Four gaps of 0.5 s: 2 s as recorded, 0.5 s at 4x.
    path = recording(tmp_path / "r.jsonl", [0.0, 0.5, 1.0, 1.5, 2.0])
    inspector = Inspector()
    started = time.monotonic()
    ReplaySource(path, speed=4).run(inspector, threading.Event())
    elapsed = time.monotonic() - started
    assert inspector.events == 5
    assert elapsed >= 0.45  # it waited between events, and did not wait the full 2 s
    assert elapsed < 1.9


def test_replay_shortens_long_quiet_stretches(tmp_path: Path) -> None:
    path = recording(tmp_path / "r.jsonl", [0.0, 3600.0])
    inspector = Inspector()
    started = time.monotonic()
    ReplaySource(path, speed=1, max_gap_s=0.2).run(inspector, threading.Event())
    assert time.monotonic() - started < 5
    assert inspector.events == 2


def test_a_paused_replay_holds_and_resumes(tmp_path: Path) -> None:
    path = recording(tmp_path / "r.jsonl", [0.0, 0.3, 0.6])
    inspector = Inspector()
    source = ReplaySource(path, speed=1)
    source.set_paused(True)
    with running(source, inspector) as thread:
        time.sleep(0.8)  # longer than the whole recording
        assert inspector.events <= 1
        assert "paused" in inspector.status
        source.set_paused(False)
        thread.join(5)
        assert inspector.events == 3


def test_replay_speed_steps_and_rejects_nonsense(tmp_path: Path) -> None:
    source = ReplaySource(tmp_path / "r.jsonl", speed=1)
    assert source.faster() == 2.0
    assert source.slower() == 1.0
    assert source.slower() == 0.5
    source.set_speed(50.0)
    assert source.faster() == 0  # as fast as possible is the top step
    assert source.faster() == 0
    assert "as fast as possible" in source.description
    for speed in (-1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="speed"):
            ReplaySource(tmp_path / "r.jsonl", speed=speed)


def test_replay_counts_malformed_lines_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(view_line(1, 0.0) + "{torn\n" + view_line(2, 0.0))
    inspector = Inspector()
    ReplaySource(path, speed=0).run(inspector, threading.Event())
    assert (inspector.events, inspector.skipped) == (2, 1)


def test_follow_waits_for_the_file_then_keeps_up(tmp_path: Path) -> None:
    path = tmp_path / "later" / "events.jsonl"
    inspector = Inspector()
    with running(FollowSource(path), inspector):
        wait_until(lambda: "waiting" in inspector.status)
        path.parent.mkdir()
        with open(path, "a") as file:
            file.write(view_line(1, 1.0))
            file.flush()
            wait_until(lambda: inspector.events == 1)
            file.write(view_line(2, 2.0))
            file.flush()
            wait_until(lambda: inspector.events == 2)
    assert inspector.conversation("c")["tokens"] == 2


def test_follow_read_all_takes_the_file_as_it_is(tmp_path: Path) -> None:
    path = recording(tmp_path / "r.jsonl", [0.0, 1.0])
    inspector = Inspector()
    FollowSource(path).read_all(inspector)
    assert inspector.events == 2


def test_demo_source_runs_the_reference_until_its_turns_are_done() -> None:
    inspector = Inspector()
    source = DemoSource(DemoOptions(duration=math.inf, rate=math.inf, turns=40))
    source.run(inspector, threading.Event())
    assert source.error is None
    (figures,) = inspector.snapshot()["conversations"]
    assert figures["conversation_id"] == "demo-1"
    assert figures["compactions"] >= 1
    assert figures["violations"] == 0
    assert "finished" in inspector.status


@pytest.mark.parametrize(
    "fleet", [{}, {"conversations": 60, "near_limit": 5}], ids=["one", "fleet-starting"]
)
def test_demo_source_stops_promptly_when_asked(fleet: dict[str, int]) -> None:
    inspector = Inspector()
    # Faster than any machine turns: the demo is always behind its pace and never sleeps
    # (a fleet is stopped while every conversation speaks once, before the paced loop).
    source = DemoSource(DemoOptions(duration=math.inf, rate=1_000_000, **fleet))
    with running(source, inspector):
        wait_until(lambda: inspector.events > 10)
    assert source.error is None
