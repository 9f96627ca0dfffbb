"""How the inspector writes its figures: token counts, shares, clock times and levels.

One place, so every pane writes a number the same way and the level colours agree.
"""

from __future__ import annotations

import math
import time

from ctxkit.wording import plural

__all__ = [
    "FATE_STYLES",
    "LEVEL_STYLES",
    "clock",
    "count",
    "level_style",
    "percent",
    "plural",
    "short_count",
]

LEVEL_STYLES = {
    "ok": "green",
    "warning": "gold1",
    "compacting": "dark_orange",
    "limit": "red",
}
"""The gauge's colour by :attr:`~ctxkit.tui.model.Conversation.level` (colours only, so
they also serve as backgrounds). Near the threshold is ``gold1`` (#ffd700), a yellow that
stays yellow: Textual draws the terminal's 16 colours in its own palette, where ``yellow``
is orange, the colour of ``compacting``. ``inspector.tcss`` borders the gauge alike."""

FATE_STYLES = {
    "kept": "green",
    "truncated": "yellow",
    "summary": "cyan",
    "summarized": "magenta",
    "dropped": "red",
    "recalled": "bright_blue",
}
"""A listing row's colour by what became of its messages."""


def level_style(level: object) -> str:
    """The colour of a level; an unknown level (a newer model) is drawn plainly."""
    return LEVEL_STYLES.get(level, "") if isinstance(level, str) else ""


def count(value: object) -> str:
    """A whole figure with thousands separators; ``-`` when unknown."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return "-"
    return f"{round(value):,}"


def short_count(value: float) -> str:
    """An axis label: ``950``, ``20k``, ``1.5M``."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if value >= 1_000:
        return f"{value / 1_000:.3g}k"
    return f"{value:.0f}"


def percent(part: float, whole: float) -> str:
    """``part`` as a share of ``whole``, one decimal; ``-`` when ``whole`` is not positive."""
    if not whole or whole < 0:
        return "-"
    return f"{100 * part / whole:.1f}%"


def clock(ts: object) -> str:
    """Unix seconds as local ``HH:MM:SS``; ``--:--:--`` for a time the clock cannot show."""
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        return "--:--:--"
    try:
        return time.strftime("%H:%M:%S", time.localtime(ts))
    except (OverflowError, OSError, ValueError):
        return "--:--:--"
