"""The help screen: every key, and what each figure on the inspector means.

A modal over the main screen (which keeps updating behind it); ``esc`` or ``?`` closes it.
"""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["KEYS", "HelpScreen"]

KEYS = (
    ("q", "quit"),
    ("p", "pause: freeze the screen (a replay stops too; a followed file keeps being read)"),
    ("?", "this help; esc or ? closes it"),
    ("tab, shift+tab", "next / previous pane"),
    ("1 2 3 4", "Breakdown, Compactions, View, Conversations"),
    ("c or ], [", "next / previous conversation (holds it)"),
    ("f", "follow the most recently active conversation again"),
    ("enter", "in Conversations: show the conversation under the cursor"),
    ("+ -", "replay faster / slower (replays only)"),
)

FIGURES = (
    ("N%  tokens / budget", "the latest view's tokens (exact), as a share of the budget"),
    (
        "gauge colour",
        "green ok; yellow within 10% of the compaction threshold; orange past "
        "it (the next request compacts); red at the budget",
    ),
    ("white ┃ in the bar", "the compaction threshold: the view is compacted past it"),
    ("red ┃ at the end", "the budget: the hard limit a view must fit in"),
    (
        "room",
        "tokens left before compaction and before the limit; ~turns: how many more "
        "model calls fit at the recent average growth per call",
    ),
    (
        "tokens per view",
        "the recent views, scaled to the budget; ┈ the threshold; ▲ a view that compacted",
    ),
    (
        "Breakdown",
        "the latest view's tokens by category; room: what is left below the threshold; "
        "reserved: the budget above it",
    ),
    (
        "Compactions",
        "each compaction: tokens and messages before → after, tokens saved, "
        "time taken (ms), units dropped, truncated and summarized (a unit is what goes "
        "together, such as a tool call with its results), strategy",
    ),
    (
        "View",
        "the latest view message by message (# is the history index; a range is a run "
        "left out together): kept, truncated, summary, summarized, dropped",
    ),
    (
        "status line",
        "the source, events applied, lines skipped as malformed, unknown events, "
        "the conversation shown, and PAUSED with the events that arrived since",
    ),
)


def _table(title: str, rows: tuple[tuple[str, str], ...]) -> Table:
    table = Table(title=title, title_justify="left", box=None, show_header=False, expand=True)
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column(ratio=1)
    for left, right in rows:
        table.add_row(left, Text(right))
    return table


class HelpScreen(ModalScreen[None]):
    """Keys and figures, over the inspector."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close", show=False),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help") as box:
            box.border_title = "ctxkit inspect: help (esc or ? closes)"
            yield Static(_table("Keys", KEYS), id="help-keys")
            yield Static(_table("What the figures mean", FIGURES), id="help-figures")
