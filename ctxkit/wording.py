"""Counts in words for people: ``1 compaction``, ``2 compactions`` (every command and screen
says them the same way)."""

from __future__ import annotations

__all__ = ["plural"]


def plural(number: int, word: str) -> str:
    """``1 event``, ``2 events``, ``1,024 events``."""
    return f"{number:,} {word}{'' if number == 1 else 's'}"
