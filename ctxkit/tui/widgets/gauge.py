"""The usage gauge: how full the context is, where it compacts, and how much room is left.

Always at the top of the screen, because it is what users ask for first: the share of the
budget, a bar with the compaction threshold and the hard limit marked, and the room left in
tokens and in turns (model calls of average growth).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from ctxkit.tui.widgets.drawn import Drawn, append_runs
from ctxkit.tui.widgets.figures import count, level_style, percent

__all__ = ["UsageGauge"]

THRESHOLD_MARK = "bold bright_white"
LIMIT_MARK = "bold red"
LEVEL_WORDS = {
    "ok": "ok",
    "warning": "near the compaction threshold",
    "compacting": "past the compaction threshold",
    "limit": "at the limit",
}


class UsageGauge(Drawn):
    """Tokens of the latest view against the budget, coloured by level."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.figures: dict[str, Any] | None = None
        self.waiting = "waiting for events"
        self.level = "ok"

    def show(self, figures: dict[str, Any] | None, waiting: str) -> None:
        """Draw ``figures`` (a conversation's snapshot), or ``waiting`` while there are none."""
        self.figures, self.waiting = figures, waiting
        level = figures.get("level") if figures else "ok"
        self.level = level if isinstance(level, str) and level in LEVEL_WORDS else "ok"
        for name in LEVEL_WORDS:
            self.set_class(name == self.level, f"-{name}")
        self.refresh()

    def draw(self, width: int, height: int) -> Text:
        figures = self.figures
        if figures is None:
            return Text("\n").join(
                [Text(self.waiting, style="italic"), Text("░" * width, style="dim"), Text()]
            )
        return Text("\n").join([_headline(figures, width), _bar(figures, width), _room(figures)])


def _headline(figures: dict[str, Any], width: int) -> Text:
    tokens, budget = figures.get("tokens", 0), figures.get("budget", 0)
    style = level_style(figures.get("level"))
    left = Text()
    if budget:
        left.append(percent(tokens, budget), style=f"bold {style}")
        left.append(f"  {count(tokens)} / {count(budget)} tokens  ")
        left.append(LEVEL_WORDS.get(figures.get("level"), str(figures.get("level"))), style=style)
        cache = figures.get("cache")
        if cache:
            left.append(f"  cache {cache['share']:.0%}")
    else:
        left.append(f"{count(tokens)} tokens, ")
        left.append("no budget in the stream", style="italic")
    right = Text()
    threshold, at = figures.get("compact_threshold"), figures.get("compact_at_tokens")
    if budget and threshold is not None:
        right.append("┃", style=THRESHOLD_MARK)
        right.append(f" compacts at {threshold:.0%} ({count(at)})  ")
    if budget:
        right.append("┃", style=LIMIT_MARK)
        right.append(" limit")
    gap = width - left.cell_len - right.cell_len
    if gap < 2:  # too narrow for the legend: the figures come first
        return left
    return Text.assemble(left, " " * gap, right)


def _bar(figures: dict[str, Any], width: int) -> Text:
    budget = figures.get("budget", 0)
    cells = max(1, width - 1)  # the last cell marks the limit
    ratio = figures.get("tokens", 0) / budget if budget else 0.0
    filled = min(cells, max(0, round(ratio * cells)))
    fill = level_style(figures.get("level")) or "white"
    threshold = figures.get("compact_threshold")
    mark = min(cells - 1, int(threshold * cells)) if budget and threshold is not None else None
    drawn = []
    for cell in range(cells):
        inside = cell < filled
        if cell == mark:
            drawn.append(("┃", f"{THRESHOLD_MARK} on {fill}" if inside else THRESHOLD_MARK))
        elif inside:
            drawn.append(("█", fill))
        else:
            drawn.append(("░", "dim"))
    drawn.append(("┃", LIMIT_MARK if budget else "dim"))
    bar = Text()
    append_runs(bar, drawn)
    return bar


def _turns(turns: object) -> str:
    if not isinstance(turns, int):
        return ""
    if turns == 0:
        return " (under a turn)"
    return f" (~{turns:,} turn{'s' if turns != 1 else ''})"


def _room(figures: dict[str, Any]) -> Text:
    budget, tokens = figures.get("budget", 0), figures.get("tokens", 0)
    turns = figures.get("turns") or {}
    if not budget:
        return Text("room: unknown until the stream gives a budget", style="italic")
    if tokens >= budget:
        return Text("room: none, the view is at the limit", style=LIMIT_MARK)
    until_limit = f"{count(figures.get('room_until_limit'))} until the limit"
    at = figures.get("compact_at_tokens")
    if at is None:
        return Text(
            f"room: {until_limit}{_turns(turns.get('left_before_limit'))}"
            " (the stream does not say when it compacts)"
        )
    if tokens >= at:
        return Text(
            f"room: {count(tokens - at)} tokens past the compaction threshold, "
            f"{until_limit}{_turns(turns.get('left_before_limit'))}"
        )
    return Text(
        f"room: {count(figures.get('room_until_compaction'))} tokens until compaction"
        f"{_turns(turns.get('left_before_compaction'))}, {until_limit}"
    )
