"""The inspector's screen, driven with Textual's Pilot: figures from fed events, redraws
merged, pause, panes, help, conversations, and a source on its worker thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from textual.pilot import Pilot
from textual.widgets import DataTable

from ctxkit.tui.app import InspectorApp
from ctxkit.tui.help import HelpScreen
from ctxkit.tui.model import Inspector
from ctxkit.tui.sources import ReplaySource
from ctxkit.tui.widgets import (
    BreakdownPane,
    CompactionLog,
    ConversationPicker,
    PaneBar,
    StatusLine,
    TokenTimeline,
    UsageGauge,
    ViewListing,
)
from ctxkit.tui.widgets.gauge import _bar, _headline, _room
from ctxkit.tui.widgets.listing import NO_LISTING
from ctxkit.tui.widgets.timeline import fit_columns
from tests.tui_cases import (
    ALPHA_PERCENT,
    BETA_PERCENT,
    LISTING,
    MALFORMED,
    T0,
    alpha_lines,
    beta_lines,
    compaction,
    fed_inspector,
    line,
    on_event_loop,
    stream_lines,
    use_utc,
    view,
)

SIZE = (80, 24)


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> None:
    use_utc(monkeypatch)


async def until(pilot: Pilot, condition: Callable[[], bool]) -> None:
    """Let the app run until ``condition`` holds (at most 15 s: a redraw that takes 20 ms
    alone took over 3 s while both cores ran the rest of the suite, and failed CI once)."""
    deadline = time.monotonic() + 15
    while not condition():
        assert time.monotonic() < deadline, "the app never got there"
        await pilot.pause(0.02)
    await pilot.pause()


async def redrawn(pilot: Pilot, app: InspectorApp) -> None:
    """Wait until the screen shows the inspector's latest figures."""
    await until(pilot, lambda: app.up_to_date)


def gauge_text(app: InspectorApp) -> str:
    return app.query_one(UsageGauge).render().plain


def status_text(app: InspectorApp) -> str:
    return app.query_one(StatusLine).plain


class SpySource:
    """A source that feeds nothing, records pauses, and runs until told to stop."""

    description = "spy source"

    def __init__(self, pausable: bool = True) -> None:
        self.pausable = pausable
        self.paused: list[bool] = []
        self.thread: str | None = None
        self.ended = threading.Event()

    def run(self, inspector: Inspector, stop: threading.Event) -> None:
        self.thread = threading.current_thread().name
        stop.wait(10)
        self.ended.set()

    def set_paused(self, paused: bool) -> None:
        self.paused.append(paused)


# -- figures ------------------------------------------------------------------------------


@on_event_loop
async def test_the_gauge_shows_the_share_level_and_room_of_the_fed_events() -> None:
    app = InspectorApp(fed_inspector())
    async with app.run_test(size=SIZE) as pilot:
        gauge = app.query_one(UsageGauge)
        text = gauge_text(app)
        assert ALPHA_PERCENT in text
        assert "11,000 / 20,000 tokens" in text
        assert "room: 3,000 tokens until compaction (~1 turn), 9,000 until the limit" in text
        assert gauge.has_class("-ok")

        app.inspector.feed_lines([view(13_000, ts=T0 + 100)])  # 65%: near the threshold
        await redrawn(pilot, app)
        assert "65.0%" in gauge_text(app)
        assert gauge.level == "warning"
        assert gauge.has_class("-warning")
        assert not gauge.has_class("-ok")
        assert app.draw_errors == 0


