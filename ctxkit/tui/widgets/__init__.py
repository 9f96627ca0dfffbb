"""The inspector's widgets, one per file; :mod:`ctxkit.tui.app` wires them together."""

from ctxkit.tui.widgets.breakdown import BreakdownPane
from ctxkit.tui.widgets.compactions import CompactionLog
from ctxkit.tui.widgets.conversations import ConversationPicker
from ctxkit.tui.widgets.gauge import UsageGauge
from ctxkit.tui.widgets.listing import ViewListing
from ctxkit.tui.widgets.pane_bar import PaneBar
from ctxkit.tui.widgets.status import Status, StatusLine
from ctxkit.tui.widgets.timeline import TokenTimeline

__all__ = [
    "BreakdownPane",
    "CompactionLog",
    "ConversationPicker",
    "PaneBar",
    "Status",
    "StatusLine",
    "TokenTimeline",
    "UsageGauge",
    "ViewListing",
]
