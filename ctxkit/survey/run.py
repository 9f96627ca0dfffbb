"""Run the suite on many targets at once: each target in a ``ctxkit conformance`` process of its
own (so one target's hang, crash or memory cannot touch another's verdict), at most ``jobs``
at a time, with a Rich progress bar on a terminal.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rich.progress import ProgressColumn, Task
from rich.text import Text

from ctxkit.survey.matrix import Finding, Row, row_from_report

__all__ = ["Progress", "Subject", "survey"]

EXIT_CANNOT_LOAD = 2


@dataclass(frozen=True)
class Subject:
    """One target to survey, with what the matrix shows about it."""

    target: str
    library: str | None = None
    version: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    findings: dict[str, Finding] = field(default_factory=dict)
    python: str | None = None
    """The interpreter of another Python environment (with ctxkit) whose worker runs the
    target: for a library that cannot be installed beside the others."""


class Progress:
    """On a terminal, a Rich progress bar with the targets running and how long each has
    run, each finished target printed above it; elsewhere (a CI log, a test) a line per
    finished target, ``[done/total] target: outcome (N s)``, and no redrawing."""

    def __init__(self, total: int, stream: TextIO = sys.stderr) -> None:
        self.total = total
        self.stream = stream
        self.live = stream.isatty()
        self.done = 0
        self.running: dict[str, float] = {}
        self.lock = threading.Lock()
        self.bar: Any = None
        self.task: Any = None
        if self.live:
            self._start_bar()

    def _start_bar(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        self.bar = Bar(
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            _Running(self),
            console=Console(file=self.stream, highlight=False, emoji=False),
            transient=True,
        )
        self.task = self.bar.add_task("survey", total=self.total)
        self.bar.start()

    def start(self, target: str) -> None:
        with self.lock:
            self.running[target] = time.monotonic()
        if self.bar is not None:
            self.bar.refresh()

    def finish(self, target: str, outcome: str) -> None:
        with self.lock:
            began = self.running.pop(target, time.monotonic())
            self.done += 1
            line = f"  [{self.done}/{self.total}] {target}: {outcome} "
            line += f"({time.monotonic() - began:.0f} s)"
        if self.bar is None:
            self.stream.write(line + "\n")
            self.stream.flush()
            return
        self.bar.console.print(line, markup=False, emoji=False)
        self.bar.advance(self.task)

    def running_now(self) -> str:
        """The targets running, longest first, with their time so far (three at most)."""
        now = time.monotonic()
        with self.lock:
            running = sorted(self.running.items(), key=lambda item: item[1])[:3]
        return ", ".join(f"{target} {now - began:.0f} s" for target, began in running)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


class _Running(ProgressColumn):
    """The bar's last column: what is running now, redrawn with the bar."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self.progress = progress

    def render(self, task: Task) -> Text:
        running = self.progress.running_now()
        return Text(f"running: {running}" if running else "", overflow="ellipsis", no_wrap=True)


def _check(subject: Subject, options: Sequence[str], folder: Path, timeout: float) -> Row:
    """One ``ctxkit conformance`` process; its JSON report becomes the row."""
    report_path = folder / "report.json"
    command = [
        sys.executable,
        "-m",
        "ctxkit",
        "conformance",
        subject.target,
        "--report-json",
        str(report_path),
        *options,
    ]
    if subject.config:
        command += ["--config", json.dumps(subject.config)]
    if subject.python:
        command += ["--command", f"{shlex.quote(subject.python)} -m ctxkit.conformance.worker"]
    env = dict(os.environ, CTXKIT_SURVEY="1")
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        return Row(subject.target, subject.library, subject.version, problem="the run overran")
    if done.returncode == EXIT_CANNOT_LOAD or not report_path.exists():
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        reason = lines[-1].removeprefix("ctxkit: ") if lines else f"exit {done.returncode}"
        return Row(subject.target, subject.library, subject.version, problem=reason)
    report = json.loads(report_path.read_text(encoding="utf-8"))
    return row_from_report(
        subject.target,
        report,
        library=subject.library,
        version=subject.version,
        findings=subject.findings,
    )


def survey(
    subjects: Sequence[Subject],
    *,
    jobs: int,
    options: Sequence[str] = (),
    deadline: float = 300.0,
    progress: Progress | None = None,
    on_row: Callable[[Row], None] | None = None,
) -> list[Row]:
    """A row per subject, in the subjects' order; ``options`` go to every run."""
    rows: dict[int, Row] = {}
    with tempfile.TemporaryDirectory(prefix="ctxkit-survey-") as scratch:

        def one(number: int, subject: Subject) -> None:
            folder = Path(scratch) / str(number)
            folder.mkdir()
            if progress is not None:
                progress.start(subject.target)
            row = _check(subject, [*options, "--deadline", f"{deadline:g}"], folder, deadline + 120)
            rows[number] = row
            if progress is not None:
                outcome = row.verdict if row.problem is None else "not checked"
                progress.finish(subject.target, outcome)
            if on_row is not None:
                on_row(row)

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for future in [pool.submit(one, n, s) for n, s in enumerate(subjects)]:
                future.result()
    if progress is not None:
        progress.close()
    return [rows[n] for n in range(len(subjects))]