@on_event_loop
async def test_a_compaction_fed_while_running_appears_in_the_log() -> None:
    before_compaction = alpha_lines()[:5]
    app = InspectorApp(fed_inspector(before_compaction))
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(CompactionLog).table
        assert table.row_count == 0

        pair = compaction(
            ts=T0 + 200, before=15_200, after=9_800, messages_before=64, messages_after=45
        )
        app.inspector.feed_lines(pair)
        await redrawn(pilot, app)

        assert table.row_count == 1
        cells = [str(cell) for cell in table.get_row_at(0)]
        assert cells[:5] == ["04:43:20", "15,200 → 9,800", "64 → 45", "5,400", "3.1"]
        assert cells[5:] == ["2", "3", "6", "truncate_outputs+summarize"]
        headers = [str(column.label) for column in table.columns.values()]
        assert headers[5:8] == ["dropped", "truncated", "summarized"]
        detail = str(app.query_one("#compactions-detail").render())
        assert detail == "truncate_outputs+summarize: units dropped 2, truncated 3, summarized 6"

        pair = compaction(
            ts=T0 + 300, before=14_100, after=9_000, messages_before=50, messages_after=40
        )
        app.inspector.feed_lines(pair)
        await redrawn(pilot, app)
        assert table.row_count == 2
        assert str(table.get_row_at(0)[0]) == "04:45:00", "newest first"
        await pilot.press("2", "down")  # the cursor stays on its compaction as rows arrive
        await pilot.pause()
        assert str(table.get_row_at(table.cursor_row)[0]) == "04:43:20"
        app.inspector.feed_lines(
            compaction(ts=T0 + 400, before=14_000, after=9_000, messages_before=9, messages_after=8)
        )
        await redrawn(pilot, app)
        assert table.row_count == 3
        assert str(table.get_row_at(table.cursor_row)[0]) == "04:43:20"


@on_event_loop
async def test_the_view_pane_lists_runs_as_ranges_and_says_when_there_is_no_listing() -> None:
    app = InspectorApp(fed_inspector())
    async with app.run_test(size=SIZE) as pilot:
        listing = app.query_one(ViewListing)
        rows = [[str(cell) for cell in listing.table.get_row_at(i)] for i in range(4)]
        assert rows == [
            ["0", "system", "103", "kept"],
            ["1-12", "mixed", "4,210", "dropped"],
            ["-", "user", "380", "summary"],
            ["13-40", "mixed", "18,344", "summarized"],
        ]
        await pilot.press("c")  # beta's producer sends no listing
        await pilot.pause()
        caption = str(listing.query_one("#view-caption").render())
        assert NO_LISTING in caption
        assert not listing.table.display

        # The model checks a listing only when shown, and says what is wrong with it.
        problem = "listing row without a known fate"
        listing.show({"messages": 3, "listing": None, "listing_problem": problem})
        await pilot.pause()
        caption = str(listing.query_one("#view-caption").render())
        assert caption.splitlines()[-1] == f"the latest listing is unreadable: {problem}"
        assert not listing.table.display


def shown_lines(table: DataTable) -> list[str]:
    """The table's lines as drawn: the header, then every row."""
    return [table.render_line(y).text for y in range(table.row_count + 1)]


@on_event_loop
async def test_a_cell_updated_in_place_is_never_cut() -> None:
    """A row's range grows (``1`` to ``1-12``, ``21`` to ``21-40``) and a level widens
    (``ok`` to ``warning``, then ``compacting``) while their rows stay put: each column
    widens with them, so the figures are drawn whole."""
    short = [{**row, "count": 1} for row in LISTING]
    lines = [*beta_lines(), view(8_000, ts=T0 + 60, listing=short)]
    app = InspectorApp(fed_inspector(lines))
    async with app.run_test(size=(120, 40)) as pilot:
        listing = app.query_one(ViewListing).table
        picker = app.query_one(ConversationPicker).table
        app.inspector.feed_lines([view(13_000, ts=T0 + 61, listing=LISTING)])
        await redrawn(pilot, app)
        await pilot.press("3")
        await pilot.pause()
        drawn = shown_lines(listing)
        assert drawn[2].split()[0] == "1-12"
        assert drawn[4].split()[0] == "13-40"
        await pilot.press("4")
        await pilot.pause()
        assert "warning" in shown_lines(picker)[2].split()
        app.inspector.feed_lines([view(14_500, ts=T0 + 62)])  # past 70%: compacting
        await redrawn(pilot, app)
        await pilot.pause()
        assert "compacting" in shown_lines(picker)[2].split()


