"""A DataTable that is given whole rows on every redraw and keeps the reader's place.

The panes redraw up to ten times a second; rebuilding the table each time would throw away
the cursor and the scroll position and cost a full re-render, so only what changed is touched:
cells updated in place, rows gone removed, new rows at the end appended (a growing view). Any
other change rebuilds the table, and the cursor goes back to the row it was on (by key). A
column is measured again when a cell changes, so an update never cuts a figure (``1-12``
shown as ``1-1``, ``warning`` as ``warni``). A
cell given as ``str`` is plain text: the stream's strings (strategies, roles, conversation ids)
are never read as markup.
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
        self._columns = self.add_columns(*columns)

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
        if not self._update_in_place(rows):
            self._rebuild(rows)
        self._shown = rows

    def _update_in_place(self, rows: list[Row]) -> bool:
        """Apply ``rows`` as removals, cell updates and appends; False if the order changed."""
        new_keys = {key for key, _ in rows}
        kept = [(key, cells) for key, cells in self._shown if key in new_keys]
        if [key for key, _ in kept] != [key for key, _ in rows[: len(kept)]]:
            return False
        for key, _ in self._shown:
            if key not in new_keys:
                self.remove_row(key)
        for (key, old), (_, new) in zip(kept, rows, strict=False):
            if len(old) != len(new) or len(new) != len(self._columns):
                return False
            for column, before, after in zip(self._columns, old, new, strict=True):
                if before != after:
                    self.update_cell(key, column, after, update_width=True)
        for key, cells in rows[len(kept) :]:
            self.add_row(*cells, key=key)
        return True

    def _rebuild(self, rows: list[Row]) -> None:
        cursor = self.cursor_row
        cursor_key = self._shown[cursor][0] if 0 <= cursor < len(self._shown) else None
        scroll_y = self.scroll_y
        self.clear()
        for key, cells in rows:
            self.add_row(*cells, key=key)
        keys = [key for key, _ in rows]
        if cursor_key in keys:
            self.move_cursor(row=keys.index(cursor_key), scroll=False)
        self.scroll_to(y=scroll_y, animate=False, immediate=True)
