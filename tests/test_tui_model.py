"""The inspector's model: figures from stream events, bounded memory, and no line can break it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit import events
from ctxkit.events import Event
from ctxkit.telemetry.stream import encode_event
from ctxkit.tui import model
from ctxkit.tui.model import Inspector, parse_line


def line(name: str, ts: float = 1000.0, **data: Any) -> str:
    return json.dumps({"v": 1, "ts": ts, "event": name, "data": data})


def view(tokens: int, ts: float = 1000.0, budget: int = 10_000, **extra: Any) -> str:
    data = {
        "message_count": 10,
        "token_count": tokens,
        "budget": budget,
        "history_messages": 12,
        "history_tokens": tokens + 500,
        "compacted": False,
        "compact_threshold": 0.7,
        "breakdown": {"system": 100, "user": tokens - 103},
        "kinds": {"kept": 10, "shortened": 0, "summary": 0},
        "duration_s": 0.001,
        "conversation_id": "c1",
        **extra,
    }
    return line(events.VIEW, ts, **data)


def compaction(before: int, after: int, ts: float = 1001.0, conversation: str = "c1") -> list[str]:
    return [
        line(events.PRE_COMPACT, ts, message_count=40, token_count=before, budget=10_000,
             strategy="truncate", conversation_id=conversation),
        line(events.POST_COMPACT, ts, message_count=22, token_count=after, budget=10_000,
             strategy="truncate", tokens_before=before, tokens_saved=before - after,
             duration_s=0.004, units_dropped=6, units_truncated=1, units_summarized=0,
             conversation_id=conversation),
    ]  # fmt: skip


def only(inspector: Inspector) -> dict[str, Any]:
    (conversation,) = inspector.snapshot()["conversations"]
    return conversation


def test_view_figures_room_and_levels() -> None:
    inspector = Inspector()
    inspector.feed_lines([view(5_000, 1.0), view(5_500, 2.0), view(6_100, 3.0)])
    figures = only(inspector)
    assert figures["tokens"] == 6_100
    assert figures["ratio"] == pytest.approx(0.61)
    assert figures["compact_at_tokens"] == 7_000
    assert figures["room_until_compaction"] == 900
    assert figures["room_until_limit"] == 3_900
    # Growth 500 then 600: 550 a turn, so one whole turn fits before compaction.
    assert figures["turns"]["average_growth_tokens"] == 550
    assert figures["turns"]["left_before_compaction"] == 1
    assert figures["level"] == "warning"  # within 10 % of the budget below the threshold
    assert [point[1] for point in figures["timeline"]] == [5_000, 5_500, 6_100]


@pytest.mark.parametrize(
    ("tokens", "level"),
    [(1_000, "ok"), (5_999, "ok"), (6_000, "warning"), (7_000, "compacting"), (10_000, "limit")],
)
def test_level_follows_threshold_and_limit(tokens: int, level: str) -> None:
    inspector = Inspector()
    inspector.feed_lines([view(tokens)])
    assert only(inspector)["level"] == level


def test_the_cache_figure_and_its_history_come_from_the_prefix_kept() -> None:
    inspector = Inspector()
    inspector.feed_lines([view(2_000)])  # a stream from before prefixes were measured
    assert only(inspector)["cache"] is None
    inspector.feed_lines(
        [
            view(3_000, ts=1001.0, prefix_tokens=0, previous_tokens=0),
            view(4_000, ts=1002.0, prefix_tokens=3_000, previous_tokens=3_000),
            view(2_500, ts=1003.0, prefix_tokens=1_000, previous_tokens=4_000),
        ]
    )
    figures = only(inspector)
    assert figures["cache"] == {
        "share": round(4_000 / 9_500, 4),
        "kept_tokens": 4_000,
        "view_tokens": 9_500,
        "last": 0.25,
    }
    assert figures["cache_history"] == [[1002.0, 1.0], [1003.0, 0.25]]


def test_a_bad_prefix_figure_skips_the_view() -> None:
    inspector = Inspector()
    inspector.feed_lines([view(3_000, prefix_tokens=-1, previous_tokens=10)])
    assert inspector.snapshot()["skipped"] == 1


def test_breakdown_has_free_and_reserved_and_adds_up_to_the_budget() -> None:
    inspector = Inspector()
    inspector.feed_lines([view(4_003)])
    breakdown = only(inspector)["breakdown"]
    assert list(breakdown) == list(model.BREAKDOWN_CATEGORIES)
    assert breakdown["room"] == 7_000 - 4_003
    assert breakdown["reserved"] == 3_000
    used = sum(v for k, v in breakdown.items() if k not in ("room", "reserved"))
    assert used + breakdown["room"] + breakdown["reserved"] == 10_000 - 3  # reply priming


def test_compaction_enters_the_log_with_before_and_after() -> None:
    inspector = Inspector()
    inspector.feed_lines([view(6_900), *compaction(7_400, 4_100), view(4_100, compacted=True)])
    figures = only(inspector)
    (entry,) = figures["compaction_log"]
    assert entry["tokens_before"] == 7_400
    assert entry["tokens_after"] == 4_100
    assert entry["messages_before"] == 40
    assert entry["messages_after"] == 22
    assert entry["saved"] == 3_300
    assert entry["units_dropped"] == 6
    assert figures["compactions"] == 1
    assert figures["tokens_saved"] == 3_300
    assert figures["timeline"][-1][2] is True  # the marker on the chart
    # A compaction's drop is not growth: the estimate only counts growing views.
    assert figures["turns"]["average_growth_tokens"] is None


def test_conversations_are_kept_apart_and_the_latest_is_known() -> None:
    inspector = Inspector()
    inspector.feed_lines([view(1_000, 1.0), view(2_000, 2.0, conversation_id="c2")])
    assert inspector.conversation_ids() == ["c1", "c2"]
    assert inspector.latest_id() == "c2"
    assert inspector.conversation("c1")["tokens"] == 1_000
    assert inspector.conversation("nope") is None


def test_events_without_conversation_id_go_to_one_unnamed_conversation() -> None:
    inspector = Inspector()
    inspector.feed_lines([view(1_000, conversation_id=None), view(1_200, conversation_id="")])
    assert inspector.conversation_ids() == [model.UNNAMED]


def test_listing_is_taken_from_the_view() -> None:
    rows = [
        {"index": 0, "count": 1, "role": "system", "tokens": 100, "fate": "kept"},
        {"index": 1, "count": 30, "role": "user", "tokens": 9_000, "fate": "dropped"},
        {"index": 31, "count": 1, "role": "tool", "tokens": 400, "fate": "truncated"},
    ]
    inspector = Inspector()
    inspector.feed_lines([view(3_000, listing=rows, listing_omitted=4)])
    figures = only(inspector)
    assert figures["listing"] == rows
    assert figures["listing_omitted"] == 4
    inspector.feed_lines([view(3_100)])  # a view without a listing keeps the last one shown
    assert only(inspector)["listing"] == rows


def test_a_malformed_listing_is_reported_and_the_view_still_counts() -> None:
    inspector = Inspector()
    inspector.feed_lines([view(1_000, listing=[{"fate": "eaten", "tokens": 1}])])
    figures = only(inspector)
    assert figures["tokens"] == 1_000
    assert figures["listing"] is None
    assert "fate" in figures["listing_problem"]


def test_only_the_newest_listing_rows_are_kept() -> None:
    rows = [
        {"index": n, "count": 1, "role": "user", "tokens": 5, "fate": "kept"}
        for n in range(model.LISTING_ROWS_KEPT + 7)
    ]
    inspector = Inspector()
    inspector.feed_lines([view(1_000, listing=rows, listing_omitted=3)])
    figures = only(inspector)
    assert len(figures["listing"]) == model.LISTING_ROWS_KEPT
    assert figures["listing"][-1]["index"] == model.LISTING_ROWS_KEPT + 6
    assert figures["listing_omitted"] == 3 + 7


@pytest.mark.parametrize(
    "bad",
    [
        b"not json",
        b"\xff\xfe",
        b"[1, 2]",
        b'{"event": "ctxkit:view", "ts": 1}',
        b'{"event": 7, "data": {}, "ts": 1}',
        b'{"event": "ctxkit:view", "data": {}, "ts": "noon"}',
        b'{"event": "ctxkit:view", "data": {}, "ts": NaN}',
        b"[" * 100_000,
    ],
)
def test_malformed_lines_are_skipped_and_counted(bad: bytes) -> None:
    inspector = Inspector()
    inspector.feed_lines([view(1_000), bad, view(1_100)])
    assert inspector.skipped == 1
    assert inspector.last_problem
    assert only(inspector)["tokens"] == 1_100


@pytest.mark.parametrize(
    "data",
    [
        {"token_count": "many", "budget": 1, "message_count": 1},
        {"token_count": -5, "budget": 1, "message_count": 1},
        {"token_count": 1.5, "budget": 1, "message_count": 1},
        {"token_count": True, "budget": 1, "message_count": 1},
        {"budget": 1, "message_count": 1},
        {"token_count": 1, "budget": 1, "message_count": 1, "breakdown": []},
        {"token_count": 1, "budget": 1, "message_count": 1, "breakdown": {"user": "x"}},
        {"token_count": 1, "budget": 1, "message_count": 1, "compact_threshold": 7},
        {"token_count": 1, "budget": 1, "message_count": 1, "listing": {"rows": []}},
    ],
)
def test_a_bad_view_is_skipped_and_changes_nothing(data: dict[str, Any]) -> None:
    inspector = Inspector()
    inspector.feed_lines([view(1_000)])
    before = inspector.snapshot()
    inspector.feed_lines([line(events.VIEW, 2000.0, conversation_id="c1", **data)])
    after = inspector.snapshot()
    assert inspector.skipped == 1
    for key in ("conversations", "events"):
        assert after[key] == before[key]


def test_unknown_events_are_counted_apart() -> None:
    inspector = Inspector()
    inspector.feed_lines([line("ctxkit:from_the_future", x=1), view(1_000), "", "  "])
    assert inspector.unknown == 1
    assert inspector.skipped == 0
    assert inspector.events == 1


def test_ctxkits_own_events_the_inspector_does_not_show_are_not_unknown() -> None:
    """watch's stream carries ctxkit:usage, a guard's ctxkit:view_guarded: ctxkit's own."""
    inspector = Inspector()
    inspector.feed_lines(
        [line("ctxkit:usage", input_tokens=10), line("ctxkit:view_guarded", action="log")]
    )
    assert (inspector.unknown, inspector.events) == (0, 2)


