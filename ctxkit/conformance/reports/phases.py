"""Where a conformance run's time goes: starting the target (its process and import), each
search (Hypothesis's own shrinking inside it), minimizing and shrinking the failures' calls,
verifying their reproducers, and the prompt-cache loop. A slow target's cost is then said by
phase, in the JSON report (``phases``) and the summary's time line. A phase that ran beside
the others, on the second core (:mod:`ctxkit.conformance.schedule`), is said to: its seconds
overlap theirs and add nothing to the wall time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["PHASES", "Phases", "said"]

PHASES = ("start", "search", "minimize", "shrink", "verify", "cache_loop")
"""The phases, in the order a run goes through them."""

_SAID = {
    "start": "starting the target",
    "search": "searching",
    "minimize": "minimizing",
    "shrink": "shrinking calls",
    "verify": "verifying",
    "cache_loop": "cache loop",
}


class Phases:
    """Seconds spent in each phase, and each search's own."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.searches: list[float] = []
        self.beside: set[str] = set()
        self._lock = threading.Lock()

    @contextmanager
    def timing(self, phase: str, *, beside: bool = False) -> Iterator[None]:
        """Time a phase; ``beside``: it runs beside the others, in a thread of its own."""
        started = time.monotonic()
        try:
            yield
        finally:
            took = time.monotonic() - started
            with self._lock:
                self.seconds[phase] += took
                if phase == "search":
                    self.searches.append(took)
                if beside:
                    self.beside.add(phase)

    def as_dict(self) -> dict[str, object]:
        """For the JSON report: ``<phase>_s`` for each phase, ``searches_s``, and ``beside``:
        the phases that ran beside the others."""
        return {
            **{f"{phase}_s": round(value, 3) for phase, value in self.seconds.items()},
            "searches_s": [round(value, 3) for value in self.searches],
            "beside": [phase for phase in PHASES if phase in self.beside],
        }


def said(phases: dict[str, object]) -> str:
    """The summary's time line: ``starting the target 1.2 s, searching 45.0 s (3 searches:
    12.1, 20.3, 12.6 s), ...``; phases that took no time left out."""
    parts = []
    for phase in PHASES:
        value = phases.get(f"{phase}_s")
        if not isinstance(value, int | float) or value < 0.05:
            continue
        part = f"{_SAID[phase]} {value:.1f} s"
        searches = phases.get("searches_s")
        if phase == "search" and isinstance(searches, list) and len(searches) > 1:
            part += (
                f" ({len(searches)} searches: " + ", ".join(f"{s:.1f}" for s in searches) + " s)"
            )
        beside = phases.get("beside")
        if isinstance(beside, list) and phase in beside:
            part += " beside"
        parts.append(part)
    return ", ".join(parts)
