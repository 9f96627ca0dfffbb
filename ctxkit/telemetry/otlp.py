"""OTLP/HTTP export with a bounded shutdown and a count of what was actually sent.

An exporter whose collector is down retries with backoff for many seconds per batch; a
program that ends then waits for it, and nothing tells it that nothing arrived.
:func:`start_otlp` builds the SDK providers (as :func:`~ctxkit.telemetry.otel.configure_otlp`
documents) with exporters that count, and :meth:`OtlpExport.shutdown` gives them at most
``timeout`` seconds before it stops them and says what was sent and what was dropped.

Needs the SDK and the OTLP exporter: ``pip install 'ctxkit-llm[otel]'``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExportResult, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

from ctxkit.wording import plural

__all__ = ["DEFAULT_SHUTDOWN_TIMEOUT", "OtlpExport", "OtlpTally", "start_otlp"]

DEFAULT_SHUTDOWN_TIMEOUT = 5.0
"""Seconds :meth:`OtlpExport.shutdown` gives the exporters to send what is left."""


@dataclass
class OtlpTally:
    """What an OTLP export sent, by the exporters' own results."""

    endpoint: str
    spans_ended: int = 0
    spans_sent: int = 0
    metric_batches_sent: int = 0
    metric_batches_failed: int = 0
    finished: bool = True
    """The shutdown finished within its timeout (else the exporters were stopped)."""

    @property
    def spans_dropped(self) -> int:
        return max(0, self.spans_ended - self.spans_sent)

    def describe(self) -> str:
        """One line for a person: what reached the endpoint, what did not."""
        sent = (
            f"{plural(self.spans_sent, 'span')} and "
            f"{plural(self.metric_batches_sent, 'metric batch', 'metric batches')} sent to "
            f"{self.endpoint}"
        )
        dropped = []
        if self.spans_dropped:
            dropped.append(plural(self.spans_dropped, "span"))
        if self.metric_batches_failed:
            dropped.append(plural(self.metric_batches_failed, "metric batch", "metric batches"))
        if not dropped:
            return f"otlp: {sent}"
        cause = "" if self.finished else ", stopped at the shutdown timeout"
        return f"otlp: {sent}; dropped {' and '.join(dropped)}{cause} (is a collector listening?)"


class _SpanCounter(SpanProcessor):
    """Counts the spans that ended, which the batch processor then tries to send."""

    def __init__(self, tally: OtlpTally) -> None:
        self._tally = tally

    def on_end(self, span: ReadableSpan) -> None:
        self._tally.spans_ended += 1


class _CountingSpanExporter(OTLPSpanExporter):
    def __init__(self, tally: OtlpTally) -> None:
        super().__init__()
        self._tally = tally

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        if result is SpanExportResult.SUCCESS:
            self._tally.spans_sent += len(spans)
        return result


class _CountingMetricExporter(OTLPMetricExporter):
    def __init__(self, tally: OtlpTally) -> None:
        super().__init__()
        self._tally = tally

    def export(self, metrics_data: Any, *args: Any, **kwargs: Any) -> MetricExportResult:
        result = super().export(metrics_data, *args, **kwargs)
        if result is MetricExportResult.SUCCESS:
            self._tally.metric_batches_sent += 1
        else:
            self._tally.metric_batches_failed += 1
        return result


class OtlpExport:
    """SDK tracer and meter providers exporting over OTLP/HTTP, and their shutdown."""

    def __init__(self, *, service_name: str) -> None:
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        if protocol != "http/protobuf":
            raise ValueError(
                f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: ctxkit exports OTLP over HTTP "
                "(http/protobuf) only; point it at the collector's HTTP port (4318)"
            )
        endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318")
        self.tally = OtlpTally(endpoint=endpoint)
        attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": service_name}
        resource = Resource.create(attributes)
        self._span_exporter = _CountingSpanExporter(self.tally)
        self._metric_exporter = _CountingMetricExporter(self.tally)
        # shutdown_on_exit=False: the interpreter's exit must not wait on a dead collector.
        self.tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.tracer_provider.add_span_processor(_SpanCounter(self.tally))
        self.tracer_provider.add_span_processor(BatchSpanProcessor(self._span_exporter))
        reader = PeriodicExportingMetricReader(self._metric_exporter)
        self.meter_provider = MeterProvider(
            resource=resource, metric_readers=[reader], shutdown_on_exit=False
        )

    def shutdown(self, timeout: float = DEFAULT_SHUTDOWN_TIMEOUT) -> OtlpTally:
        """Send what is left, for at most ``timeout`` seconds (and one more for the final
        metric export); then stop the exporters, ending their retries, and return the tally."""
        deadline = time.monotonic() + timeout
        flushed = _within(deadline, self._flush, timeout)
        self.tally.finished = flushed and _within(deadline + 1.0, self._stop_providers, timeout)
        if not self.tally.finished:
            self._span_exporter.shutdown()  # ends a retry in progress
            self._metric_exporter.shutdown()
            _within(time.monotonic() + 1.0, self._stop_providers, timeout)
        return self.tally

    def _flush(self, timeout: float) -> None:
        self.tracer_provider.force_flush(timeout_millis=int(timeout * 1000))
        self.meter_provider.force_flush(timeout_millis=int(timeout * 1000))

    def _stop_providers(self, timeout: float) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown(timeout_millis=int(timeout * 1000))


def _within(deadline: float, work: Any, timeout: float) -> bool:
    """Run ``work(timeout)`` on a daemon thread; True if it finished by ``deadline``. A thread
    still blocked on a dead collector is left behind: it cannot keep the process alive."""
    thread = threading.Thread(target=work, args=(timeout,), name="ctxkit-otlp", daemon=True)
    thread.start()
    thread.join(max(0.0, deadline - time.monotonic()))
    return not thread.is_alive()


def start_otlp(*, service_name: str = "ctxkit") -> OtlpExport:
    """Providers exporting over OTLP/HTTP as the standard ``OTEL_*`` variables say (see
    :func:`~ctxkit.telemetry.otel.configure_otlp`), with a bounded, counted shutdown."""
    return OtlpExport(service_name=service_name)
