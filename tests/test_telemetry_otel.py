"""The OpenTelemetry subscriber, checked with the SDK's in-memory exporters and a real manager.

Spans, span events and metric points are what an operator's tracing backend shows; each test
drives a real ``ReferenceContextManager`` through a compacting conversation and reads back
what the SDK exported.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from ctxkit import events
from ctxkit.reference import ContextBudgetExceeded, ReferenceContextManager
from ctxkit.reference.strategies import SUMMARY_HEADER
from ctxkit.telemetry import instrument
from ctxkit.telemetry.names import (
    ESTIMATE_BUCKETS,
    GEN_AI_TOKEN_BUCKETS,
    SECONDS_BUCKETS,
    TOKEN_BUCKETS,
)
from ctxkit.telemetry.otel import (
    COMPACT_SPAN,
    VIEW_SPAN,
    VIOLATION_SPAN,
    OpenTelemetry,
    configure_otlp,
)
from tests.telemetry_cases import (
    MARKER,
    STRATEGY,
    Recorder,
    compacting_manager,
    drive,
    drive_reporting_usage,
    marked_conversation,
)
from tests.zoo.history import SetMessagesAppends


def manager(**overrides: Any) -> ReferenceContextManager:
    return compacting_manager(**({"conversation_id": "conv-otel-test"} | overrides))


conversation = marked_conversation


@dataclass
class Otel:
    """SDK providers whose exports stay in memory."""

    spans: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def subscriber(self, **options: Any) -> OpenTelemetry:
        return OpenTelemetry(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        spans = self.spans.get_finished_spans()
        return [s for s in spans if name is None or s.name == name]

    def points(self, metric: str | None = None) -> list[Any]:
        """The data points of one instrument, or of all (empty if nothing was recorded)."""
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for exported in scope.metrics:
                    if metric is None or exported.name == metric:
                        found += exported.data.data_points
        return found

    def metrics(self) -> list[Any]:
        """Every exported metric (name, unit, description and points)."""
        data = self.reader.get_metrics_data()
        return [
            exported
            for resource in (data.resource_metrics if data else ())
            for scope in resource.scope_metrics
            for exported in scope.metrics
        ]

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def make_otel() -> Otel:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    return Otel(spans, reader, tracer_provider, MeterProvider(metric_readers=[reader]))


@pytest.fixture
def otel() -> Iterator[Otel]:
    providers = make_otel()
    yield providers
    providers.shutdown()


def run_with(
    otel: Otel, messages: Sequence[dict[str, Any]], **options: Any
) -> tuple[ReferenceContextManager, Recorder, list[list[dict[str, Any]]]]:
    """Drive a manager with the OTel subscriber on its bus, then wait for delivery."""
    target = manager()
    recorder = Recorder(target.bus)
    target.bus.subscribe(otel.subscriber(**options))
    views = asyncio.run(drive(target, messages))
    target.bus.flush()
    return target, recorder, views


def children(otel: Otel, parent: ReadableSpan) -> list[ReadableSpan]:
    return [
        s
        for s in otel.finished()
        if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


# -- spans --------------------------------------------------------------------------------------


def test_each_view_is_a_span_and_each_compaction_its_child_with_contract_events(otel: Otel):
    """The trace must show which requests compacted, by how much, inside the request."""
    _, recorder, views = run_with(otel, conversation())
    view_spans = otel.finished(VIEW_SPAN)
    assert len(view_spans) == len(views) == len(recorder.of(events.VIEW))
    compactions = recorder.of(events.POST_COMPACT)
    assert compactions, "the conversation must compact for this test to mean anything"
    compact_spans = otel.finished(COMPACT_SPAN)
    assert len(compact_spans) == len(compactions)

    by_id = {s.context.span_id: s for s in view_spans}
    for span in compact_spans:
        assert span.parent is not None
        parent = by_id[span.parent.span_id]  # a compaction's parent is a view span
        assert span.context.trace_id == parent.context.trace_id
        assert parent.start_time <= span.start_time <= span.end_time <= parent.end_time
        names = [e.name for e in span.events]
        assert names[0] == events.PRE_COMPACT
        assert names[-1] == events.POST_COMPACT
        pre, post = span.events[0].attributes, span.events[-1].attributes
        for attributes in (pre, post):
            assert type(attributes["message_count"]) is int
            assert type(attributes["token_count"]) is int
        assert post["token_count"] <= pre["token_count"]
        assert post["message_count"] <= pre["message_count"]
        attributes = span.attributes
        assert attributes["gen_ai.conversation.id"] == "conv-otel-test"
        assert attributes["ctxkit.compaction.strategy"] == STRATEGY
        assert attributes["ctxkit.compaction.tokens_before"] == pre["token_count"]
        assert attributes["ctxkit.compaction.tokens_after"] == post["token_count"]
        assert attributes["ctxkit.compaction.messages_before"] == pre["message_count"]
        assert attributes["ctxkit.compaction.messages_after"] == post["message_count"]
        assert attributes["ctxkit.compaction.tokens_saved"] == (
            pre["token_count"] - post["token_count"]
        )
    exported = [
        (
            s.attributes["ctxkit.compaction.units_dropped"],
            s.attributes["ctxkit.compaction.units_truncated"],
            s.attributes["ctxkit.compaction.units_summarized"],
        )
        for s in sorted(compact_spans, key=lambda s: s.start_time)
    ]
    published = [
        (c["units_dropped"], c["units_truncated"], c["units_summarized"]) for c in compactions
    ]
    assert exported == published


def test_view_span_attributes_describe_the_view_returned(otel: Otel):
    """Every ctxkit.* attribute must match the view the caller actually got."""
    target, recorder, views = run_with(otel, conversation())
    spans = sorted(otel.finished(VIEW_SPAN), key=lambda s: s.start_time)
    published = recorder.of(events.VIEW)
    compacted_views = 0
    for added, (span, view, data) in enumerate(zip(spans, views, published, strict=True), 1):
        attributes = span.attributes
        assert span.parent is None  # no span was current in the caller
        assert attributes["gen_ai.conversation.id"] == target.conversation_id
        assert attributes["ctxkit.view.messages"] == len(view)
        assert attributes["ctxkit.view.tokens"] == data["token_count"]
        assert attributes["ctxkit.budget.tokens"] == 4_000
        assert attributes["ctxkit.history.messages"] == added
        assert attributes["ctxkit.history.tokens"] == data["history_tokens"]
        assert attributes["ctxkit.context.utilization"] == pytest.approx(
            data["token_count"] / 4_000
        )
        # compacted is True exactly on the views whose request compacted.
        has_compaction = bool([c for c in children(otel, span) if c.name == COMPACT_SPAN])
        # Set only when true: no span says False.
        assert attributes.get("gen_ai.conversation.compacted") is (has_compaction or None)
        assert has_compaction is data["compacted"]
        compacted_views += has_compaction
    assert 0 < compacted_views < len(spans)


@pytest.mark.parametrize("include_text", [False, True])
def test_include_event_carries_summary_text_only_when_asked(otel: Otel, include_text: bool):
    """A summary's text is user data: exported only with include_text=True."""
    _, recorder, _ = run_with(otel, conversation(), include_text=include_text)
    summaries = [d["content"] for d in recorder.of(events.INCLUDE)]
    assert summaries
    included = [
        e for s in otel.finished(COMPACT_SPAN) for e in s.events if e.name == events.INCLUDE
    ]
    assert len(included) == len(summaries)
    for event, text in zip(sorted(included, key=lambda e: e.timestamp), summaries, strict=True):
        assert event.attributes["ctxkit.include.source"] == "summary"
        assert event.attributes["ctxkit.include.chars"] == len(text)
        if include_text:
            assert event.attributes["ctxkit.include.content"] == text
        else:
            assert "ctxkit.include.content" not in event.attributes
    if include_text:  # the marker reaches a summary, so the leak test below can see a leak
        assert any(MARKER in text for text in summaries)