def test_near_the_threshold_is_yellow_as_the_help_says() -> None:
    """Textual draws the 16 terminal colours in its own palette, where ``yellow`` is
    orange: the level's colour is a yellow that stays one, and the gauge's border agrees."""
    from rich.color import Color as RichColor
    from textual.color import Color

    from ctxkit.tui.help import FIGURES
    from ctxkit.tui.widgets.figures import LEVEL_STYLES

    def hue(red: int, green: int, blue: int) -> float:
        return Color(red, green, blue).hsl.h * 360

    warning = RichColor.parse(LEVEL_STYLES["warning"]).get_truecolor()
    compacting = RichColor.parse(LEVEL_STYLES["compacting"]).get_truecolor()
    assert 45 <= hue(*warning) <= 65, "yellow"
    assert hue(*compacting) < 40, "orange"
    assert "yellow within 10% of the compaction threshold" in dict(FIGURES)["gauge colour"]

    async def border() -> tuple[int, int, int]:
        app = InspectorApp(fed_inspector([view(13_000, ts=T0)]))
        async with app.run_test(size=SIZE):
            gauge = app.query_one(UsageGauge)
            assert gauge.has_class("-warning")
            return gauge.styles.border_left[1].rgb

    assert asyncio.run(border()) == tuple(warning)


# -- pause --------------------------------------------------------------------------------


@on_event_loop
async def test_pause_freezes_the_screen_and_pauses_a_pausable_source() -> None:
    source = SpySource(pausable=True)
    app = InspectorApp(fed_inspector(), source)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")
        assert source.paused == [True]
        app.inspector.feed_lines([view(13_000, ts=T0 + 100), view(13_100, ts=T0 + 101)])
        await pilot.pause(0.3)
        assert ALPHA_PERCENT in gauge_text(app), "the screen is frozen while paused"
        assert "PAUSED, 2 events since" in status_text(app)

        await pilot.press("p")
        assert source.paused == [True, False]
        await redrawn(pilot, app)
        assert "65.5%" in gauge_text(app)
        assert "PAUSED" not in status_text(app)


@on_event_loop
async def test_pause_leaves_a_live_source_alone() -> None:
    source = SpySource(pausable=False)
    app = InspectorApp(fed_inspector(), source)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")
        assert app.paused
        assert source.paused == []


# -- panes and help -----------------------------------------------------------------------


@on_event_loop
async def test_tab_and_number_keys_move_between_panes_one_at_a_time_at_80x24() -> None:
    app = InspectorApp(fed_inspector())
    async with app.run_test(size=SIZE) as pilot:

        def shown() -> list[str]:
            return [pane.id for pane in app.query(".pane") if pane.display]

        await pilot.pause()
        assert (app.pane, shown()) == ("breakdown", ["breakdown"])
        assert isinstance(app.focused, BreakdownPane)

        await pilot.press("tab")
        await pilot.pause()
        assert (app.pane, shown()) == ("compactions", ["compactions"])
        assert app.focused is app.query_one(CompactionLog).table
        assert app.query_one(PaneBar).active == "compactions"

        await pilot.press("3")
        await pilot.pause()
        assert (app.pane, shown()) == ("view", ["view"])
        await pilot.press("shift+tab")
        await pilot.press("shift+tab")
        await pilot.press("shift+tab")
        await pilot.pause()
        assert app.pane == "conversations", "shift+tab wraps around"
        await pilot.press("tab")
        assert app.pane == "breakdown"


@on_event_loop
async def test_at_160x48_the_panes_sit_side_by_side_and_focus_picks_the_pane() -> None:
    app = InspectorApp(fed_inspector())
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert all(pane.display for pane in app.query(".pane"))
        assert not app.query_one(PaneBar).display
        await pilot.click("#conversations-table")
        await pilot.pause()
        assert app.pane == "conversations"
        assert app.query_one("#conversations").has_class("-active")


@on_event_loop
async def test_question_mark_opens_help_and_escape_or_question_mark_closes_it() -> None:
    app = InspectorApp(fed_inspector())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("tab")  # the help's own; the panes behind stay put
        assert app.pane == "breakdown"
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark")
        await pilot.press("question_mark")
        assert not isinstance(app.screen, HelpScreen)


# -- conversations ------------------------------------------------------------------------


