"""Searching on both cores: a long search split between this process and a second one.

A search of many examples is most of a run's time, and one Hypothesis search is one thread:
the runner and its worker take turns on one core. With ``--jobs 2`` (not ``serial``), a
search of at least :data:`MIN_EXAMPLES` examples is split: this process searches its share
with the run's seed, and a second process (``python -m ctxkit.conformance.elsewhere``, started
as the worker is: this interpreter, environment and directory) searches the other share with a
seed of its own, as a run of one search on its own worker (:func:`search_elsewhere`). That run
shrinks and minimizes what it finds, on the second core; the runner then takes its failures
for the properties this process did not fail (this process's first), verifies them with its
own, and adds the share's examples to the run's depth.

Each share is a deterministic search, and the merge prefers this process's findings, so the same
seed and ``--jobs`` give the same answer however the two processes are scheduled. It is not
the default: Hypothesis grows its examples from the ones before, so two searches of 40
examples reach shorter histories than one of 80 (measured: a fault that needs 40+ messages,
found by one search of 80 at every seed tried, was missed by two of 40 at one seed of four).
If the second process cannot start, its share is searched in this one after this one's own,
with its seed; if it ends without a report, that is ctxkit's own error (the target runs in a
worker of its own, so nothing it does can end that process).
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxkit.conformance.reports.results import Report

RunOptions = Any
"""The runner's options (:class:`ctxkit.conformance.runner.RunOptions`), which this module,
imported by the runner, does not import back."""

__all__ = ["MIN_EXAMPLES", "Shards", "Share", "ShareFailed", "search_elsewhere", "split"]

MIN_EXAMPLES = 40
"""A search of fewer examples is not split: starting a second process and a second instance of
the target would cost more than it saves."""

SEED_STRIDE = 1_000_003
"""Share k of a search searches with the run's seed plus k times this (a prime, far from the
seeds of later searches, which add 1 each)."""


@dataclasses.dataclass(frozen=True)
class Share:
    """What one process searches: its seed and its examples."""

    seed: int
    examples: int


def split(examples: int, seed: int, jobs: int) -> list[Share]:
    """The shares of a search: ``jobs`` of them (the first is this process's), or one when the
    search is short."""
    if jobs < 2 or examples < MIN_EXAMPLES:
        return [Share(seed, examples)]
    base, extra = divmod(examples, jobs)
    return [Share(seed + k * SEED_STRIDE, base + (k < extra)) for k in range(jobs)]


def search_elsewhere(
    run: Callable[[RunOptions], Report], options: RunOptions, seconds: float, run_started: float
) -> Report:
    """What the second process does (``python -m ctxkit.conformance.elsewhere``): one search
    of ``options`` (its seed, its examples, the properties in ``options.only``) by ``run`` (the
    runner's), on a worker of its own, with what it finds made small, within ``seconds``.
    ``run_started``: when the caller's run began (``time.time()``), so the times to failure
    it reports count from there."""
    begun = time.time()
    report = run(dataclasses.replace(options, deadline=max(1.0, seconds)))
    for result in report.properties:
        if result.time_to_failure_s is not None:
            result.time_to_failure_s += max(0.0, begun - run_started)
    return report


class ShareFailed(Exception):
    """The process searching a share ended without a report: ctxkit's own error there."""


class Shards:
    """The other processes of a run's split searches, each waited for in a thread."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._waiting: ThreadPoolExecutor | None = None

    def submit(self, options: RunOptions, seconds: float, run_started: float) -> Future[Report]:
        """Search ``options`` in a process of its own (:func:`search_elsewhere`)."""
        if self._waiting is None:
            self._waiting = ThreadPoolExecutor(self.jobs - 1, "ctxkit-share")
        return self._waiting.submit(_in_process, options, seconds, run_started)

    def close(self) -> None:
        if self._waiting is not None:
            self._waiting.shutdown(wait=True, cancel_futures=True)
            self._waiting = None


def _in_process(options: RunOptions, seconds: float, run_started: float) -> Report:
    """Run :func:`search_elsewhere` in ``python -m ctxkit.conformance.elsewhere``: the request
    goes in on its stdin, the report comes back in a file (the target's own prints may go to
    any inherited stream)."""
    with tempfile.TemporaryDirectory(prefix="ctxkit-share-") as folder:
        answer = os.path.join(folder, "report.pickle")
        done = subprocess.run(
            [sys.executable, "-m", "ctxkit.conformance.elsewhere", answer],
            input=pickle.dumps((options, seconds, run_started)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
        )
        if done.returncode != 0 or not os.path.exists(answer):
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()[-12:]
            raise ShareFailed(
                f"the process searching a share of the examples exited {done.returncode}: "
                + "\n".join(said)
            )
        with open(answer, "rb") as file:
            return pickle.load(file)
