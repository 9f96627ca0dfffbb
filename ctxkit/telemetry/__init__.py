"""Telemetry for context managers: subscribers of the event bus, each usable alone.

* :class:`PrometheusMetrics` and :func:`serve_metrics`: metrics on ``/metrics`` (loopback).
* :class:`OpenTelemetry` and :func:`configure_otlp`: spans, span events and metrics, exported
  over OTLP as the ``OTEL_*`` variables say (``pip install 'ctxkit-llm[otel]'``).
* :class:`EventStream`: a JSON Lines file of events, for ``ctxkit inspect``.
* :func:`instrument`: the same events for any manager that follows the protocol; with
  ``on_violation="raise"`` or ``"repair"``, a guard that never lets a view a provider would
  reject through (:class:`ViewRefused`).
* :func:`guard`: that guard for a function over the message list, returned as a function
  with the same arguments.

Example::

    manager = ReferenceContextManager()          # or instrument(their_manager)
    metrics = PrometheusMetrics()
    manager.bus.subscribe(metrics)
    manager.bus.subscribe(EventStream("events.jsonl"))
    serve_metrics(metrics.registry, port=9464)
"""

from __future__ import annotations

from typing import Any

from ctxkit.extras import install_line
from ctxkit.telemetry.guard import ViewRefused, guard
from ctxkit.telemetry.instrument import InstrumentedManager, instrument
from ctxkit.telemetry.prometheus import (
    CannotServeMetrics,
    MetricsPortInUse,
    PrometheusMetrics,
    serve_metrics,
)
from ctxkit.telemetry.stream import SCHEMA_VERSION, EventStream

__all__ = [
    "SCHEMA_VERSION",
    "CannotServeMetrics",
    "EventStream",
    "InstrumentedManager",
    "MetricsPortInUse",
    "OpenTelemetry",
    "PrometheusMetrics",
    "ViewRefused",
    "configure_otlp",
    "guard",
    "instrument",
    "serve_metrics",
]

_OTEL = ("OpenTelemetry", "configure_otlp")


def __getattr__(name: str) -> Any:
    # OpenTelemetry is an optional extra: import it only when asked for.
    if name in _OTEL:
        try:
            from ctxkit.telemetry import otel
        except ImportError as error:
            raise ImportError(
                f"ctxkit.telemetry.{name} needs OpenTelemetry: {install_line('otel')} ({error})"
            ) from error
        return getattr(otel, name)
    raise AttributeError(f"module 'ctxkit.telemetry' has no attribute {name!r}")
