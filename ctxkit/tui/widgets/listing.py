"""The latest view, message by message: what was kept, shortened, summarized, dropped or
recalled.

Runs of messages left out together arrive as one row and are shown as one (``12-40``), so
a long history stays a short table. A ``hierarchical`` unit shown as a paragraph or one line
is one synthetic row: its fate says the level (``summary (line)``) and its ``#`` the history
messages it stands for, in parentheses (``(12-14)``). Units a recall brought back are
``recalled``. Producers list views only when asked (``view_listing``), so the pane says how to
turn the listing on when a stream has none.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from ctxkit.tui.widgets.figures import FATE_STYLES, count, plural
from ctxkit.tui.widgets.table import Row, SyncedTable

__all__ = ["NO_LISTING", "ViewListing", "listing_rows"]

COLUMNS = ("#", "role", "tokens", "fate")
LEFT_OUT = frozenset({"dropped", "summarized"})
"""Fates of history messages not in the view: their rows are dimmed."""
NO_LISTING = "no per-message listing in this stream (the producer can turn on view_listing)"


def _indexes(row: dict[str, Any]) -> str:
    index, messages = row.get("index"), row.get("count", 1)
    if not isinstance(index, int):
        span = row.get("stands_for")
        if isinstance(span, list) and len(span) == 2:  # a unit at a coarser level
            start, stop = span
            return f"({start})" if stop - start == 1 else f"({start}-{stop - 1})"
        return "-"  # a message from no history message: a summary
    if isinstance(messages, int) and messages > 1:
        return f"{index}-{index + messages - 1}"
    return str(index)


def listing_rows(listing: list[dict[str, Any]]) -> list[Row]:
    """One table row per listing row, in view order."""
    rows: list[Row] = []
    for number, row in enumerate(listing):
        fate = str(row.get("fate"))
        left_out = "dim" if fate in LEFT_OUT else ""
        shown = f"{fate} ({row['level']})" if row.get("level") else fate
        rows.append(
            (
                str(number),
                (
                    Text(_indexes(row), style=left_out, justify="right"),
                    Text(str(row.get("role", "?")), style=left_out),
                    Text(count(row.get("tokens")), style=left_out, justify="right"),
                    Text(shown, style=FATE_STYLES.get(fate, "")),
                ),
            )
        )
    return rows


def _caption(figures: dict[str, Any]) -> str:
    kinds = figures.get("view") or {}
    text = f"view: {count(figures.get('messages'))} messages"
    if kinds:
        text += " (" + ", ".join(f"{count(n)} {kind}" for kind, n in kinds.items()) + ")"
    levels = figures.get("units_by_level")
    if levels and (levels.get("paragraph") or levels.get("line")):
        text += "; units " + ", ".join(f"{count(n)} {name}" for name, n in levels.items())
    recalled = figures.get("units_recalled")
    if recalled:
        text += f"; {plural(recalled, 'unit')} recalled"
    omitted = figures.get("listing_omitted") or 0
    if omitted:
        text += f"; {plural(omitted, 'earlier row')} not listed"
    return text


class ViewListing(Vertical):
    """A caption with the view's make-up over the table of its rows."""

    def compose(self) -> ComposeResult:
        yield Static(id="view-caption", classes="caption")
        yield SyncedTable(*COLUMNS, id="view-table")

    @property
    def table(self) -> SyncedTable:
        return self.query_one(SyncedTable)

    def show(self, figures: dict[str, Any] | None) -> None:
        """Show the listing of ``figures`` (a conversation's snapshot)."""
        caption = self.query_one("#view-caption", Static)
        listing = figures.get("listing") if figures else None
        problem = figures.get("listing_problem") if figures else None
        if figures is None:
            caption.update(Text("no view yet"))
        elif problem:
            unreadable = f"the latest listing is unreadable: {problem}"
            caption.update(Text(f"{_caption(figures)}\n{unreadable}"))
        elif listing is None:
            caption.update(Text(f"{_caption(figures)}\n{NO_LISTING}"))
        else:
            caption.update(Text(_caption(figures)))
        self.table.display = listing is not None
        self.table.set_rows(listing_rows(listing or []))
