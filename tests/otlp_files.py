"""Recording what real instrumentations emit, as the OpenTelemetry Collector's file exporter
writes it: one OTLP/JSON export request per line, trace and span ids in hex (the OTLP/JSON
rule), encoded by the SDK's own OTLP encoders; or, with ``format: proto`` or ``compression:
zstd``, each export behind its length (:func:`framed`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from ctxkit.audit.otlp import collector_line


def trace_lines(spans: Sequence[Any], batch: int = 0) -> list[str]:
    """Finished SDK spans as file-exporter lines, ``batch`` spans per line (all in one: 0)."""
    size = batch or max(1, len(spans))
    return [collector_line(encode_spans(spans[i : i + size])) for i in range(0, len(spans), size)]


def log_lines(logs: Sequence[Any]) -> list[str]:
    return [collector_line(encode_logs(list(logs)))] if logs else []


def framed(messages: Sequence[Any], *, form: str = "proto", zstd: bool = False) -> bytes:
    """Export requests as the file exporter writes them with ``format: proto`` (``form``
    "proto") or ``format: json`` and ``compression: zstd`` (``form`` "json"): each one
    (zstd-compressed if ``zstd``) after its length, 4 bytes big-endian."""
    import zstandard

    out = bytearray()
    for message in messages:
        payload = (
            message.SerializeToString() if form == "proto" else collector_line(message).encode()
        )
        if zstd:
            payload = zstandard.ZstdCompressor().compress(payload)
        out += len(payload).to_bytes(4, "big") + payload
    return bytes(out)


def details_log() -> Any:
    """A logs export of one model call recorded as the details event, with no span."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    logs = ExportLogsServiceRequest()
    record = logs.resource_logs.add().scope_logs.add().log_records.add()
    record.event_name = "gen_ai.client.inference.operation.details"
    record.time_unix_nano = 1
    attribute = record.attributes.add()
    attribute.key = "gen_ai.input.messages"
    attribute.value.string_value = json.dumps([{"role": "user", "parts": []}])
    return logs
