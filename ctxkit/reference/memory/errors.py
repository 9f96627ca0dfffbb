"""What can go wrong with a semantic memory, each as a sentence that says what to do.

A memory file's errors are kinds of :class:`~ctxkit.reference.journal.HistoryFileError`: the
memory lives beside the history, and whoever reports a manager's storage problems reports
these the same way.
"""

from __future__ import annotations

from pathlib import Path

from ctxkit.reference.journal import HistoryFileError

__all__ = [
    "EmbedderError",
    "MemoryFileCorrupt",
    "MemoryFileError",
    "MemoryFileLocked",
    "MemoryUnavailable",
    "UnknownMemory",
]


class MemoryFileError(HistoryFileError):
    """A memory file cannot be used; the message names the file and what to do."""


class MemoryFileLocked(MemoryFileError):
    """Another connection kept the file's write lock for longer than the memory waits."""


class MemoryFileCorrupt(MemoryFileError):
    """The file is damaged, or is not a ctxkit memory. The file was not changed."""

    def __init__(self, path: Path | str, reason: str, *, ours: bool = True) -> None:
        self.path, self.reason = Path(path), reason
        if ours:
            advice = (
                "Keep a copy for inspection (sqlite3 FILE '.recover' may save what is left) "
                "and give the memory a new path; a memory can be rebuilt from the history."
            )
        else:
            advice = "Is it a ctxkit memory? Give the memory a path of its own."
        super().__init__(f"{self.path}: {reason}. The file was not changed. {advice}")


class MemoryUnavailable(RuntimeError):
    """What was asked for needs a package (or an SQLite build) that is not installed."""


class EmbedderError(RuntimeError):
    """An embedder gave no usable vectors: its model failed, its endpoint answered with an
    error, or it returned something other than one vector of the memory's size per text."""


class UnknownMemory(LookupError):
    """No stored item has this id (it was never stored, or it was forgotten)."""

    def __str__(self) -> str:
        return str(self.args[0])
