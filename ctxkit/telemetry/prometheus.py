"""Prometheus metrics from the event bus, and an exporter serving ``/metrics`` on loopback.

Labels carry only small fixed sets (strategy, action, property, token type): never a
conversation id or text, so the number of series stays bounded however many conversations
run. Gauges aggregate the process's live conversations when scraped
(:mod:`ctxkit.telemetry.conversations`); ``ctxkit_build_info`` says which versions run.
"""

from __future__ import annotations

import errno
import platform
import socket
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import start_http_server
from prometheus_client.registry import Collector

from ctxkit import __version__, events
from ctxkit.events import Event
from ctxkit.telemetry.conversations import (
    DEFAULT_IDLE_AFTER,
    DEFAULT_MAX_CONVERSATIONS,
    DEFAULT_NEAR_LIMIT,
    ConversationTable,
)
from ctxkit.telemetry.names import (
    COMPACTION_ACTIONS,
    LEVELS,
    METRICS,
    REQUIRED_PROPERTIES,
    TOKEN_TYPES,
    Metric,
    metric,
)
from ctxkit.telemetry.usage import reported_usage

__all__ = ["MetricsPortInUse", "PrometheusMetrics", "serve_metrics"]


class CannotServeMetrics(OSError):
    """The metrics server cannot listen where it was asked to: the message says why."""


class MetricsPortInUse(CannotServeMetrics):
    """The metrics port is taken by another process."""


class BuildInfo(Collector):
    """``ctxkit_build_info``: 1, labelled with the versions this process runs, as Prometheus's
    own ``prometheus_build_info`` is; join on it to break any metric down by version."""

    def labels(self) -> dict[str, str]:
        """The label values, in the declared order."""
        return {
            "version": __version__,
            "python_version": platform.python_version(),
            "python_implementation": platform.python_implementation(),
        }

    def collect(self) -> Iterator[GaugeMetricFamily]:
        declared = metric("ctxkit_build_info")
        values = self.labels()
        family = GaugeMetricFamily(declared.prometheus, declared.help, labels=declared.labels)
        family.add_metric([values[label] for label in declared.labels], 1)
        yield family


def _make(declared: Metric, registry: CollectorRegistry) -> Any:
    kind = {"counter": Counter, "histogram": Histogram}[declared.kind]
    options: dict[str, Any] = {"registry": registry}
    if declared.buckets:
        options["buckets"] = declared.buckets
    return kind(declared.prometheus, declared.help, declared.labels, **options)


