"""What ``ctxkit watch`` holds before it audits (:mod:`ctxkit.audit.settle`): each record waits
the settle time after its own arrival, a span takes its log records with it, and a log record
waits for its span a bounded time; and the audit takes requests in any arrival order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.audit import Auditor, Request
from ctxkit.audit.otlp import Record
from ctxkit.audit.settle import Settling


def _span(span_id: str, trace: str = "t", recorded: int = 0) -> Record:
    return Record("span", "chat", recorded, trace, span_id, "", {}, "x", {})


def _log(span_id: str, trace: str = "t") -> Record:
    return Record("log", "gen_ai.user.message", 0, trace, span_id, "", {}, "x", {})


def _names(ripe: list) -> list[tuple[str, str]]:
    return [(record.kind, record.span_id) for record, _ in ripe]


def test_each_record_waits_the_settle_time_after_its_own_arrival():
    """Steady traffic never holds back what arrived earlier: the stream need not go quiet."""
    held = Settling(2.0, hold_at_most=6)
    for second in range(10):
        held.add(float(second), [_span(f"s{second}", recorded=second)], "w")
    assert _names(held.ripe(5.0)) == [
        ("span", "s0"),
        ("span", "s1"),
        ("span", "s2"),
        ("span", "s3"),
    ]
    assert held.held == 6
    assert _names(held.ripe(5.5)) == []


def test_a_span_takes_its_log_records_whenever_they_came():
    held = Settling(1.0, hold_at_most=6)
    held.add(0.0, [_log("a")], "logs")  # before its span, as log exporters often send
    held.add(0.5, [_span("a")], "spans")
    held.add(1.2, [_log("a")], "logs")  # after it, within its settle time
    assert _names(held.ripe(1.0)) == []  # the log's own time is not the span's
    assert _names(held.ripe(1.6)) == [("span", "a"), ("log", "a"), ("log", "a")]
    assert held.held == 0


def test_a_log_record_whose_span_never_comes_goes_alone_after_the_longest_wait():
    held = Settling(1.0, hold_at_most=3)
    held.add(0.0, [_log("lost")], "logs")
    assert _names(held.ripe(2.9)) == []
    assert _names(held.ripe(3.0)) == [("log", "lost")]


def test_spans_of_two_traces_with_one_span_id_keep_their_own_logs():
    held = Settling(1.0, hold_at_most=6)
    held.add(0.0, [_span("s", "t1"), _log("s", "t2")], "w")
    assert _names(held.ripe(1.0)) == [("span", "s")]
    assert _names(held.ripe(10.0)) == [("log", "s")]


def test_everything_is_released_on_stop():
    held = Settling(60.0, hold_at_most=6)
    held.add(0.0, [_span("a"), _span("b"), _log("c")], "w")
    assert held.held == 3
    assert len(held.ripe(1.0, everything=True)) == 3
    assert held.held == 0


_TOOL = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
CONVERSATION = [
    [{"role": "user", "content": "a"}],
    [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": None, "tool_calls": [_TOOL]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    ],
    [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": None, "tool_calls": [_TOOL]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "b"},
    ],
    [{"role": "user", "content": "b"}],
    [{"role": "user", "content": "b"}, {"role": "assistant", "content": "ok"}],
]


@settings(max_examples=80, deadline=None)
@given(order=st.permutations(range(len(CONVERSATION))))
def test_requests_in_any_arrival_order_are_audited_without_a_crash(order):
    """A request older than one already audited is checked alone; what the next request is
    compared with stays the newest one's (a late request once left it half-updated)."""
    auditor = Auditor()
    for position in order:
        request = Request(
            CONVERSATION[position], position, "w", "gpt-4o", key="k", keyed_by="session.id",
            api="openai",
        )  # fmt: skip
        auditor.add(request)
    (audit,) = auditor.conversations.values()
    assert audit.requests == len(CONVERSATION)
    assert all(f.property != "tool_pair_integrity" for f in audit.findings)


def test_a_batch_delivered_late_goes_with_the_newer_one_it_was_recorded_before():
    """A request recorded at t=1 that arrives after one recorded at t=5 (batches delivered
    out of order) is released with it, so the conversation checks them in recorded order."""
    held = Settling(2.0, hold_at_most=6)
    newer = Record("span", "chat", 5, "t", "new", "", {}, "x", {})
    older = Record("span", "chat", 1, "t", "old", "", {}, "x", {})
    later = Record("span", "chat", 9, "t", "later", "", {}, "x", {})
    held.add(0.0, [newer], "w")
    held.add(1.5, [older, later], "w")
    assert sorted(r.span_id for r, _ in held.ripe(2.0)) == ["new", "old"]
    assert held.held == 1
    assert _names(held.ripe(3.5)) == [("span", "later")]


def test_another_conversation_is_not_hurried_by_a_clock_that_runs_ahead():
    held = Settling(2.0, hold_at_most=6)
    ahead = Record("span", "chat", 10**12, "a", "ahead", "", {}, "x", {})
    other = Record("span", "chat", 5, "b", "other", "", {}, "x", {})
    held.add(0.0, [ahead], "w")
    held.add(1.0, [other], "w")
    assert _names(held.ripe(2.0)) == [("span", "ahead")]
    assert _names(held.ripe(3.0)) == [("span", "other")]
