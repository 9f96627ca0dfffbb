"""Durations as people write them (``90s``, ``30m``, ``24h``, ``7d``) and as ages ("3m ago").

One place for both directions, so what ``--ttl`` accepts and what a listing prints agree.
"""

from __future__ import annotations

import math
import re

__all__ = ["UNITS", "format_age", "format_duration", "parse_duration"]

UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}
"""Seconds per unit."""

_PATTERN = re.compile(r"(\d+(?:\.\d+)?)([smhd])")


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a number and a unit, e.g. ``90s``, ``30m``, ``1.5h``, ``7d``.

    A bare number is refused (is ``24`` hours or seconds?); raises :class:`ValueError` with
    the accepted forms.
    """
    match = _PATTERN.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError(
            f"bad duration {text!r}: write a number and a unit, e.g. 90s, 30m, 24h, 7d"
        )
    seconds = float(match[1]) * UNITS[match[2]]
    if not math.isfinite(seconds):
        raise ValueError(f"bad duration {text!r}: too long")
    return seconds


def format_duration(seconds: float) -> str:
    """The largest whole unit: ``45s``, ``3m``, ``2h``, ``5d`` (rounded down)."""
    seconds = max(0.0, seconds)
    for unit in ("d", "h", "m"):
        if seconds >= UNITS[unit]:
            return f"{int(seconds // UNITS[unit])}{unit}"
    return f"{int(seconds)}s"


def format_age(seconds: float) -> str:
    """How long ago: ``3m ago``; a time ahead of the clock (a skewed clock) says so."""
    if seconds < 0:
        return f"{format_duration(-seconds)} ahead"
    return f"{format_duration(seconds)} ago"
