"""A widget drawn as text from the latest figures, which cannot take the screen down.

A stream can hold anything the model let through; if drawing it fails anyway, the widget
shows one red line and counts the failure (tests assert the count stays 0), and the
inspector keeps running.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

__all__ = ["Drawn", "append_runs"]


class Drawn(Widget):
    """Subclasses implement :meth:`draw` for the size they are given."""

    draw_errors = 0
    """How often :meth:`draw` raised (kept per widget once it happens)."""

    def draw(self, width: int, height: int) -> Text:
        """The widget's text at ``width`` x ``height`` cells."""
        raise NotImplementedError

    def render(self) -> RenderResult:
        width, height = self.content_size
        try:
            text = self.draw(max(1, width), max(1, height))
            for span in text.spans:  # a bad style fails later, in Textual: check it here
                if isinstance(span.style, str):
                    Style.parse(span.style)
            return text
        except Exception as error:  # a drawing bug must not stop the inspector
            self.draw_errors += 1
            self.log.error(f"{type(self).__name__} could not draw: {error!r}")
            return Text(f"(cannot draw this: {type(error).__name__})", style="red")


def append_runs(line: Text, cells: list[tuple[str, str]]) -> None:
    """Append ``(character, style)`` cells with one span per run of a style: charts and bars
    are drawn up to ten times a second, and every span costs Textual a style conversion."""
    start = 0
    for end in range(1, len(cells) + 1):
        if end == len(cells) or cells[end][1] != cells[start][1]:
            line.append("".join(char for char, _ in cells[start:end]), style=cells[start][1])
            start = end
