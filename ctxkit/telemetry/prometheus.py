"""Prometheus metrics from the event bus, and an exporter serving ``/metrics`` on loopback.

Labels carry only small fixed sets (strategy, action, property): never a conversation id or
text, so the number of series stays bounded however many conversations run. Gauges describe the
latest view of any conversation in the process.
"""

from __future__ import annotations

import errno
import socket
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import start_http_server
from prometheus_client.registry import Collector

from ctxkit import events
from ctxkit.events import Event
from ctxkit.telemetry.names import COMPACTION_ACTIONS, METRICS, REQUIRED_PROPERTIES, Metric

__all__ = ["MetricsPortInUse", "PrometheusMetrics", "serve_metrics"]


class CannotServeMetrics(OSError):
    """The metrics server cannot listen where it was asked to: the message says why."""


class MetricsPortInUse(CannotServeMetrics):
    """The metrics port is taken by another process."""


def _make(declared: Metric, registry: CollectorRegistry) -> Any:
    kind = {"counter": Counter, "histogram": Histogram}[declared.kind]
    options: dict[str, Any] = {"registry": registry}
    if declared.buckets:
        options["buckets"] = declared.buckets
    return kind(declared.prometheus, declared.help, declared.labels, **options)


class _LatestView(Collector):
    """The gauges, read from the latest view's event when scraped: a view costs the request
    one assignment instead of seven gauge updates."""

    def __init__(self) -> None:
        self.data: Any = None

    def describe(self) -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily(m.prometheus, m.help) for m in METRICS if m.kind == "gauge"]

    def collect(self) -> list[GaugeMetricFamily]:
        data = self.data
        if data is None:
            return []
        tokens, budget = data["token_count"], data["budget"]
        values: dict[str, float] = {
            "ctxkit_context_tokens": tokens,
            "ctxkit_context_budget_tokens": budget,
            "ctxkit_context_utilization_ratio": tokens / budget if budget else 0.0,
            "ctxkit_history_tokens": data.get("history_tokens", 0),
            "ctxkit_history_messages": data.get("history_messages", 0),
        }
        threshold = data.get("compact_threshold")
        if threshold is not None:
            values["ctxkit_compaction_threshold_ratio"] = threshold
            values["ctxkit_context_tokens_until_compaction"] = max(
                0, int(threshold * budget) - tokens
            )
        return [
            GaugeMetricFamily(m.prometheus, m.help, value=values[m.prometheus])
            for m in METRICS
            if m.prometheus in values
        ]


class PrometheusMetrics:
    """A bus subscriber recording views and compactions as Prometheus metrics.

    Parameters:
        registry: where the metrics live; a new private one by default (pass
            ``prometheus_client.REGISTRY`` to join an exporter you already run).

    Example::

        metrics = PrometheusMetrics()
        manager.bus.subscribe(metrics)
        serve_metrics(metrics.registry, port=9464)
    """

    deferred = True
    """Delivered when the caller's task yields, not inside the request (see
    :mod:`ctxkit.events`)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        m = {d.prometheus: _make(d, self.registry) for d in METRICS if d.kind != "gauge"}
        self._latest = _LatestView()
        self.registry.register(self._latest)
        self._views = m["ctxkit_views"]
        self._view_tokens = m["ctxkit_view_tokens"]
        self._view_seconds = m["ctxkit_view_duration_seconds"]
        self._compactions = m["ctxkit_compactions"]
        self._saved = m["ctxkit_compaction_tokens_saved"]
        self._compaction_seconds = m["ctxkit_compaction_duration_seconds"]
        self._budget_exceeded = m["ctxkit_budget_exceeded"]
        self._audit_failures = m["ctxkit_audit_write_failures"]
        # Children for fixed label values exist from the start, so their series read 0, not
        # "no data", until the first event.
        self._units = {a: m["ctxkit_compaction_units"].labels(a) for a in COMPACTION_ACTIONS}
        violations = m["ctxkit_invariant_violations"]
        self._violations = {p: violations.labels(p) for p in REQUIRED_PROPERTIES}
        self._by_strategy: dict[str, tuple[Any, Any, Any]] = {}
        self._handlers = {
            events.VIEW: self._on_view,
            events.POST_COMPACT: self._on_compacted,
            events.BUDGET_EXCEEDED: self._on_budget_exceeded,
            events.AUDIT_WRITE_FAILED: self._on_audit_write_failed,
            events.INVARIANT_VIOLATION: self._on_violation,
        }

    def __call__(self, event: Event) -> None:
        handler = self._handlers.get(event.name)
        if handler is not None:
            handler(event.data)

    def _on_view(self, data: Any) -> None:
        self._latest.data = data
        self._views.inc()
        self._view_tokens.observe(data["token_count"])
        self._view_seconds.observe(data.get("duration_s", 0.0))

    def _on_compacted(self, data: Any) -> None:
        strategy = str(data.get("strategy") or "unknown")
        children = self._by_strategy.get(strategy)
        if children is None:
            children = self._by_strategy[strategy] = (
                self._compactions.labels(strategy),
                self._saved.labels(strategy),
                self._compaction_seconds.labels(strategy),
            )
        compactions, saved, seconds = children
        compactions.inc()
        saved.inc(max(0, data.get("tokens_saved", 0)))
        seconds.observe(data.get("duration_s", 0.0))
        for action, key in COMPACTION_ACTIONS.items():
            count = data.get(key, 0)
            if count:
                self._units[action].inc(count)

    def _on_budget_exceeded(self, data: Any) -> None:
        self._budget_exceeded.inc()

    def _on_audit_write_failed(self, data: Any) -> None:
        self._audit_failures.inc()

    def _on_violation(self, data: Any) -> None:
        prop = data.get("property")
        child = self._violations.get(prop) if isinstance(prop, str) else None
        if child is not None:  # only the known ids become label values
            child.inc()


def serve_metrics(
    registry: CollectorRegistry, *, port: int = 9464, host: str = "127.0.0.1"
) -> tuple[Any, int]:
    """Serve ``registry`` on ``http://host:port/metrics`` from a daemon thread.

    Binds loopback unless told otherwise. Port 0 picks a free port. Returns the server (call
    ``shutdown()`` to stop it) and the port it listens on. Raises :class:`MetricsPortInUse`
    naming the port if it is taken, :class:`CannotServeMetrics` for any other reason it
    cannot listen (a host name that does not resolve, an address not on this machine).
    """
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise MetricsPortInUse(
                errno.EADDRINUSE,
                f"metrics port {port} on {host} is already in use; choose another port, or 0 "
                "for any free one",
            ) from error
        if isinstance(error, socket.gaierror):
            why = f"{host!r} is not a host name or address this machine can resolve"
        else:
            why = error.strerror or str(error)
        raise CannotServeMetrics(
            error.errno, f"cannot serve metrics on {host} port {port}: {why}"
        ) from error
    return server, server.server_port