def test_ring_buffers_and_conversation_cap_bound_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    inspector = Inspector()
    lines = []
    for step in range(model.TIMELINE_POINTS + 50):
        lines.append(view(1_000 + step, float(step)))
    for step in range(model.COMPACTIONS_KEPT + 5):
        lines.extend(compaction(8_000, 4_000, 10_000.0 + step))
    inspector.feed_lines(lines)
    figures = only(inspector)
    assert len(figures["timeline"]) == model.TIMELINE_POINTS
    assert figures["timeline"][-1][1] == 1_000 + model.TIMELINE_POINTS + 49
    assert len(figures["compaction_log"]) == model.COMPACTIONS_KEPT
    assert figures["compactions"] == model.COMPACTIONS_KEPT + 5  # the count is not capped

    many = [
        view(1_000, 20_000.0 + n, conversation_id=f"c{n}")
        for n in range(model.CONVERSATIONS_KEPT + 10)
    ]
    inspector.feed_lines(many)
    ids = inspector.conversation_ids()
    assert len(ids) == model.CONVERSATIONS_KEPT
    assert f"c{model.CONVERSATIONS_KEPT + 9}" in ids  # the newest stays, the stalest went


def test_the_stream_writer_and_the_inspector_agree() -> None:
    """A line as ctxkit.telemetry.stream writes it is read back to the same figures."""
    data = json.loads(view(3_000))["data"]
    written = encode_event(Event(events.VIEW, data, time=1234.5))
    name, parsed, ts = parse_line(written)
    assert (name, parsed, ts) == (events.VIEW, data, 1234.5)