@on_event_loop
async def test_conversation_keys_show_the_other_conversation_and_f_follows_again() -> None:
    app = InspectorApp(fed_inspector())
    async with app.run_test(size=SIZE) as pilot:
        assert app.shown == "alpha"
        await pilot.press("c")
        await pilot.pause()
        assert app.shown == "beta"
        assert BETA_PERCENT in gauge_text(app)
        assert "41,000 / 100,000 tokens" in gauge_text(app)
        assert "conversation beta of 2 (picked)" in status_text(app)

        app.inspector.feed_lines([view(12_000, ts=T0 + 100)])  # alpha is active, beta held
        await redrawn(pilot, app)
        assert app.shown == "beta"

        await pilot.press("right_square_bracket")
        assert app.shown == "alpha"
        await pilot.press("left_square_bracket")
        assert app.shown == "beta"
        await pilot.press("f")
        await pilot.pause()
        assert app.shown == "alpha"
        assert "60.0%" in gauge_text(app)
        assert "following the latest" in status_text(app)


@on_event_loop
async def test_enter_in_the_conversations_pane_picks_the_row() -> None:
    app = InspectorApp(fed_inspector())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await pilot.pause()
        assert app.focused is app.query_one(ConversationPicker).table
        await pilot.press("enter")  # the cursor starts on the first row: beta
        await pilot.pause()
        assert app.shown == "beta"
        assert app.picked == "beta"


@on_event_loop
async def test_the_conversations_row_on_screen_agrees_with_the_gauge_at_once() -> None:
    app = InspectorApp(fed_inspector())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.inspector.feed_lines([view(12_500, ts=T0 + 100)])
        await redrawn(pilot, app)
        table = app.query_one(ConversationPicker).table
        alpha = [str(cell) for cell in table.get_row("alpha")]
        assert alpha[:4] == ["▶", "alpha", "12,500", "62.5%"]
        assert "62.5%" in gauge_text(app)


@on_event_loop
async def test_a_conversation_given_at_start_is_held() -> None:
    app = InspectorApp(fed_inspector(), conversation="beta")
    async with app.run_test(size=SIZE):
        assert app.shown == "beta"
        assert BETA_PERCENT in gauge_text(app)


@on_event_loop
async def test_following_does_not_flicker_between_two_busy_conversations() -> None:
    app = InspectorApp(fed_inspector())
    async with app.run_test(size=SIZE) as pilot:
        assert app.shown == "alpha"
        beta = dict(conversation="beta", budget=100_000, threshold=0.8)
        app.inspector.feed_lines([view(42_000, ts=T0 + 67.5, **beta)])  # alpha spoke 0.5 s ago
        await redrawn(pilot, app)
        assert app.shown == "alpha"
        app.inspector.feed_lines([view(43_000, ts=T0 + 70, **beta)])  # alpha quiet for 3 s
        await redrawn(pilot, app)
        assert app.shown == "beta"


# -- the status line and odd streams ------------------------------------------------------


@on_event_loop
async def test_a_malformed_line_is_counted_on_the_status_line() -> None:
    app = InspectorApp(fed_inspector())
    async with app.run_test(size=SIZE) as pilot:
        assert "malformed" not in status_text(app)
        app.inspector.feed_lines([MALFORMED])
        await redrawn(pilot, app)
        assert "1 malformed line skipped" in status_text(app)
        assert "last skipped: not JSON" in status_text(app)
        app.inspector.feed_lines([MALFORMED, "[1, 2]"])
        await redrawn(pilot, app)
        assert "3 malformed lines skipped" in status_text(app)
        assert ALPHA_PERCENT in gauge_text(app)


@on_event_loop
async def test_without_events_the_screen_says_it_is_waiting() -> None:
    app = InspectorApp(Inspector("events.jsonl"))
    async with app.run_test(size=SIZE):
        assert "waiting for events from events.jsonl" in gauge_text(app)
        assert app.query_one(CompactionLog).table.row_count == 0
        assert app.draw_errors == 0


