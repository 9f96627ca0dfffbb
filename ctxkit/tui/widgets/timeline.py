"""Tokens over time: one column per view (or per run of views when there are more views than
columns), block characters for eighths of a row, and a row of marks under the views that
compacted. Block characters stay legible at 80 columns and in any terminal font.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text

from ctxkit.tui.model import level_of
from ctxkit.tui.widgets.drawn import Drawn, append_runs
from ctxkit.tui.widgets.figures import clock, count, level_style, short_count

__all__ = ["TokenTimeline", "fit_columns"]

BLOCKS = " ▁▂▃▄▅▆▇█"
COMPACTION_MARK = "▲"
COMPACTION_STYLE = "bold magenta"
THRESHOLD_LINE = "┈"


def fit_columns(points: Sequence[Sequence[Any]], columns: int) -> list[tuple[int, bool]]:
    """``(tokens, compacted)`` per column: a view per column while they fit, else even runs
    of views shown by their largest view, marked if any of them compacted."""
    values = [(int(point[1]), bool(point[2])) for point in points]
    if len(values) <= columns:
        return values
    fitted = []
    for column in range(columns):
        run = values[column * len(values) // columns : (column + 1) * len(values) // columns]
        fitted.append((max(tokens for tokens, _ in run), any(mark for _, mark in run)))
    return fitted


class TokenTimeline(Drawn):
    """The conversation's recent views, scaled to the budget."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.points: list[list[Any]] = []
        self.budget = 0
        self.threshold: float | None = None
        self.cache: list[list[Any]] = []
        """(time, share of the previous view kept) per view: the prompt cache's history."""

    def show(self, figures: dict[str, Any] | None) -> None:
        """Draw the timeline of ``figures`` (a conversation's snapshot), or nothing yet."""
        figures = figures or {}
        self.points = list(figures.get("timeline") or [])
        self.budget = figures.get("budget") or 0
        self.threshold = figures.get("compact_threshold")
        self.cache = list(figures.get("cache_history") or [])
        self.refresh()

    def draw(self, width: int, height: int) -> Text:
        points, budget, threshold = self.points, self.budget, self.threshold
        if not points:
            return Text("tokens per view: no views yet", style="dim italic")
        rows = max(1, height - 2)
        fitted_top = max(tokens for _, tokens, _ in points)
        top = max(budget, fitted_top, 1)
        at = int(threshold * budget) if threshold is not None and budget else None
        labels = {rows - 1: short_count(top), 0: "0"}
        threshold_row = None
        if at is not None:
            threshold_row = min(rows - 1, int(at / top * rows))
            labels.setdefault(threshold_row, short_count(at))
        axis = max(len(label) for label in labels.values()) + 1
        columns = fit_columns(points, max(1, width - axis))
        styles = [level_style(level_of(tokens, budget, threshold)) for tokens, _ in columns]
        lines = [_caption(points, len(columns), width, self.cache)]
        for row in range(rows - 1, -1, -1):
            label = labels.get(row)
            line = Text(f"{label}┤".rjust(axis) if label else "│".rjust(axis), style="dim")
            cells = []
            for (tokens, _), style in zip(columns, styles, strict=True):
                eighths = min(8, max(0, round(tokens / top * rows * 8) - row * 8))
                if tokens > 0 and row == 0:
                    eighths = max(1, eighths)  # a view is never drawn as nothing
                if eighths == 0:
                    cells.append((THRESHOLD_LINE if row == threshold_row else " ", "dim"))
                else:
                    cells.append((BLOCKS[eighths], style))
            append_runs(line, cells)
            lines.append(line)
        marks = "".join(COMPACTION_MARK if compacted else " " for _, compacted in columns)
        lines.append(Text(" " * axis) + Text(marks, style=COMPACTION_STYLE))
        return Text("\n").join(lines)


def _caption(
    points: Sequence[Sequence[Any]], columns: int, width: int, cache: Sequence[Sequence[Any]] = ()
) -> Text:
    views = len(points)
    span = f"{clock(points[0][0])}-{clock(points[-1][0])}"
    per = "a view per column" if views <= columns else f"~{views / columns:.1f} views per column"
    caption = Text(f"tokens per view: {count(views)} views {span}, {per}", style="bold")
    if cache:  # the prompt cache's history: how much of the view before each view kept
        recent = [share for _, share in cache[-5:]]
        caption.append(" · cache kept " + " ".join(f"{share:.0%}" for share in recent))
    legend = Text.assemble(
        (COMPACTION_MARK, COMPACTION_STYLE),
        " compacted  ",
        (THRESHOLD_LINE * 2, "dim"),
        " threshold",
    )
    gap = width - caption.cell_len - legend.cell_len
    return Text.assemble(caption, " " * gap, legend) if gap >= 2 else caption
