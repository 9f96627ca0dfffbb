"""A DataTable that is given whole rows on every redraw and keeps the reader's place.

The panes redraw up to ten times a second; rebuilding the table each time would throw away
the cursor and the scroll position, so rows are replaced only when they changed, and the
cursor goes back to the row it was on (by key). A cell given as ``str`` is plain text: the
stream's strings (strategies, roles, conversation ids) are never read as markup.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import RenderableType
from rich.text import Text
from textual.widgets import DataTable

__all__ = ["Row", "SyncedTable"]

Row = tuple[str, Sequence[RenderableType]]
"""A row's unique key and its cells."""


class SyncedTable(DataTable[RenderableType]):
    """Rows by key, redrawn only when they change."""

    def __init__(self, *columns: str, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._shown: list[Row] = []
        self.add_columns(*columns)

    @property
    def shown_rows(self) -> list[Row]:
        """The rows on screen now."""
        return list(self._shown)

    def set_rows(self, rows: Sequence[Row]) -> None:
        """Show ``rows`` (each key once)."""
        rows = [
            (key, tuple(Text(cell) if isinstance(cell, str) else cell for cell in cells))
            for key, cells in rows
        ]
        if rows == self._shown:
            return
        cursor = self.cursor_row
        cursor_key = self._shown[cursor][0] if 0 <= cursor < len(self._shown) else None
        scroll_y = self.scroll_y
        self.clear()
        for key, cells in rows:
            self.add_row(*cells, key=key)
        self._shown = rows
        keys = [key for key, _ in rows]
        if cursor_key in keys:
            self.move_cursor(row=keys.index(cursor_key), scroll=False)
        self.scroll_to(y=scroll_y, animate=False, immediate=True)