@pytest.mark.parametrize(
    "lines",
    [
        pytest.param([view(500, ts=T0, budget=0, threshold=None)], id="budget 0"),
        pytest.param([view(25_000, ts=T0)], id="over the budget"),
        pytest.param([view(1, ts=T0, threshold=1.0)], id="threshold at the limit"),
        pytest.param([view(0, ts=T0)] * 3, id="no tokens"),
        pytest.param(
            [
                line(
                    "ctxkit:view",
                    {
                        "message_count": 1,
                        "token_count": 10,
                        "budget": 100,
                        "conversation_id": "[bold red]not markup[/]",
                        "breakdown": {"[/]": 10},
                        "listing": [{"index": 0, "role": "[/b]", "tokens": 10, "fate": "kept"}],
                    },
                    T0,
                ),
                *compaction(
                    ts=T0 + 1,
                    before=10,
                    after=5,
                    messages_before=1,
                    messages_after=1,
                    conversation="[bold red]not markup[/]",
                ),
                line("ctxkit:from_the_future", {}, T0 + 2),
            ],
            id="markup in stream strings",
        ),
    ],
)
@on_event_loop
async def test_odd_streams_are_drawn_without_errors(lines: list[str]) -> None:
    app = InspectorApp(fed_inspector(lines))
    async with app.run_test(size=SIZE) as pilot:
        for key in ("2", "3", "4", "c"):
            await pilot.press(key)
        await pilot.pause()
        drawn = [app.query_one(kind) for kind in (UsageGauge, TokenTimeline, BreakdownPane)]
        for widget in drawn:
            widget.render()
        assert app.draw_errors == 0
        assert all(widget.draw_errors == 0 for widget in drawn)


_row = st.fixed_dictionaries(
    {
        "index": st.none() | st.integers(0, 10**6),
        "count": st.integers(1, 10**4),
        "role": st.text(max_size=12),
        "tokens": st.integers(0, 10**9),
        "fate": st.sampled_from(["kept", "truncated", "summary", "dropped", "summarized"]),
    }
)


@given(
    tokens=st.lists(st.integers(0, 10**9), min_size=1, max_size=40),
    budget=st.integers(0, 10**9),
    threshold=st.none() | st.floats(0.01, 1.0),
    width=st.integers(1, 240),
    listing=st.none() | st.lists(_row, max_size=5),
)
def test_any_accepted_view_draws_at_any_width(
    tokens: list[int], budget: int, threshold: float | None, width: int, listing: list | None
) -> None:
    inspector = Inspector()
    inspector.feed_lines(
        [
            view(n, ts=T0 + i, budget=budget, threshold=threshold, listing=listing)
            for i, n in enumerate(tokens)
        ]
    )
    assert inspector.skipped == 0
    figures = inspector.conversation("alpha")
    assert figures is not None
    assert _bar(figures, width).cell_len == max(2, width)
    _headline(figures, width)
    _room(figures)
    timeline = TokenTimeline()
    timeline.points, timeline.budget, timeline.threshold = figures["timeline"], budget, threshold
    drawn = timeline.draw(width, 5)
    assert timeline.draw_errors == 0
    assert len(drawn.plain.splitlines()) == 5, "caption, three rows of chart, marks"


def test_the_headline_shows_the_cache_figure_and_the_timeline_its_history() -> None:
    figures = {"tokens": 3_000, "budget": 10_000, "level": "ok", "cache": {"share": 0.853}}
    assert "cache 85%" in _headline(figures, 120).plain
    assert "cache" not in _headline({**figures, "cache": None}, 120).plain
    timeline = TokenTimeline()
    timeline.points, timeline.budget = [[T0, 1_000, False], [T0 + 1, 3_000, True]], 10_000
    timeline.cache = [[T0 + 1, 0.25]]
    assert "cache kept 25%" in timeline.draw(160, 5).plain.splitlines()[0]
    timeline.cache = []
    assert "cache" not in timeline.draw(160, 5).plain


def test_the_timeline_fits_many_views_to_the_width_keeping_peaks_and_compactions() -> None:
    points = [[T0 + i, i % 100, i == 537] for i in range(600)]
    fitted = fit_columns(points, 60)
    assert len(fitted) == 60
    assert max(tokens for tokens, _ in fitted) == 99
    assert [column for column, (_, marked) in enumerate(fitted) if marked] == [53]
    few = fit_columns(points[:10], 60)
    assert few == [(i, False) for i in range(10)], "a column per view while they fit"


