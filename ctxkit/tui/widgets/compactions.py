"""The compaction log: every compaction of the conversation, newest first, with what it
took and what it saved (the question users ask after "why did my agent forget that?").

Under the table, the compaction under the cursor in words, strategy in full: at 80 columns
the table's last column, the strategy, may be cut."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ctxkit.tui.widgets.figures import clock, count, plural
from ctxkit.tui.widgets.table import Row, SyncedTable

__all__ = ["CompactionLog", "compaction_rows", "describe"]

UNITS = (
    ("dropped", "units_dropped"),
    ("truncated", "units_truncated"),
    ("summarized", "units_summarized"),
)
"""The unit counts (a unit: what goes together, such as a tool call with its results), each
in a column headed by what happened to the units."""
COLUMNS = ("time", "tokens", "messages", "saved", "ms", *(name for name, _ in UNITS), "strategy")
"""The strategy comes last, as the one column that may be cut at 80 columns (the table
scrolls sideways, and the line under it names the strategy in full)."""


def _key(number: int, entry: dict[str, Any]) -> str:
    return f"{entry.get('time')}:{number}"


def describe(entry: dict[str, Any]) -> str:
    """One compaction in words: its strategy in full and its unit counts (its time is on
    the row under the cursor)."""
    return (
        f"{entry.get('strategy') or 'no strategy named'}: "
        f"units dropped {count(entry.get('units_dropped'))}, "
        f"truncated {count(entry.get('units_truncated'))}, "
        f"summarized {count(entry.get('units_summarized'))}"
    )


def compaction_rows(log: list[dict[str, Any]]) -> list[Row]:
    """The log's rows, newest first; keys stay put as new compactions arrive."""
    rows: list[Row] = []
    for number, entry in reversed(list(enumerate(log))):
        before = entry.get("messages_before")
        messages = f"{count(before) if before is not None else '?'} → "
        messages += count(entry.get("messages_after"))
        rows.append(
            (
                _key(number, entry),
                (
                    clock(entry.get("time")),
                    Text(
                        f"{count(entry.get('tokens_before'))} → {count(entry.get('tokens_after'))}",
                        justify="right",
                    ),
                    Text(messages, justify="right"),
                    Text(count(entry.get("saved")), style="green", justify="right"),
                    Text(f"{1000 * (entry.get('duration_s') or 0):.1f}", justify="right"),
                    *(Text(count(entry.get(key)), justify="right") for _, key in UNITS),
                    str(entry.get("strategy") or "-"),
                ),
            )
        )
    return rows


class CompactionLog(Vertical):
    """A caption with the totals, a table of the compactions kept, and the one under the
    cursor in words."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._entries: dict[str, dict[str, Any]] = {}

    def compose(self) -> ComposeResult:
        yield Static(id="compactions-caption", classes="caption")
        yield SyncedTable(*COLUMNS, id="compactions-table")
        yield Static(id="compactions-detail", classes="caption")

    @property
    def table(self) -> SyncedTable:
        return self.query_one(SyncedTable)

    def show(self, figures: dict[str, Any] | None) -> None:
        """Show the log of ``figures`` (a conversation's snapshot)."""
        caption = self.query_one("#compactions-caption", Static)
        log = (figures or {}).get("compaction_log") or []
        self._entries = {_key(number, entry): entry for number, entry in enumerate(log)}
        if figures is None:
            caption.update(Text("no compactions yet"))
            self.table.set_rows([])
            self._describe(None)
            return
        total = figures.get("compactions", 0)
        text = f"{plural(total, 'compaction')}, {count(figures.get('tokens_saved'))} tokens saved"
        if total > len(log):
            text += f"; the last {len(log)} listed"
        if log:
            text += ", newest first"
        caption.update(Text(text))
        table = self.table
        table.set_rows(compaction_rows(log))
        rows = table.shown_rows
        self._describe(rows[table.cursor_row][0] if 0 <= table.cursor_row < len(rows) else None)

    def _describe(self, key: str | None) -> None:
        entry = self._entries.get(key) if key is not None else None
        detail = self.query_one("#compactions-detail", Static)
        detail.update(Text(describe(entry) if entry is not None else ""))
        detail.display = entry is not None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._describe(event.row_key.value)
