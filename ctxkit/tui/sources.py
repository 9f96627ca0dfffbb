"""Where ``ctxkit inspect`` gets its events: a followed file, a replayed file, or the demo.

A source's :meth:`~Source.run` blocks on a worker thread, feeding an
:class:`~ctxkit.tui.model.Inspector` until ``stop`` is set or the source ends. The screen never
waits for a source: it reads the inspector's snapshot on its own clock. Sources know nothing of
Textual, so ``--json`` and the tests use them as they are.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from pathlib import Path
from typing import Protocol

from ctxkit.events import Event
from ctxkit.tui.follow import FileFollower, follow
from ctxkit.tui.model import BadEvent, Inspector, Parsed, parse_line
from ctxkit.wording import plural

__all__ = ["DemoSource", "FollowSource", "ReplaySource", "Source"]

POLL_INTERVAL_S = 0.05
"""How often a followed file is looked at when it has nothing new."""
BATCH_LINES = 500
"""Lines fed at once: a backlog is read in batches the screen's snapshots can come between."""


class Source(Protocol):
    """Feeds an inspector. ``pausable``/``speed`` say what the screen may offer."""

    description: str
    pausable: bool

    def run(self, inspector: Inspector, stop: threading.Event) -> None:
        """Feed ``inspector`` until ``stop`` is set or the source is exhausted."""
        ...

    def set_paused(self, paused: bool) -> None:
        """Hold the source where it is (a replay); a live source keeps reading."""
        ...


class FollowSource:
    """The stream another process is writing: waits for the file, survives truncation and
    rotation, and keeps reading everything (pausing the screen never loses events)."""

    pausable = False

    def __init__(self, path: str | os.PathLike[str], *, from_start: bool = True) -> None:
        self.path = Path(path)
        self.from_start = from_start
        self.description = f"following {self.path}"

    def run(self, inspector: Inspector, stop: threading.Event) -> None:
        def feed(lines: list[bytes]) -> None:
            for start in range(0, len(lines), BATCH_LINES):
                inspector.feed_lines(lines[start : start + BATCH_LINES])

        def show(follower: FileFollower) -> None:
            inspector.set_status(_follow_status(follower))

        follow(
            self.path,
            stop,
            feed,
            interval=POLL_INTERVAL_S,
            from_start=self.from_start,
            on_poll=show,
        )

    def set_paused(self, paused: bool) -> None:
        """A followed file is always read; pausing holds the screen only."""

    def read_all(self, inspector: Inspector) -> None:
        """Everything the file holds now (``--json``): no waiting, no following."""
        _read_file(self.path, inspector)


def _follow_status(follower: FileFollower) -> str:
    overlong = follower.overlong
    status = follower.status
    return f"{status}; {plural(overlong, 'overlong line')} skipped" if overlong else status


def _read_file(path: Path, inspector: Inspector) -> None:
    with open(path, "rb") as file:
        batch: list[bytes] = []
        for line in file:
            batch.append(line)
            if len(batch) >= BATCH_LINES:
                inspector.feed_lines(batch)
                batch = []
        inspector.feed_lines(batch)


