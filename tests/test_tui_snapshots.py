"""What the inspector looks like, pinned as SVG snapshots at 80x24 (one pane at a time) and
160x48 (the panes side by side), fed the deterministic stream of :mod:`tests.tui_cases`.

After a deliberate change of the screen: ``pytest tests/test_tui_snapshots.py
--snapshot-update``, then look at the new SVGs before committing them.
"""

from __future__ import annotations

import pytest

from ctxkit.tui.app import InspectorApp
from ctxkit.tui.model import Inspector
from ctxkit.tui.widgets import StatusLine
from tests.tui_cases import MALFORMED, T0, fed_inspector, use_utc, view


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> None:
    use_utc(monkeypatch)


@pytest.mark.parametrize(
    "keys",
    [
        pytest.param((), id="breakdown"),
        pytest.param(("2",), id="compactions"),
        pytest.param(("3",), id="view"),
        pytest.param(("4",), id="conversations"),
    ],
)
def test_main_screen_at_80x24(snap_compare, keys: tuple[str, ...]) -> None:
    assert snap_compare(InspectorApp(fed_inspector()), press=keys, terminal_size=(80, 24))


def test_main_screen_at_160x48(snap_compare) -> None:
    assert snap_compare(InspectorApp(fed_inspector()), terminal_size=(160, 48))


def test_paused_on_the_other_conversation(snap_compare) -> None:
    app = InspectorApp(fed_inspector())

    async def feed_while_paused(pilot) -> None:
        await pilot.press("c", "p")
        # Arrive while paused: counted on the status line, not shown.
        app.inspector.feed_lines([view(13_000, ts=T0 + 100), MALFORMED])
        while "1 event since" not in app.query_one(StatusLine).plain:  # the next tick says so
            await pilot.pause(0.02)

    assert snap_compare(app, run_before=feed_while_paused, terminal_size=(80, 24))


def test_waiting_for_events(snap_compare) -> None:
    assert snap_compare(InspectorApp(Inspector("events.jsonl")), terminal_size=(80, 24))


def test_help_screen(snap_compare) -> None:
    app = InspectorApp(fed_inspector())
    assert snap_compare(app, press=("question_mark",), terminal_size=(80, 24))
