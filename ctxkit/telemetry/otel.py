"""OpenTelemetry spans, span events and metrics from the event bus.

Each view becomes a span, ``context.get_messages_for_request``; a compaction made for it becomes
a child span, ``context.compact``, carrying ``context:pre_compact`` and ``context:post_compact``
as span events with the contract's ``message_count`` and ``token_count``. The manager publishes
a view's events after the work is done, so spans are opened with their measured start times;
their parent is whatever span is current where the request was made (the agent's turn). A
request that raises :class:`~ctxkit.reference.ContextBudgetExceeded` publishes no view; its
span ends at the ``ctxkit:budget_exceeded`` event, with an error status. An invariant violation
(found by ``instrument()`` after a view, or after ``set_messages``/``clear``) is a span of its
own, ``context.invariant_violation``, with an error status. Usage a provider reported
(``record_usage()``, published as ``ctxkit:usage``) is recorded in the GenAI semantic
conventions' ``gen_ai.client.token.usage`` histogram, and ctxkit's count of the view over the
billed input in ``ctxkit.usage.estimate_ratio``.

Only the OpenTelemetry API is needed to record; :func:`configure_otlp` builds SDK providers that
export over OTLP/HTTP as the standard ``OTEL_*`` environment variables say (needs
``pip install 'ctxkit-llm[otel]'``). Message text is never exported unless ``include_text=True``.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import metrics, trace

from ctxkit import __version__, events
from ctxkit.events import Event
from ctxkit.telemetry.names import (
    COMPACTION_ACTIONS,
    CONVERSATION_COMPACTED,
    CONVERSATION_ID,
    METRICS,
    OPERATION_NAME,
    TOKEN_TYPE,
    Metric,
)
from ctxkit.telemetry.usage import reported_usage

__all__ = ["OpenTelemetry", "configure_otlp"]

VIEW_SPAN = "context.get_messages_for_request"
COMPACT_SPAN = "context.compact"
VIOLATION_SPAN = "context.invariant_violation"


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _compacted(compacted: bool) -> dict[str, bool]:
    """``gen_ai.conversation.compacted`` only on spans whose request compacted: a flag that is
    there only when true keeps the other spans small and makes "where is it set" the query."""
    return {CONVERSATION_COMPACTED: True} if compacted else {}


def _recorder(meter: metrics.Meter, declared: Metric) -> Any:
    """The instrument's recording method: ``add``, ``record``, or for a gauge, one that keeps
    the latest value for an observable gauge to report when metrics are collected."""
    name, options = declared.otel, {"unit": declared.unit, "description": declared.help}
    assert name is not None
    if declared.kind == "counter":
        return meter.create_counter(name, **options).add
    if declared.kind == "histogram":
        # The SDK's default bounds (0, 5, 10, ... 10000) suit milliseconds, not seconds or
        # tokens: pass the declared buckets, as Prometheus uses them.
        return meter.create_histogram(
            name, explicit_bucket_boundaries_advisory=list(declared.buckets) or None, **options
        ).record
    latest: list[tuple[float, Any]] = []

    def keep(value: float, attributes: dict[str, str] | None = None) -> None:
        latest[:] = [(value, attributes)]

    def observe(_options: Any) -> list[metrics.Observation]:
        return [metrics.Observation(value, attributes) for value, attributes in latest]

    meter.create_observable_gauge(name, callbacks=[observe], **options)
    return keep


class OpenTelemetry:
    """A bus subscriber turning views and compactions into OpenTelemetry spans and metrics.

    Parameters:
        tracer_provider, meter_provider: where spans and metrics go; the global providers by
            default (set by your own OTel setup, or by :func:`configure_otlp`).
        include_text: put a summary's text on the ``context:include`` span event. Off by
            default: message text can hold anything the user or a tool said.

    Example::

        tracer_provider, meter_provider = configure_otlp()
        manager.bus.subscribe(OpenTelemetry(tracer_provider=tracer_provider,
                                            meter_provider=meter_provider))
    """

    deferred = True
    """Delivered when the caller's task yields, not inside the request (see
    :mod:`ctxkit.events`)."""

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        include_text: bool = False,
    ) -> None:
        self.include_text = include_text
        self._tracer = trace.get_tracer("ctxkit", __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter("ctxkit", __version__, meter_provider=meter_provider)
        self._recorders = {m.prometheus: _recorder(meter, m) for m in METRICS if m.otel}
        self._pending: dict[Any, list[Event]] = {}
        """Per conversation: the events since its last view, which belong to the next one."""

    def __call__(self, event: Event) -> None:
        name = event.name
        if name == events.VIEW:
            self._on_view(event)
            return
        if name == events.INVARIANT_VIOLATION:
            self._on_violation(event)
            return
        if name == events.AUDIT_WRITE_FAILED:
            self._record("ctxkit_audit_write_failures", 1)
            return
        if name == events.USAGE:
            self._on_usage(event.data)
            return
        if name not in _BELONGS_TO_VIEW:
            return
        self._pending.setdefault(event.data.get("conversation_id"), []).append(event)
        data = event.data
        if name == events.POST_COMPACT:
            strategy = {"ctxkit.compaction.strategy": str(data.get("strategy") or "unknown")}
            self._record("ctxkit_compactions", 1, strategy)
            self._record("ctxkit_compaction_tokens_saved", max(0, data["tokens_saved"]), strategy)
            self._record("ctxkit_compaction_duration_seconds", data["duration_s"], strategy)
            for action, key in COMPACTION_ACTIONS.items():
                if data.get(key):
                    self._record("ctxkit_compaction_units", data[key], {_ACTION: action})
        elif name == events.BUDGET_EXCEEDED:
            self._record("ctxkit_budget_exceeded", 1)
            if data.get("raised"):
                self._on_failed_request(event)

    def _record(self, name: str, value: float, attributes: dict[str, str] | None = None) -> None:
        self._recorders[name](value, attributes)

    def _on_view(self, event: Event) -> None:
        data = event.data
        tokens, budget = data["token_count"], data["budget"]
        utilization = tokens / budget if budget else 0.0
        self._record("ctxkit_view_size_tokens", tokens)
        self._record("ctxkit_view_utilization_ratio", utilization)
        previous = data.get("previous_tokens") or 0
        if previous:
            kept = data.get("prefix_tokens") or 0
            self._record("ctxkit_view_prefix_kept_tokens", kept)
            self._record("ctxkit_view_prefix_kept_ratio", kept / previous)

        end = event.time
        start = end - data.get("duration_s", 0.0)
        pending = self._pending.pop(data.get("conversation_id"), [])
        for earlier in pending:
            start = min(start, earlier.time)
        span = self._tracer.start_span(
            VIEW_SPAN,
            start_time=_ns(start),
            attributes={
                CONVERSATION_ID: str(data.get("conversation_id")),
                **_compacted(bool(data.get("compacted"))),
                "ctxkit.view.messages": data["message_count"],
                "ctxkit.view.tokens": tokens,
                "ctxkit.budget.tokens": budget,
                "ctxkit.history.messages": data.get("history_messages", 0),
                "ctxkit.history.tokens": data.get("history_tokens", 0),
                "ctxkit.context.utilization": utilization,
                "ctxkit.view.prefix_kept_tokens": data.get("prefix_tokens") or 0,
                "ctxkit.view.previous_tokens": previous,
            },
        )
        try:
            if pending:
                self._compaction_spans(span, pending, data)
        finally:
            span.end(end_time=_ns(end))

    def _on_usage(self, data: Any) -> None:
        """The provider's counts, with the attributes the GenAI conventions require that
        ctxkit knows (not the provider or model: a GenAI instrumentation of the client, if
        one runs, records those on its own points, under its own instrumentation scope)."""
        usage = reported_usage(data)
        for kind, tokens in usage.tokens.items():
            attributes = {OPERATION_NAME: "chat", TOKEN_TYPE: kind}
            self._record("gen_ai_client_token_usage", tokens, attributes)
        if usage.estimate_ratio is not None:
            self._record("ctxkit_usage_estimate_ratio", usage.estimate_ratio)

    def _on_failed_request(self, event: Event) -> None:
        """A request that raised publishes no view: its events end a span of their own, with
        an error status, instead of waiting for (and stretching) the next view's span."""
        data = event.data
        pending = self._pending.pop(data.get("conversation_id"), [])
        span = self._tracer.start_span(
            VIEW_SPAN,
            start_time=_ns(min(earlier.time for earlier in pending)),
            attributes={
                CONVERSATION_ID: str(data.get("conversation_id")),
                **_compacted(any(e.name == events.POST_COMPACT for e in pending)),
                "ctxkit.budget.tokens": data["budget"],
            },
        )
        span.set_status(
            trace.Status(
                trace.StatusCode.ERROR,
                f"ContextBudgetExceeded: pinned content needs {data.get('pinned_tokens')} "
                f"tokens, budget {data['budget']}",
            )
        )
        try:
            self._compaction_spans(span, pending, data)
        finally:
            span.end(end_time=_ns(event.time))

    def _on_violation(self, event: Event) -> None:
        """Violations are found after their view, or with none (``set_messages``, ``clear``):
        each gets a span of its own rather than waiting for (and stretching) the next view's."""
        data = event.data
        prop = str(data.get("property"))
        self._record("ctxkit_invariant_violations", 1, {"ctxkit.invariant.property": prop})
        at = _ns(event.time)
        span = self._tracer.start_span(
            VIOLATION_SPAN,
            start_time=at,
            attributes={
                CONVERSATION_ID: str(data.get("conversation_id")),
                "ctxkit.invariant.property": prop,
            },
        )
        span.add_event(event.name, self._event_attributes(event), timestamp=at)
        span.set_status(trace.Status(trace.StatusCode.ERROR, f"{prop} broken"))
        span.end(end_time=at)

    def _compaction_spans(self, parent: trace.Span, pending: list[Event], view: Any) -> None:
        """One child span per compaction (pre_compact ... post_compact), with its events."""
        context = trace.set_span_in_context(parent)
        span: trace.Span | None = None
        for event in pending:
            data = event.data
            if event.name == events.PRE_COMPACT:
                span = self._tracer.start_span(
                    COMPACT_SPAN,
                    context=context,
                    start_time=_ns(event.time),
                    attributes={
                        CONVERSATION_ID: str(data.get("conversation_id")),
                        "ctxkit.compaction.strategy": str(data.get("strategy") or "unknown"),
                        "ctxkit.compaction.tokens_before": data["token_count"],
                        "ctxkit.compaction.messages_before": data["message_count"],
                        "ctxkit.budget.tokens": data.get("budget", view["budget"]),
                    },
                )
            target = span or parent
            target.add_event(event.name, self._event_attributes(event), timestamp=_ns(event.time))
            if event.name == events.POST_COMPACT and span is not None:
                span.set_attributes(
                    {
                        "ctxkit.compaction.tokens_after": data["token_count"],
                        "ctxkit.compaction.messages_after": data["message_count"],
                        "ctxkit.compaction.tokens_saved": data.get("tokens_saved", 0),
                        "ctxkit.compaction.units_dropped": data.get("units_dropped", 0),
                        "ctxkit.compaction.units_truncated": data.get("units_truncated", 0),
                        "ctxkit.compaction.units_summarized": data.get("units_summarized", 0),
                    }
                )
                span.end(end_time=_ns(event.time))
                span = None
        if span is not None:  # a pre_compact with no post_compact: close it with the view
            span.end()

    def _event_attributes(self, event: Event) -> dict[str, Any]:
        data = event.data
        if event.name == events.INCLUDE:
            content = data.get("content")
            attributes: dict[str, Any] = {"ctxkit.include.source": str(data.get("source"))}
            if isinstance(content, str):
                attributes["ctxkit.include.chars"] = len(content)
                if self.include_text:
                    attributes["ctxkit.include.content"] = content
            return attributes
        attributes = {
            key: value
            for key, value in data.items()
            if key != "conversation_id"
            and isinstance(value, bool | int | float | str)
            and (key != "message" or self.include_text)  # a violation's may quote messages
        }
        if data.get("ids"):  # an invariant violation's call ids
            attributes["ids"] = [str(i) for i in data["ids"]]
        return attributes


_BELONGS_TO_VIEW = frozenset(
    {
        events.PRE_COMPACT,
        events.POST_COMPACT,
        events.INCLUDE,
        events.BUDGET_EXCEEDED,
    }
)
_ACTION = "ctxkit.compaction.action"


def configure_otlp(*, service_name: str = "ctxkit") -> tuple[Any, Any]:
    """SDK tracer and meter providers exporting over OTLP/HTTP, configured by ``OTEL_*``.

    The exporters read ``OTEL_EXPORTER_OTLP_ENDPOINT`` (default ``http://localhost:4318``),
    ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_EXPORTER_OTLP_TIMEOUT`` and their per-signal
    variants; ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` name the resource
    (``service_name`` when unset). Exports run on background threads: an endpoint that is down
    costs log warnings, never the caller. Call ``shutdown()`` on both when done, or use
    :func:`ctxkit.telemetry.otlp.start_otlp`, whose shutdown is bounded and says what was
    sent.
    """
    from ctxkit.telemetry.otlp import start_otlp

    export = start_otlp(service_name=service_name)
    return export.tracer_provider, export.meter_provider