class ReplaySource:
    """A recorded stream, replayed at ``speed`` times the pace it was written (0: at once).

    Quiet stretches longer than :attr:`max_gap_s` (after scaling) are shortened to it, so an
    agent that idled for an hour does not make the replay idle too.
    """

    pausable = True
    SPEEDS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 50.0, 0.0)
    """Speeds offered by :meth:`faster` and :meth:`slower`; 0 means as fast as possible."""

    def __init__(
        self, path: str | os.PathLike[str], *, speed: float = 1.0, max_gap_s: float = 2.0
    ) -> None:
        if not (speed == 0 or (math.isfinite(speed) and speed > 0)):
            raise ValueError(f"speed must be positive, or 0 for as fast as possible: {speed}")
        self.path = Path(path)
        self.speed = speed
        self.max_gap_s = max_gap_s
        self.finished = False
        self._paused = threading.Event()
        self._changed = threading.Event()

    @property
    def description(self) -> str:
        pace = "as fast as possible" if self.speed == 0 else f"at {self.speed:g}x"
        return f"replaying {self.path} {pace}"

    def set_paused(self, paused: bool) -> None:
        if paused:
            self._paused.set()
        else:
            self._paused.clear()
        self._changed.set()

    def set_speed(self, speed: float) -> None:
        self.speed = speed
        self._changed.set()

    def faster(self) -> float:
        self.set_speed(_next_speed(self.SPEEDS, self.speed, +1))
        return self.speed

    def slower(self) -> float:
        self.set_speed(_next_speed(self.SPEEDS, self.speed, -1))
        return self.speed

    def run(self, inspector: Inspector, stop: threading.Event) -> None:
        inspector.set_status(self.description)
        previous_ts: float | None = None
        batch: list[Parsed] = []
        problems: list[str] = []

        def flush() -> None:
            inspector.feed_parsed(batch, problems)
            batch.clear()
            problems.clear()

        with open(self.path, "rb") as file:
            for line in file:
                if stop.is_set():
                    return
                if not line.strip():
                    continue
                try:
                    event = parse_line(line)  # once: for its time here, and for the model
                except BadEvent as problem:
                    problems.append(str(problem))
                    continue
                ts = event[2]
                gap = 0.0
                if previous_ts is not None and self.speed:
                    gap = min(max(0.0, ts - previous_ts) / self.speed, self.max_gap_s)
                if gap > 0.001 or self._paused.is_set():
                    flush()
                    self._wait(gap, inspector, stop)
                previous_ts = ts
                batch.append(event)
                if len(batch) + len(problems) >= BATCH_LINES:
                    flush()
            flush()
        self.finished = True
        inspector.set_status(f"replayed {self.path} to its end")

    def _wait(self, seconds: float, inspector: Inspector, stop: threading.Event) -> None:
        """Sleep ``seconds`` of replay time; a pause stops the clock, a speed change rescales
        what is left."""
        speed = self.speed
        deadline = time.monotonic() + seconds
        while not stop.is_set():
            self._changed.clear()
            if self._paused.is_set():
                inspector.set_status(f"{self.description} (paused)")
                left = deadline - time.monotonic()
                while self._paused.is_set() and not stop.is_set():
                    self._changed.wait(0.1)
                    self._changed.clear()
                deadline = time.monotonic() + max(0.0, left)
                inspector.set_status(self.description)
            if self.speed != speed:
                left = max(0.0, deadline - time.monotonic()) * speed
                speed = self.speed
                deadline = time.monotonic() + (left / speed if speed else 0.0)
                inspector.set_status(self.description)
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._changed.wait(left)


def _next_speed(speeds: tuple[float, ...], speed: float, step: int) -> float:
    ordered = sorted(speeds, key=lambda s: math.inf if s == 0 else s)
    keyed = math.inf if speed == 0 else speed
    if step > 0:
        return next((s for s in ordered if (math.inf if s == 0 else s) > keyed), speed)
    return next((s for s in reversed(ordered) if (math.inf if s == 0 else s) < keyed), speed)


class DemoSource:
    """The reference manager on the synthetic agent workload, in this process: no setup.

    Runs :func:`ctxkit.demo.run_demo` on the worker thread's own event loop and feeds every
    event it publishes straight to the inspector.
    """

    pausable = False

    def __init__(self, options: object | None = None) -> None:
        from ctxkit.demo import DemoOptions

        self.options = options if options is not None else DemoOptions(duration=math.inf)
        self.description = "demo: the reference manager on the synthetic agent workload"
        self.error: BaseException | None = None

    def set_paused(self, paused: bool) -> None:
        """The demo keeps running; pausing holds the screen only."""

    def run(self, inspector: Inspector, stop: threading.Event) -> None:
        inspector.set_status(self.description)
        try:
            asyncio.run(self._run(inspector, stop))
        except Exception as error:  # shown on the status line; the screen stays up
            self.error = error
            inspector.set_status(f"demo stopped: {type(error).__name__}: {error}")

    async def _run(self, inspector: Inspector, stop: threading.Event) -> None:
        from ctxkit.demo import run_demo

        def feed(event: Event) -> None:
            inspector.feed_event(event.name, dict(event.data), event.time)

        feed.deferred = True  # type: ignore[attr-defined]
        demo = asyncio.create_task(run_demo(self.options, subscribers=[feed]))
        while not demo.done():
            if stop.is_set():
                demo.cancel()
                break
            await asyncio.sleep(0.05)
        try:
            await demo
        except asyncio.CancelledError:
            return
        if not stop.is_set():
            inspector.set_status(f"{self.description}: finished")