def exported_strings(spans: Sequence[ReadableSpan]) -> list[str]:
    """Every name, status description and attribute value of every span and span event."""
    found: list[str] = []

    def add(attributes: Any) -> None:
        for key, value in (attributes or {}).items():
            found.append(str(key))
            values = value if isinstance(value, tuple | list) else [value]
            found.extend(str(v) for v in values)

    for span in spans:
        found.append(span.name)
        found.append(span.status.description or "")
        add(span.attributes)
        for event in span.events:
            found.append(event.name)
            add(event.attributes)
        for link in span.links:
            add(link.attributes)
    return found


def test_no_message_text_in_exported_spans_or_metrics_by_default(otel: Otel):
    """Message text can hold secrets; by default no span, event or metric point may carry
    any of it."""
    _, recorder, _ = run_with(otel, conversation())
    assert any(MARKER in d["content"] for d in recorder.of(events.INCLUDE))
    strings = exported_strings(otel.finished())
    assert strings
    points = otel.points()
    assert points
    strings += [f"{k}={v}" for p in points for k, v in (p.attributes or {}).items()]
    assert not [s for s in strings if MARKER in s]
    assert not [s for s in strings if SUMMARY_HEADER in s]


def test_view_span_is_a_child_of_the_span_current_in_the_caller(otel: Otel):
    """Deferred delivery (after the request, on the event loop) must keep the agent's turn
    span, current when the request was made, as the parent of the view."""
    target = manager()
    target.bus.subscribe(otel.subscriber())
    tracer = otel.tracer_provider.get_tracer("agent")

    async def turn() -> int:
        for message in conversation(30):
            await target.add_message(message)
        with tracer.start_as_current_span("agent.turn") as span:
            await target.get_messages_for_request()
            return span.get_span_context().span_id

    turn_id = asyncio.run(turn())
    target.bus.flush()
    (view,) = otel.finished(VIEW_SPAN)
    (agent,) = otel.finished("agent.turn")
    assert view.parent is not None
    assert view.parent.span_id == turn_id == agent.context.span_id
    assert view.context.trace_id == agent.context.trace_id


