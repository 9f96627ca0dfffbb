"""Context windows of models people run, in tokens, for the audit's "over the window" and
"near the window" checks. A table, matched by the longest model-name prefix; a user's own
entries (``--window MODEL=TOKENS``) come first. Dated snapshots match their family
(``gpt-4o-2024-08-06`` is ``gpt-4o``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

__all__ = ["KNOWN_WINDOWS", "by_prefix", "context_window"]

V = TypeVar("V")

KNOWN_WINDOWS: Mapping[str, int] = {
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude-3": 200_000,
    "claude-3-5": 200_000,
    "claude-3-7": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-opus-4": 200_000,
    "claude-haiku-4": 200_000,
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
    "gemini-2.0-flash": 1_048_576,
    "gemini-2.5-pro": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
    "anthropic.claude": 200_000,
    "us.anthropic.claude": 200_000,
}


def context_window(model: str, overrides: Mapping[str, int] | None = None) -> int | None:
    """The model's window (None when unknown): the user's entries, then the table, each by
    the longest prefix of the model name (an exact name wins)."""
    for table in (overrides or {}, KNOWN_WINDOWS):
        found = by_prefix(model, table)
        if found is not None:
            return found
    return None


def by_prefix(model: str, table: Mapping[str, V]) -> V | None:
    """The entry of the longest name in ``table`` that begins ``model`` (an exact name wins:
    ``gpt-4o-mini`` over ``gpt-4o``), or None: model names carry dates and suffixes."""
    best = max((name for name in table if model.startswith(name)), key=len, default=None)
    return None if best is None else table[best]
