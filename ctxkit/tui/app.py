"""``ctxkit inspect``: the Textual app that shows an :class:`~ctxkit.tui.model.Inspector`.

This module wires: the source runs on a worker thread and feeds the inspector; a timer takes
the inspector's figures at most ``refresh_per_second`` times a second, and only when they
changed, so a burst of events costs one redraw. The widgets (``ctxkit.tui.widgets``) draw
what they are given and know nothing of sources or threads.

Example::

    InspectorApp(Inspector("events.jsonl"), FollowSource("events.jsonl")).run()
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, ClassVar

from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.css.query import NoMatches
from textual.widget import Widget
from textual.widgets import Footer

from ctxkit.tui.help import HelpScreen
from ctxkit.tui.model import Inspector
from ctxkit.tui.sources import Source
from ctxkit.tui.widgets import (
    BreakdownPane,
    CompactionLog,
    ConversationPicker,
    PaneBar,
    Status,
    StatusLine,
    TokenTimeline,
    UsageGauge,
    ViewListing,
)

__all__ = ["PANES", "InspectorApp"]

PANES = (
    ("breakdown", "Breakdown"),
    ("compactions", "Compactions"),
    ("view", "View"),
    ("conversations", "Conversations"),
)
"""``(id, title)`` of the panes, in the order of their number keys."""
FOLLOW_QUIET_S = 2.0
"""Following the latest, the screen stays on a conversation until it has been quiet this
long (stream time) while another is active: two busy conversations do not make it flicker."""
DRAWING_SHARE = 1 / 3
"""Most of the time drawing may take: when redraws get slow (a huge backlog on a busy
machine), they come further apart, so taking in events keeps up and the screen catches up."""
CONVERSATIONS_EVERY_S = 1.0
"""How often the Conversations table takes every conversation's figures (it costs a copy of
each); sooner when a conversation comes or goes. The row of the conversation on screen is
brought up to date at every redraw, so it always agrees with the gauge."""


class InspectorApp(App[None]):
    """Live figures of one conversation of a stream, with its compactions and its view.

    Parameters:
        inspector: the figures to show; the app only reads it (and the source feeds it).
        source: what feeds ``inspector``, run on a worker thread until the app exits; None
            when the caller feeds the inspector itself (the tests).
        conversation: the conversation to show; None follows the most recently active.
        refresh_per_second: the most redraws a second, however fast events arrive.
    """

    CSS_PATH = "inspector.tcss"
    TITLE = "ctxkit inspect"
    ENABLE_COMMAND_PALETTE = False
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-short"), (36, "-tall")]
    """At 120x36 and more, the panes sit side by side (``Screen.-wide.-tall`` in the CSS)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("p", "toggle_pause", "Pause"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("tab", "next_pane", "Pane", priority=True),
        Binding("shift+tab", "previous_pane", "Previous pane", show=False, priority=True),
        *(
            Binding(str(key), f"show_pane('{pane}')", title, show=False)
            for key, (pane, title) in enumerate(PANES, start=1)
        ),
        Binding("c,right_square_bracket", "cycle_conversation(1)", "Conversation"),
        Binding("left_square_bracket", "cycle_conversation(-1)", "Previous", show=False),
        Binding("f", "follow_latest", "Follow latest", show=False),
        Binding("plus,equals_sign", "faster", "Faster", key_display="+"),
        Binding("minus", "slower", "Slower", key_display="-"),
    ]

    def __init__(
        self,
        inspector: Inspector,
        source: Source | None = None,
        *,
        conversation: str | None = None,
        refresh_per_second: float = 10.0,
    ) -> None:
        if not (math.isfinite(refresh_per_second) and refresh_per_second > 0):
            raise ValueError(f"refresh_per_second must be positive: {refresh_per_second}")
        super().__init__()
        self.inspector = inspector
        self.source = source
        self.refresh_per_second = refresh_per_second
        self.picked = conversation
        """The conversation the user chose; None: follow the most recently active."""
        self.shown: str | None = None
        """The conversation on screen."""
        self.pane = PANES[0][0]
        self.paused = False
        self.redraws = 0
        """Redraws so far: at most ``refresh_per_second`` a second, plus one per key that
        changes what is shown."""
        self.draw_errors = 0
        self.draw_seconds = 0.0
        """How long the latest timed redraw took, until it was on the screen."""
        self._next_draw_at = -math.inf
        self._stop = threading.Event()
        self._drawn_version = -1
        self._figures: dict[str, Any] | None = None
        self._counts = (0, 0, 0, None, "")
        self._events_at_pause = 0
        self._conversation_ids: list[str] = []
        self._conversations: list[dict[str, Any]] = []
        self._conversations_at = -math.inf

    # -- layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield UsageGauge(id="gauge")
        yield TokenTimeline(id="timeline")
        yield PaneBar(PANES, id="pane-bar")
        with Container(id="panes"):
            yield BreakdownPane(id="breakdown", classes="pane")
            yield CompactionLog(id="compactions", classes="pane")
            yield ViewListing(id="view", classes="pane")
            yield ConversationPicker(id="conversations", classes="pane")
        yield StatusLine(id="status")
        yield Footer()

    def on_mount(self) -> None:
        for key, (pane, title) in enumerate(PANES, start=1):
            self.query_one(f"#{pane}").border_title = f"{key} {title}"
        self._show_pane(self.pane)
        self.redraw()
        self.set_interval(1 / self.refresh_per_second, self._tick, name="redraw")
        if self.source is not None:
            self.run_worker(
                self._run_source, name="source", group="source", thread=True, exit_on_error=False
            )

    def on_unmount(self) -> None:
        self._stop.set()

    # -- the source ------------------------------------------------------------------------

    @property
    def stopping(self) -> threading.Event:
        """Set when the app exits: the source's ``run`` returns soon after."""
        return self._stop

    def _run_source(self) -> None:
        assert self.source is not None
        try:
            self.source.run(self.inspector, self._stop)
        except Exception as error:  # shown on the status line; the screen stays up
            self.inspector.set_status(f"source stopped: {type(error).__name__}: {error}")

    @property
    def up_to_date(self) -> bool:
        """The screen shows the inspector's latest figures (or is paused)."""
        return self.paused or self._drawn_version == self.inspector.version

    def _source_label(self) -> str:
        if self.inspector.source:
            return self.inspector.source
        return self.source.description if self.source is not None else "the stream"

    # -- drawing ---------------------------------------------------------------------------

    def _tick(self) -> None:
        try:
            self._tick_once()
        except NoMatches:  # the app is closing: its screen is gone before its timers stop
            return

    def _tick_once(self) -> None:
        if self.paused:
            self._draw_status()
        elif (
            self.inspector.version != self._drawn_version and time.monotonic() >= self._next_draw_at
        ):
            started = time.monotonic()
            self.redraw()
            self.call_after_refresh(self._drawn, started)

    def _drawn(self, started: float) -> None:
        """The screen shows a redraw begun at ``started``: space the next one by its cost."""
        cost = time.monotonic() - started
        self.draw_seconds = cost
        self._next_draw_at = started + cost / DRAWING_SHARE

    def redraw(self) -> None:
        """Show the inspector's figures now."""
        inspector = self.inspector
        self._drawn_version = inspector.version
        self._counts = (
            inspector.events,
            inspector.skipped,
            inspector.unknown,
            inspector.last_problem,
            inspector.status,
        )
        try:
            self.shown, figures = self._choose()
            self._figures = figures
            if figures is None and self.picked is not None:
                waiting = f"waiting for events of {self.picked} from {self._source_label()}"
            else:
                waiting = f"waiting for events from {self._source_label()}"
            self.query_one(UsageGauge).show(figures, waiting)
            self.query_one(TokenTimeline).show(figures)
            self.query_one(BreakdownPane).show(figures)
            self.query_one(CompactionLog).show(figures)
            self.query_one(ViewListing).show(figures)
            self._draw_conversations()
        except Exception as error:  # nothing in a stream may stop the inspector
            self.draw_errors += 1
            self.log.error(f"redraw failed: {error!r}")
        self.redraws += 1
        self._draw_status()

    def _choose(self) -> tuple[str | None, dict[str, Any] | None]:
        """The conversation to show and its figures."""
        inspector = self.inspector
        if self.picked is not None:
            return self.picked, inspector.conversation(self.picked)
        latest = inspector.latest_id()
        if latest is None:
            return None, None
        latest_figures = inspector.conversation(latest)
        if self.shown is not None and self.shown != latest and latest_figures is not None:
            figures = inspector.conversation(self.shown)
            if figures is not None:
                quiet = latest_figures["last_event_ts"] - figures["last_event_ts"]
                if quiet < FOLLOW_QUIET_S:
                    return self.shown, figures
        return latest, latest_figures

    def _draw_conversations(self, *, now: bool = False) -> None:
        ids = self.inspector.conversation_ids()
        moment = time.monotonic()
        recent = moment - self._conversations_at < CONVERSATIONS_EVERY_S
        if now or ids != self._conversation_ids or not recent:
            self._conversation_ids, self._conversations_at = ids, moment
            self._conversations = self.inspector.snapshot(timeline=False)["conversations"]
        shown = self._figures
        rows = [
            shown if shown is not None and row["conversation_id"] == self.shown else row
            for row in self._conversations
        ]
        self.query_one(ConversationPicker).show(rows, self.shown, following=self.picked is None)

    def _draw_status(self) -> None:
        events_seen, skipped, unknown, last_problem, status = self._counts
        figures = self._figures or {}
        self.query_one(StatusLine).show(
            Status(
                source=status or (self.source.description if self.source else ""),
                events=events_seen,
                skipped=skipped,
                last_problem=last_problem,
                unknown=unknown,
                conversation=self.shown,
                conversations=len(self._conversation_ids),
                following=self.picked is None,
                violations=figures.get("violations", 0),
                paused=self.paused,
                arrived_while_paused=self.inspector.events - self._events_at_pause,
            )
        )

    # -- panes -----------------------------------------------------------------------------

    def _show_pane(self, pane: str, *, focus: bool = True) -> None:
        self.pane = pane
        for name, _ in PANES:
            self.query_one(f"#{name}").set_class(name == pane, "-active")
        self.query_one(PaneBar).show(pane)
        if focus:
            self.call_after_refresh(self._focus_pane)

    def _focus_pane(self) -> None:
        pane = self.query_one(f"#{self.pane}")
        targets = [pane] if pane.can_focus else list(pane.query("SyncedTable"))
        target = next((widget for widget in targets if widget.focusable), None)
        self.set_focus(target, scroll_visible=False)

    def _pane_of(self, widget: Widget) -> str | None:
        for node in (widget, *widget.ancestors):
            if isinstance(node, Widget) and node.has_class("pane"):
                return node.id
        return None

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        pane = self._pane_of(event.widget)
        if pane is not None and pane != self.pane:
            self._show_pane(pane, focus=False)

    def on_pane_bar_chosen(self, message: PaneBar.Chosen) -> None:
        self._show_pane(message.pane)

    def action_show_pane(self, pane: str) -> None:
        """Show ``pane`` (and focus it)."""
        if pane in dict(PANES):
            self._show_pane(pane)

    def action_next_pane(self) -> None:
        """The pane after the active one."""
        self._step_pane(+1)

    def action_previous_pane(self) -> None:
        """The pane before the active one."""
        self._step_pane(-1)

    def _step_pane(self, step: int) -> None:
        names = [name for name, _ in PANES]
        self._show_pane(names[(names.index(self.pane) + step) % len(names)])

    # -- conversations ---------------------------------------------------------------------

    def action_cycle_conversation(self, step: int) -> None:
        """Show (and hold) the next or previous conversation in the order first seen."""
        ids = self.inspector.conversation_ids()
        if not ids:
            self.bell()
            return
        index = ids.index(self.shown) if self.shown in ids else (-1 if step > 0 else 0)
        self._pick(ids[(index + step) % len(ids)])

    def action_follow_latest(self) -> None:
        """Follow the most recently active conversation again."""
        self._pick(None)

    def on_conversation_picker_picked(self, message: ConversationPicker.Picked) -> None:
        self._pick(message.conversation_id)

    def _pick(self, conversation: str | None) -> None:
        self.picked = conversation
        self.redraw()
        self._draw_conversations(now=True)

    # -- keys ------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("faster", "slower"):
            return callable(getattr(self.source, action, None))
        # Over the help screen, tab is the help's own.
        return not (action in ("next_pane", "previous_pane") and len(self.screen_stack) > 1)

    def action_toggle_pause(self) -> None:
        """Freeze the screen (and a pausable source), or go on."""
        self.paused = not self.paused
        if self.source is not None and self.source.pausable:
            self.source.set_paused(self.paused)
        if self.paused:
            self._events_at_pause = self.inspector.events
            self._draw_status()
        else:
            self.redraw()

    def action_help(self) -> None:
        """Keys and what each figure means."""
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_faster(self) -> None:
        """Replay faster."""
        self._change_speed("faster")

    def action_slower(self) -> None:
        """Replay slower."""
        self._change_speed("slower")

    def _change_speed(self, name: str) -> None:
        change = getattr(self.source, name, None)
        if not callable(change):
            return
        speed = change()
        pace = "as fast as possible" if speed == 0 else f"{speed:g}x"
        self.notify(f"replay speed: {pace}", timeout=2)

    async def action_quit(self) -> None:
        """Stop the source and leave."""
        self._stop.set()
        self.exit()
