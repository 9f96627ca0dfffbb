"""Counts in words for people: ``1 compaction``, ``2 compactions`` (every command and screen
says them the same way)."""

from __future__ import annotations

__all__ = ["plural"]


def plural(number: int, word: str, many: str | None = None) -> str:
    """``1 event``, ``2 events``, ``1,024 events``; ``many`` for a word that does not just
    take an s (``plural(2, "batch", "batches")``)."""
    if number == 1:
        return f"{number:,} {word}"
    return f"{number:,} {many or word + 's'}"
