"""The row of pane names over the panes when only one fits on screen: which pane is shown,
which key shows each, and a click target for each."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import events
from textual.message import Message

from ctxkit.tui.widgets.drawn import Drawn

__all__ = ["PaneBar"]


class PaneBar(Drawn):
    """``1 Breakdown  2 Compactions ...`` with the active pane highlighted."""

    class Chosen(Message):
        """A pane's name was clicked."""

        def __init__(self, pane: str) -> None:
            super().__init__()
            self.pane = pane

    def __init__(self, panes: Sequence[tuple[str, str]], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.panes = list(panes)
        """``(pane id, title)`` in key order."""
        self.active = self.panes[0][0] if self.panes else ""
        self._spans: list[tuple[int, int, str]] = []

    def show(self, active: str) -> None:
        """Highlight ``active``."""
        self.active = active
        self.refresh()

    def draw(self, width: int, height: int) -> Text:
        text = Text()
        self._spans = []
        for key, (pane, title) in enumerate(self.panes, start=1):
            start = text.cell_len
            text.append(f" {key} {title} ", style="reverse bold" if pane == self.active else "")
            self._spans.append((start, text.cell_len, pane))
            text.append(" ")
        text.append("  tab/shift+tab, 1-4", style="dim")
        return text

    def on_click(self, event: events.Click) -> None:
        for start, end, pane in self._spans:
            if start <= event.x < end:
                self.post_message(self.Chosen(pane))
