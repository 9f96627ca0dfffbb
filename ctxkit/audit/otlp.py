"""OTLP decoding: traces and logs, from the Collector's file exporter (OTLP/JSON, one export
request per line) or received over OTLP/HTTP (protobuf or JSON), into plain records.

Decoding is the official ``opentelemetry-proto`` bindings' (protobuf's own JSON mapping), with
the one deviation the OTLP specification makes: in OTLP/JSON, trace and span ids are hex
strings, not base64 (``traceId: "5b8efff7..."``); they are turned into what the protobuf
mapping expects before parsing. A :class:`Record` is a span or a log record with its
attributes as Python values (lists and dicts for OTLP arrays and key-value lists), its events,
and the instrumentation scope and resource attributes it came with.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ctxkit.audit.request import parse_json

__all__ = [
    "NotOtlp",
    "Record",
    "Sink",
    "body_line",
    "collector_line",
    "decode_export",
    "decode_json_line",
    "decode_logs",
    "decode_traces",
    "records_of",
]

_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


class NotOtlp(ValueError):
    """The data is not an OTLP export request (or it does not decode as one)."""


@dataclass(slots=True)
class Record:
    """One span or log record, decoded."""

    kind: str  # "span" or "log"
    name: str  # span name, or a log record's event name
    time_ns: int  # span start, or the log record's time (observed time if unset)
    trace_id: str  # hex, "" if none
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    scope: str
    resource: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    body: Any = None
    end_ns: int = 0


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as a Python value."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in pairs}


def decode_traces(request: ExportTraceServiceRequest) -> Iterator[Record]:
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name
            for span in scope_spans.spans:
                yield Record(
                    "span",
                    span.name,
                    span.start_time_unix_nano,
                    span.trace_id.hex(),
                    span.span_id.hex(),
                    span.parent_span_id.hex(),
                    _attributes(span.attributes),
                    scope,
                    resource,
                    [(e.name, e.time_unix_nano, _attributes(e.attributes)) for e in span.events],
                    end_ns=span.end_time_unix_nano,
                )


def decode_logs(request: ExportLogsServiceRequest) -> Iterator[Record]:
    for resource_logs in request.resource_logs:
        resource = _attributes(resource_logs.resource.attributes)
        for scope_logs in resource_logs.scope_logs:
            scope = scope_logs.scope.name
            for log in scope_logs.log_records:
                attributes = _attributes(log.attributes)
                name = log.event_name or str(attributes.get("event.name") or "")
                yield Record(
                    "log",
                    name,
                    log.time_unix_nano or log.observed_time_unix_nano,
                    log.trace_id.hex(),
                    log.span_id.hex(),
                    "",
                    attributes,
                    scope,
                    resource,
                    body=any_value(log.body) if log.HasField("body") else None,
                )


def decode_export(payload: bytes) -> list[Record]:
    """A protobuf export request whose signal nothing says (a frame of a file): traces if it
    parses as spans that carry trace and span ids, else logs.

    Raises :class:`NotOtlp` when it is neither.
    """
    traces = ExportTraceServiceRequest()
    try:
        traces.ParseFromString(payload)
    except DecodeError:
        pass
    else:
        spans = [s for r in traces.resource_spans for ss in r.scope_spans for s in ss.spans]
        if spans and all(len(s.trace_id) == 16 and len(s.span_id) == 8 for s in spans):
            return list(decode_traces(traces))
    logs = ExportLogsServiceRequest()
    try:
        logs.ParseFromString(payload)
    except DecodeError as exc:
        raise NotOtlp(f"does not decode as OTLP protobuf: {exc}") from None
    return list(decode_logs(logs))


BASE64_IDS = (
    "trace and span ids were base64 (what protobuf's json_format writes), not the hex "
    "OTLP/JSON specifies: read as base64"
)
"""Said once in the summary when a file's ids were read as base64."""


