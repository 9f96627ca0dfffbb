"""The conversations of the stream, to pick the one the screen shows.

By default the screen follows the most recently active conversation; picking one here (or
with ``c``, ``[`` and ``]``) holds it until ``f`` follows the latest again.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static

from ctxkit.tui.widgets.figures import clock, count, level_style, percent
from ctxkit.tui.widgets.table import Row, SyncedTable

__all__ = ["ConversationPicker", "conversation_rows"]

COLUMNS = ("", "conversation", "tokens", "used", "level", "compactions", "violations", "last event")


def conversation_rows(conversations: list[dict[str, Any]], shown: str | None) -> list[Row]:
    """One row per conversation in the order first seen; the one on screen marked."""
    rows: list[Row] = []
    for figures in conversations:
        cid = str(figures.get("conversation_id"))
        level = str(figures.get("level"))
        violations = figures.get("violations") or 0
        used = percent(figures.get("tokens", 0), figures.get("budget", 0))
        alarm = "bold red" if violations else ""
        rows.append(
            (
                cid,
                (
                    Text("▶", style="bold") if cid == shown else "",
                    cid,
                    Text(count(figures.get("tokens")), justify="right"),
                    Text(used, justify="right"),
                    Text(level, style=level_style(level)),
                    Text(count(figures.get("compactions")), justify="right"),
                    Text(count(violations), style=alarm, justify="right"),
                    clock(figures.get("last_event_ts")),
                ),
            )
        )
    return rows


class ConversationPicker(Vertical):
    """A caption saying who chose the conversation shown, over a table to choose from."""

    class Picked(Message):
        """The user chose a conversation (Enter or a click on its row)."""

        def __init__(self, conversation_id: str) -> None:
            super().__init__()
            self.conversation_id = conversation_id

    def compose(self) -> ComposeResult:
        yield Static(id="conversations-caption", classes="caption")
        yield SyncedTable(*COLUMNS, id="conversations-table")

    @property
    def table(self) -> SyncedTable:
        return self.query_one(SyncedTable)

    def show(self, conversations: list[dict[str, Any]], shown: str | None, following: bool) -> None:
        """List ``conversations`` (snapshots), marking ``shown``; ``following``: the screen
        follows the most recently active one."""
        if not conversations:
            text = "no conversations yet"
        elif following:
            text = "following the most recently active; Enter picks one"
        else:
            text = "holding the one picked; f follows the most recently active again"
        self.query_one("#conversations-caption", Static).update(Text(text))
        self.table.set_rows(conversation_rows(conversations, shown))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.Picked(event.row_key.value))
