"""SIGTERM ends a command as Ctrl-C does.

A CI job's timeout, ``kill`` or a test's ``terminate()`` sends SIGTERM, whose default ends
the process on the spot: no ``finally`` runs, so the processes a command started (a run's
workers, a fleet's demos) would be left running and the reports asked for unwritten.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

__all__ = ["terminated_as_interrupt"]


@contextlib.contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises ``KeyboardInterrupt`` (in the main thread only)."""

    def interrupt(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave SIGTERM as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