def _hex_ids_to_base64(value: Any, notes: set[str] | None = None) -> Any:
    """OTLP/JSON's hex ids as the base64 that protobuf's JSON mapping reads, in place. An id
    already in base64 (a file written by protobuf's own ``json_format``) is kept, and
    :data:`BASE64_IDS` goes into ``notes``."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _ID_FIELDS and isinstance(item, str) and item:
                try:
                    value[key] = base64.b64encode(bytes.fromhex(item)).decode()
                except ValueError:
                    if not _is_base64_id(item):
                        raise NotOtlp(f"{key} {item!r} is not a hex or base64 id") from None
                    if notes is not None:
                        notes.add(BASE64_IDS)
            elif isinstance(item, dict | list):
                _hex_ids_to_base64(item, notes)
    elif isinstance(value, list):
        for item in value:
            _hex_ids_to_base64(item, notes)
    return value


def _is_base64_id(text: str) -> bool:
    """A trace (16 bytes) or span (8 bytes) id written in base64."""
    try:
        return len(base64.b64decode(text, validate=True)) in (8, 16)
    except (binascii.Error, ValueError):
        return False


def decode_json_line(data: Mapping[str, Any], notes: set[str] | None = None) -> list[Record]:
    """One line of the Collector's file exporter: an export request of traces or logs
    (``notes`` gets what is worth saying once about how it was read)."""
    if not isinstance(data, Mapping):
        raise NotOtlp("not a JSON object")
    try:
        if "resourceSpans" in data or "resource_spans" in data:
            request = ExportTraceServiceRequest()
            json_format.ParseDict(_hex_ids_to_base64(dict(data), notes), request)
            return list(decode_traces(request))
        if "resourceLogs" in data or "resource_logs" in data:
            request = ExportLogsServiceRequest()
            json_format.ParseDict(_hex_ids_to_base64(dict(data), notes), request)
            return list(decode_logs(request))
    except (json_format.ParseError, binascii.Error, TypeError) as exc:
        raise NotOtlp(f"does not decode as OTLP: {exc}") from None
    raise NotOtlp("has neither resourceSpans nor resourceLogs")


def records_of(body: bytes, content_type: str, signal: str) -> list[Record]:
    """A received OTLP/HTTP body (``signal``: ``traces`` or ``logs``) as records.

    Raises :class:`NotOtlp` when it does not decode (the receiver answers 400).
    """
    if "json" in content_type:
        try:
            data = parse_json(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise NotOtlp(f"not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise NotOtlp("not a JSON object")
        if signal == "traces":
            data.setdefault("resourceSpans", [])
        else:
            data.setdefault("resourceLogs", [])
        return decode_json_line(data)
    try:
        if signal == "traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            return list(decode_traces(request))
        logs = ExportLogsServiceRequest()
        logs.ParseFromString(body)
        return list(decode_logs(logs))
    except DecodeError as exc:
        raise NotOtlp(f"does not decode as OTLP protobuf: {exc}") from None


# -- writing what was received, as the Collector's file exporter does ------------------------

Sink = Callable[[list[Record], str, Callable[[], str]], bool]
"""What a receiver hands an export to: its records, where they came from, and a function that
writes the export as a line of the Collector's file exporter (for a recording); False when it
cannot take more (the sender is told to retry)."""


def _hex_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: base64.b64decode(v).hex() if k in _ID_FIELDS and isinstance(v, str) else _hex_ids(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


def collector_line(message: ExportTraceServiceRequest | ExportLogsServiceRequest) -> str:
    """An export request as one line of the Collector's file exporter: OTLP/JSON, trace and
    span ids in hex."""
    return json.dumps(_hex_ids(json_format.MessageToDict(message)), separators=(",", ":"))


def body_line(body: bytes, content_type: str, signal: str) -> str:
    """A received OTLP/HTTP body (already decoded once) as a file-exporter line: JSON bodies
    as they came, on one line; protobuf ones in OTLP/JSON."""
    if "json" in content_type:
        return json.dumps(parse_json(body), separators=(",", ":"))
    message = ExportTraceServiceRequest() if signal == "traces" else ExportLogsServiceRequest()
    message.ParseFromString(body)
    return collector_line(message)
