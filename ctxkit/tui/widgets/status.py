"""The status line: where the events come from and whether they are all getting through.

A user who sees a still screen must be able to tell "nothing is happening" from "paused",
"the file is not there yet" and "every line is malformed", so all of those are said here.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from ctxkit.tui.widgets.drawn import Drawn
from ctxkit.tui.widgets.figures import plural

__all__ = ["Status", "StatusLine"]


@dataclass(frozen=True, slots=True)
class Status:
    """What the status line says."""

    source: str
    """What the source is doing (``following events.jsonl``, ``waiting for events.jsonl``)."""
    events: int = 0
    skipped: int = 0
    last_problem: str | None = None
    unknown: int = 0
    conversation: str | None = None
    conversations: int = 0
    following: bool = True
    violations: int = 0
    paused: bool = False
    arrived_while_paused: int = 0


class StatusLine(Drawn):
    """Two lines: the source, then the counts and the conversation shown."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.status = Status(source="")

    def show(self, status: Status) -> None:
        """Say ``status``."""
        if status != self.status:
            self.status = status
            self.refresh()

    @property
    def plain(self) -> str:
        """The status as plain text (what a test or a screen reader reads)."""
        return self.draw(10_000, 2).plain

    def draw(self, width: int, height: int) -> Text:
        status = self.status
        source = Text(status.source or "no source: showing what was fed in", style="bold")
        parts: list[Text] = []
        if status.paused:
            parts.append(
                Text(f" PAUSED, {plural(status.arrived_while_paused, 'event')} since ", "reverse")
            )
        parts.append(Text(plural(status.events, "event")))
        if status.skipped:
            parts.append(Text(f"{plural(status.skipped, 'malformed line')} skipped", "yellow"))
        if status.unknown:
            parts.append(Text(plural(status.unknown, "unknown event"), "yellow"))
        if status.violations:
            parts.append(Text(plural(status.violations, "invariant violation"), "bold red"))
        if status.conversation is not None:
            of = f" of {status.conversations}" if status.conversations > 1 else ""
            how = "following the latest" if status.following else "picked"
            parts.append(Text(f"conversation {status.conversation}{of} ({how})"))
        if status.skipped and status.last_problem:
            parts.append(Text(f"last skipped: {status.last_problem}", "dim"))
        counts = Text(" │ ", style="dim").join(parts)
        source.truncate(width, overflow="ellipsis")
        counts.truncate(width, overflow="ellipsis")
        return Text("\n").join([source, counts])