# -- redraws and the source ---------------------------------------------------------------


@on_event_loop
async def test_a_burst_of_events_is_merged_into_at_most_the_refresh_rate() -> None:
    app = InspectorApp(fed_inspector(), refresh_per_second=10)
    async with app.run_test(size=SIZE) as pilot:
        await redrawn(pilot, app)
        idle = app.redraws
        await pilot.pause(0.35)
        assert app.redraws == idle, "no new events, no redraw"

        burst = [view(2_000 + i, ts=T0 + 100 + i / 1_000) for i in range(5_000)]

        def feed() -> None:  # one change of version per event, as a slow follower makes
            for event in burst:
                app.inspector.feed_lines([event])

        start = time.monotonic()
        feeder = threading.Thread(target=feed)
        feeder.start()
        while feeder.is_alive():
            await pilot.pause(0.01)
        await redrawn(pilot, app)
        elapsed = time.monotonic() - start

        redraws = app.redraws - idle
        assert app.inspector.version >= 5_000
        assert 1 <= redraws <= elapsed * 10 + 2
        assert "6,999 / 20,000 tokens" in gauge_text(app)


@on_event_loop
async def test_a_replay_source_feeds_the_screen_from_its_worker_thread(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(stream_lines()) + "\n")
    source = ReplaySource(events, speed=0)
    app = InspectorApp(Inspector(str(events)), source)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: source.finished)
        await redrawn(pilot, app)
        assert ALPHA_PERCENT in gauge_text(app)
        assert app.query_one(CompactionLog).table.row_count == 1
        assert f"replayed {events} to its end" in status_text(app)


@on_event_loop
async def test_the_source_runs_on_a_worker_thread_and_stops_when_q_quits() -> None:
    source = SpySource()
    app = InspectorApp(Inspector(), source)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.1)
        assert source.thread is not None
        assert source.thread != threading.current_thread().name
        await pilot.press("q")
        await pilot.pause()
        assert app.stopping.is_set()
        assert not app.is_running
    assert await asyncio.to_thread(source.ended.wait, 5)


@on_event_loop
async def test_any_exit_stops_the_source() -> None:
    source = SpySource()
    app = InspectorApp(Inspector(), source)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.1)
        app.exit()  # as ctrl+c does, not through the q binding
    assert app.stopping.is_set()
    assert await asyncio.to_thread(source.ended.wait, 5)


class BrokenSource(SpySource):
    def run(self, inspector: Inspector, stop: threading.Event) -> None:
        raise OSError("the disk went away")


@on_event_loop
async def test_a_source_that_fails_is_reported_and_the_screen_stays_up() -> None:
    app = InspectorApp(fed_inspector(), BrokenSource())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "source stopped" in status_text(app))
        assert "source stopped: OSError: the disk went away" in status_text(app)
        assert ALPHA_PERCENT in gauge_text(app)
        assert app.is_running


@on_event_loop
async def test_plus_and_minus_change_a_replay_speed_and_are_hidden_without_one(
    tmp_path: Path,
) -> None:
    events = tmp_path / "events.jsonl"
    # A long gap holds the replay in its wait, so the speed keys act on a running source.
    events.write_text(view(1_000, ts=T0) + "\n" + view(2_000, ts=T0 + 3_600) + "\n")
    source = ReplaySource(events, speed=1.0)
    app = InspectorApp(Inspector(), source)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("plus")
        assert source.speed == 2.0
        await pilot.press("minus")
        await pilot.press("minus")
        assert source.speed == 0.5
        assert app.check_action("faster", ())

    bare = InspectorApp(fed_inspector())
    async with bare.run_test(size=SIZE) as pilot:
        assert not bare.check_action("faster", ())
        await pilot.press("plus")  # nothing to speed up: nothing happens
        assert bare.draw_errors == 0


def test_refresh_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="refresh_per_second"):
        InspectorApp(Inspector(), refresh_per_second=0)
