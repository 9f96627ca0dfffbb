"""Where the tokens of the latest view go, by category, against the budget (as Claude Code's
``/context`` shows it): the bars of all rows together fill the budget once."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from ctxkit.tui.widgets.drawn import Drawn
from ctxkit.tui.widgets.figures import count, percent

__all__ = ["BreakdownPane"]

CATEGORY_STYLES = {
    "system": "bright_black",
    "user": "blue",
    "assistant": "green",
    "tool_calls": "cyan",
    "tool_results": "magenta",
    "summaries": "yellow",
    "room": "dim",
    "reserved": "dim red",
}
BARS = {"room": "░", "reserved": "▒"}


class BreakdownPane(Drawn, can_focus=True):
    """Category, tokens, share of the budget and a bar, one row per category."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.figures: dict[str, Any] | None = None

    def show(self, figures: dict[str, Any] | None) -> None:
        """Draw the breakdown of ``figures`` (a conversation's snapshot)."""
        self.figures = figures
        self.refresh()

    def draw(self, width: int, height: int) -> Text:
        figures = self.figures
        if figures is None:
            return Text("no view yet", style="dim italic")
        budget = figures.get("budget") or 0
        rows = figures.get("breakdown") or {}
        lines = [
            Text(
                f"tokens by category, of the {count(budget)}-token budget"
                if budget
                else "tokens by category (the stream gives no budget)",
                style="bold",
            )
        ]
        name_width = max([12, *(len(str(name)) for name in rows)])
        bar_width = max(0, width - name_width - 20)
        for name, tokens in rows.items():
            share = percent(tokens, budget)
            line = Text(f"{name!s:<{name_width}} {count(tokens):>9} {share:>7}  ")
            if budget and bar_width:
                cells = round(min(1.0, tokens / budget) * bar_width)
                if tokens and not cells:
                    line.append("▏", style=CATEGORY_STYLES.get(name, ""))
                line.append(BARS.get(name, "█") * cells, style=CATEGORY_STYLES.get(name, ""))
            lines.append(line)
        lines.append(_history(figures))
        return Text("\n").join(lines)


def _history(figures: dict[str, Any]) -> Text:
    text = f"view: {count(figures.get('messages'))} messages"
    if figures.get("history_messages"):
        text += (
            f"; history: {count(figures.get('history_messages'))} messages, "
            f"{count(figures.get('history_tokens'))} tokens"
        )
    return Text(text, style="dim")