def test_failed_request_ends_its_own_span_and_leaves_the_next_view_alone(otel: Otel):
    """A request that raised ContextBudgetExceeded publishes no view; its compaction and the
    budget event must not be pinned on a later, unrelated view span."""
    target = manager(max_tokens=2_000)
    target.bus.subscribe(otel.subscriber())
    history = conversation(30)

    async def requests() -> None:
        for message in history:
            await target.add_message(message)
        await target.add_message({"role": "user", "content": "x " * 3_000})
        with pytest.raises(ContextBudgetExceeded):
            await target.get_messages_for_request()
        await asyncio.sleep(0.5)
        await target.get_messages_for_request(token_budget=100_000)

    asyncio.run(requests())
    target.bus.flush()
    failed, succeeded = sorted(otel.finished(VIEW_SPAN), key=lambda s: s.start_time)
    assert failed.status.status_code is StatusCode.ERROR
    assert events.BUDGET_EXCEEDED in [e.name for e in failed.events]
    assert [c.name for c in children(otel, failed)] == [COMPACT_SPAN]
    assert failed.attributes["gen_ai.conversation.compacted"] is True
    assert succeeded.status.status_code is StatusCode.UNSET
    assert "gen_ai.conversation.compacted" not in succeeded.attributes
    assert children(otel, succeeded) == []
    assert succeeded.events == ()
    assert succeeded.start_time >= failed.end_time
    assert (succeeded.end_time - succeeded.start_time) / 1e9 < 0.4  # not stretched back


@pytest.mark.parametrize("include_text", [False, True])
def test_invariant_violations_get_their_own_spans_without_message_text(
    otel: Otel, include_text: bool
):
    """instrument() finds violations after a view, or after set_messages with no view at all:
    each must be exported at once, not pinned on (and stretching) a later view, and its message,
    which quotes the messages it compares, is text: exported only with include_text=True."""
    target = instrument(
        SetMessagesAppends(), check_invariants=True, max_tokens=50_000, conversation_id="broken"
    )
    recorder = Recorder(target.bus)
    target.bus.subscribe(otel.subscriber(include_text=include_text))

    async def session() -> None:
        await target.add_message({"role": "user", "content": f"{MARKER} my password is hunter2"})
        await target.get_messages_for_request()
        await target.set_messages([{"role": "user", "content": "start again"}])  # appends
        await asyncio.sleep(0.5)
        await target.get_messages_for_request()

    asyncio.run(session())
    target.bus.flush()
    published = recorder.of(events.INVARIANT_VIOLATION)
    assert {v["property"] for v in published} == {"lifecycle", "non_destructive"}
    assert any(MARKER in v["message"] for v in published)  # so a leak would be seen

    spans = otel.finished(VIOLATION_SPAN)
    assert sorted(s.attributes["ctxkit.invariant.property"] for s in spans) == sorted(
        v["property"] for v in published
    )
    for span in spans:
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes["gen_ai.conversation.id"] == "broken"
        (event,) = span.events
        assert event.name == events.INVARIANT_VIOLATION
        assert ("message" in event.attributes) is include_text
    first, second = sorted(otel.finished(VIEW_SPAN), key=lambda s: s.start_time)
    for view in (first, second):
        assert view.events == ()
        assert (view.end_time - view.start_time) / 1e9 < 0.4  # not stretched over the sleep
    leaked = [s for s in exported_strings(otel.finished()) if MARKER in s]
    assert bool(leaked) is include_text

    counted = {
        p.attributes["ctxkit.invariant.property"]: p.value
        for p in otel.points("ctxkit.invariant.violations")
    }
    assert counted == {"lifecycle": 1, "non_destructive": 1}