class PrometheusMetrics:
    """A bus subscriber recording views and compactions as Prometheus metrics.

    Parameters:
        registry: where the metrics live; a new private one by default (pass
            ``prometheus_client.REGISTRY`` to join an exporter you already run).
        idle_after, max_conversations, near_limit: the live-conversation table behind the
            gauges (see :mod:`ctxkit.telemetry.conversations`): a conversation counts as live
            for ``idle_after`` seconds after its last view (900), the table keeps at most
            ``max_conversations`` (10,000), and a conversation is near its limit past
            ``near_limit`` of its budget (0.9).

    Subscribe one instance to every manager of the process (each view names its
    conversation): the gauges then describe all of them, with no conversation id as a label.

    Example::

        metrics = PrometheusMetrics()
        manager.bus.subscribe(metrics)
        serve_metrics(metrics.registry, port=9464)
    """

    deferred = True
    """Delivered when the caller's task yields, not inside the request (see
    :mod:`ctxkit.events`)."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        idle_after: float = DEFAULT_IDLE_AFTER,
        max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
        near_limit: float = DEFAULT_NEAR_LIMIT,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.conversations = ConversationTable(
            idle_after=idle_after, max_conversations=max_conversations, near_limit=near_limit
        )
        m = {d.prometheus: _make(d, self.registry) for d in METRICS if d.kind != "gauge"}
        self.registry.register(self.conversations)
        self.registry.register(BuildInfo())
        self._views = m["ctxkit_views"]
        token_usage = m["gen_ai_client_token_usage"]
        self._token_usage = {kind: token_usage.labels(kind) for kind in TOKEN_TYPES}
        self._estimate = m["ctxkit_usage_estimate_ratio"]
        self._view_size = m["ctxkit_view_size_tokens"]
        self._view_tokens = m["ctxkit_view_tokens"]
        self._prefix_kept = m["ctxkit_view_prefix_kept_tokens"]
        self._prefix_ratio = m["ctxkit_view_prefix_kept_ratio"]
        self._utilization = m["ctxkit_view_utilization_ratio"]
        self._view_seconds = m["ctxkit_view_duration_seconds"]
        self._compactions = m["ctxkit_compactions"]
        self._saved = m["ctxkit_compaction_tokens_saved"]
        self._compaction_seconds = m["ctxkit_compaction_duration_seconds"]
        self._budget_exceeded = m["ctxkit_budget_exceeded"]
        self._audit_failures = m["ctxkit_audit_write_failures"]
        # Children for fixed label values exist from the start, so their series read 0, not
        # "no data", until the first event.
        self._units = {a: m["ctxkit_compaction_units"].labels(a) for a in COMPACTION_ACTIONS}
        by_level = m["ctxkit_view_units_by_level"]
        self._by_level = {level: by_level.labels(level) for level in LEVELS}
        saved = m["ctxkit_view_level_tokens_saved"]
        self._level_saved = {level: saved.labels(level) for level in LEVELS[1:]}
        self._recalled = m["ctxkit_view_units_recalled"]
        guarded = m["ctxkit_views_guarded"]
        self._guarded = {action: guarded.labels(action) for action in GUARD_ACTIONS}
        violations = m["ctxkit_invariant_violations"]
        self._violations = {p: violations.labels(p) for p in REQUIRED_PROPERTIES}
        self._by_strategy: dict[str, tuple[Any, Any, Any]] = {}
        self._handlers = {
            events.VIEW: self._on_view,
            events.POST_COMPACT: self._on_compacted,
            events.BUDGET_EXCEEDED: self._on_budget_exceeded,
            events.AUDIT_WRITE_FAILED: self._on_audit_write_failed,
            events.INVARIANT_VIOLATION: self._on_violation,
            events.USAGE: self._on_usage,
            events.VIEW_GUARDED: self._on_guarded,
        }

    def __call__(self, event: Event) -> None:
        handler = self._handlers.get(event.name)
        if handler is not None:
            handler(event.data)

    def _on_view(self, data: Any) -> None:
        self.conversations.saw(data)
        tokens, budget = data["token_count"], data["budget"]
        self._views.inc()
        self._view_size.observe(tokens)
        self._view_tokens.inc(tokens)
        if budget:
            self._utilization.observe(tokens / budget)
        previous = data.get("previous_tokens") or 0
        if previous:
            kept = data.get("prefix_tokens") or 0
            self._prefix_kept.inc(kept)
            self._prefix_ratio.observe(kept / previous)
        self._view_seconds.observe(data.get("duration_s", 0.0))
        self._count_levels(data)

    def _count_levels(self, data: Any) -> None:
        """The hierarchical strategy's levels and recall, where the view says them."""
        for table, key in (
            (self._by_level, "units_by_level"),
            (self._level_saved, "tokens_saved_by_level"),
        ):
            counts = data.get(key)
            if isinstance(counts, dict):
                for level, child in table.items():
                    value = counts.get(level)
                    if isinstance(value, int) and value > 0:
                        child.inc(value)
        recalled = data.get("units_recalled")
        if isinstance(recalled, int) and recalled > 0:
            self._recalled.inc(recalled)

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

    def _on_guarded(self, data: Any) -> None:
        child = self._guarded.get(data.get("action"))
        if child is not None:
            child.inc()

    def _on_usage(self, data: Any) -> None:
        usage = reported_usage(data)
        for kind, tokens in usage.tokens.items():
            self._token_usage[kind].observe(tokens)
        if usage.estimate_ratio is not None:
            self._estimate.observe(usage.estimate_ratio)


GUARD_ACTIONS = ("repaired", "refused")
"""The ``action`` of :data:`~ctxkit.events.VIEW_GUARDED`: the counter's label values."""


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