def test_version_moves_with_every_batch_and_status_change() -> None:
    inspector = Inspector()
    start = inspector.version
    inspector.feed_lines([view(1_000)])
    inspector.set_status("following x")
    inspector.set_status("following x")  # no change, no redraw
    assert inspector.version == start + 2


def test_the_snapshot_is_json() -> None:
    inspector = Inspector("file.jsonl")
    inspector.feed_lines([view(6_900), *compaction(7_400, 4_100), "junk"])
    text = json.dumps(inspector.snapshot())
    assert json.loads(text)["skipped"] == 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=10,
)
payload_keys = st.sampled_from(
    ["token_count", "budget", "message_count", "compact_threshold", "breakdown", "kinds",
     "listing", "listing_omitted", "tokens_before", "tokens_saved", "duration_s",
     "conversation_id", "compacted", "units_dropped", "property", "history_messages"]
)  # fmt: skip
event_names = st.sampled_from(
    [events.VIEW, events.PRE_COMPACT, events.POST_COMPACT, events.INCLUDE,
     events.BUDGET_EXCEEDED, events.INVARIANT_VIOLATION, "other"]
)  # fmt: skip
stream_lines = st.one_of(
    st.binary(max_size=40),
    st.builds(
        lambda name, data, ts: json.dumps({"v": 1, "ts": ts, "event": name, "data": data}),
        event_names,
        st.dictionaries(payload_keys, json_values | st.integers(0, 50_000), max_size=8),
        st.floats(0, 2e9),
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(stream_lines, max_size=30))
def test_no_line_can_break_the_inspector(lines: list[str | bytes]) -> None:
    inspector = Inspector()
    inspector.feed_lines(lines)
    blank = sum(1 for item in lines if not item.strip())
    assert inspector.events + inspector.skipped + inspector.unknown + blank == len(lines)
    snapshot = inspector.snapshot()
    json.dumps(snapshot)  # whatever came in, the snapshot stays JSON
    for conversation in snapshot["conversations"]:
        assert conversation["tokens"] >= 0
        assert all(tokens >= 0 for tokens in conversation["breakdown"].values())