@given(
    budgets=st.lists(st.integers(1_500, 12_000), min_size=1, max_size=6),
    seed=st.integers(0, 50),
)
def test_spans_agree_with_events_for_any_budgets(budgets: list[int], seed: int):
    """Whatever budgets an agent asks for, every request has one span (an error span if it
    raised), compacted iff it has a compaction child, and every compaction child lies inside
    its request's span and saves tokens."""
    otel = make_otel()
    try:
        target = manager()
        recorder = Recorder(target.bus)
        target.bus.subscribe(otel.subscriber())
        messages = conversation(40, seed=seed)

        async def requests() -> int:
            failed = 0
            for i, message in enumerate(messages):
                await target.add_message(message)
                try:
                    await target.get_messages_for_request(token_budget=budgets[i % len(budgets)])
                except ContextBudgetExceeded:
                    failed += 1
            return failed

        failed = asyncio.run(requests())
        target.bus.flush()
        spans = sorted(otel.finished(VIEW_SPAN), key=lambda s: s.start_time)
        assert len(spans) == len(messages)
        errors = [s for s in spans if s.status.status_code is StatusCode.ERROR]
        assert len(errors) == failed == len(recorder.of(events.BUDGET_EXCEEDED))
        published = recorder.of(events.VIEW)
        answered = [s for s in spans if s.status.status_code is StatusCode.UNSET]
        for span, data in zip(answered, published, strict=True):
            assert span.attributes["ctxkit.budget.tokens"] == data["budget"]
            assert bool(children(otel, span)) is data["compacted"]
        for span in spans:
            compacts = children(otel, span)
            assert span.attributes.get("gen_ai.conversation.compacted") is (bool(compacts) or None)
            for child in compacts:
                assert span.start_time <= child.start_time <= child.end_time <= span.end_time
                assert (
                    child.attributes["ctxkit.compaction.tokens_after"]
                    <= child.attributes["ctxkit.compaction.tokens_before"]
                )
    finally:
        otel.shutdown()


# -- metrics ------------------------------------------------------------------------------------


def test_compaction_metrics(otel: Otel):
    """The numbers an OTel metrics backend plots must add up to what the manager did."""
    _, recorder, views = run_with(otel, conversation())
    compactions = recorder.of(events.POST_COMPACT)
    published = recorder.of(events.VIEW)
    strategy = {"ctxkit.compaction.strategy": STRATEGY}

    (count,) = otel.points("ctxkit.compactions")
    assert dict(count.attributes) == strategy
    assert count.value == len(compactions) > 0

    (saved,) = otel.points("ctxkit.compaction.tokens_saved")
    assert dict(saved.attributes) == strategy
    assert saved.value == sum(c["tokens_saved"] for c in compactions) > 0

    (duration,) = otel.points("ctxkit.compaction.duration")
    assert dict(duration.attributes) == strategy
    assert duration.count == len(compactions)
    assert duration.sum == pytest.approx(sum(c["duration_s"] for c in compactions))
    # Seconds need sub-second buckets: the SDK's default bounds (0, 5, 10, ...) would put every
    # compaction into the first bucket.
    assert tuple(duration.explicit_bounds) == SECONDS_BUCKETS

    (tokens,) = otel.points("ctxkit.view.tokens")
    assert tokens.count == len(views)
    assert tokens.sum == sum(d["token_count"] for d in published)
    assert tuple(tokens.explicit_bounds) == TOKEN_BUCKETS

    (utilization,) = otel.points("ctxkit.view.utilization")
    assert utilization.count == len(views)
    assert utilization.sum == pytest.approx(sum(d["token_count"] / d["budget"] for d in published))

    (kept,) = otel.points("ctxkit.view.prefix_kept")
    assert kept.value == sum(d["prefix_tokens"] for d in published) > 0
    (share,) = otel.points("ctxkit.view.prefix_kept_ratio")
    assert share.count == len([d for d in published if d["previous_tokens"]])

    units = {
        p.attributes["ctxkit.compaction.action"]: p.value
        for p in otel.points("ctxkit.compaction.units")
    }
    for action in ("dropped", "truncated", "summarized"):
        total = sum(c[f"units_{action}"] for c in compactions)
        assert units.get(action, 0) == total
        assert total > 0, f"the conversation should exercise {action}"


def test_reported_usage_is_recorded_as_the_gen_ai_token_usage_histogram(otel: Otel):
    """gen_ai.client.token.usage with the convention's unit, attributes and bucket boundaries,
    and the estimate ratio beside it (a ratio: the SDK drops negative histogram records)."""
    target = manager()
    target.bus.subscribe(otel.subscriber())
    calls = asyncio.run(drive_reporting_usage(target, conversation(30)))
    target.bus.flush()
    (exported,) = [m for m in otel.metrics() if m.name == "gen_ai.client.token.usage"]
    assert exported.unit == "{token}"
    points = {p.attributes["gen_ai.token.type"]: p for p in exported.data.data_points}
    assert set(points) == {"input", "output"}
    for kind, column in (("input", 1), ("output", 2)):
        point = points[kind]
        assert dict(point.attributes) == {
            "gen_ai.operation.name": "chat",
            "gen_ai.token.type": kind,
        }
        assert point.count == len(calls) == 30
        assert point.sum == sum(call[column] for call in calls)
        assert tuple(point.explicit_bounds) == GEN_AI_TOKEN_BUCKETS
    (ratio,) = otel.points("ctxkit.usage.estimate_ratio")
    assert ratio.count == len(calls)
    assert ratio.sum == pytest.approx(sum(tokens / billed for tokens, billed, _ in calls))
    assert tuple(ratio.explicit_bounds) == ESTIMATE_BUCKETS
    assert ratio.max < 1  # the simulated provider bills its tool definitions too


# -- OTLP ---------------------------------------------------------------------------------------


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def timed(
    target: ReferenceContextManager, messages: Sequence[dict[str, Any]]
) -> tuple[list[list[dict[str, Any]]], float]:
    """The views, and the slowest single request."""
    views, worst = [], 0.0
    for message in messages:
        await target.add_message(message)
        started = time.perf_counter()
        views.append(await target.get_messages_for_request())
        worst = max(worst, time.perf_counter() - started)
    return views, worst


def test_otlp_to_a_closed_port_costs_the_manager_nothing(monkeypatch: pytest.MonkeyPatch):
    """A collector that is down must not change views, stall requests or hang shutdown."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    tracer_provider, meter_provider = configure_otlp()
    try:
        messages = conversation(80)
        plain_views, _ = asyncio.run(timed(manager(), messages))
        observed = manager()
        observed.bus.subscribe(
            OpenTelemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
        )
        views, worst = asyncio.run(timed(observed, messages))
        observed.bus.flush()
        assert views == plain_views
        assert worst < 0.5, f"a request took {worst:.3f} s with the collector down"
    finally:
        started = time.perf_counter()
        tracer_provider.shutdown()
        meter_provider.shutdown(timeout_millis=5_000)
        took = time.perf_counter() - started
    assert took < 8.0, f"shutting the providers down took {took:.1f} s"


def test_configure_otlp_names_the_service_unless_the_environment_does(
    monkeypatch: pytest.MonkeyPatch,
):
    """Spans must arrive under a recognisable service, and OTEL_SERVICE_NAME must win."""
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    for expected in ("my-agent", "agent-from-env"):
        if expected == "agent-from-env":
            monkeypatch.setenv("OTEL_SERVICE_NAME", expected)
        tracer_provider, meter_provider = configure_otlp(service_name="my-agent")
        try:
            assert tracer_provider.resource.attributes["service.name"] == expected
        finally:
            tracer_provider.shutdown()
            meter_provider.shutdown(timeout_millis=2_000)


def test_configure_otlp_rejects_grpc_with_a_clear_error(monkeypatch: pytest.MonkeyPatch):
    """gRPC is not shipped; the error must say what to set instead."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(ValueError, match=r"OTEL_EXPORTER_OTLP_PROTOCOL='grpc'.*http/protobuf"):
        configure_otlp()
