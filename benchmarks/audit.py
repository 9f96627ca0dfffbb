"""How fast ``ctxkit audit`` and ``ctxkit watch`` check recorded requests, beside merely
decoding the same OTLP, on one core.

A fleet of agent loops (Chat Completions messages with tool calls, each request the newest
``--messages`` messages of its conversation, the system prompt first) is recorded as OTLP:
spans with ``gen_ai.input.messages``, 50 spans per export. Four runs over the same exports:

* decode JSON: the OTLP/JSON lines into records (the Collector file exporter's form), and each
  span's ``gen_ai.input.messages`` (a JSON text) into messages: what any reader of the
  messages must do;
* audit file: read the same lines, make requests, key and check them (``ctxkit audit``'s work);
* decode protobuf: the same exports as OTLP/HTTP protobuf bodies into records and messages;
* audit OTLP: the protobuf bodies through ``ctxkit watch``'s path (records, requests, checks,
  events to Prometheus metrics).

Goals (issue 22): auditing costs at most 2x decoding; at least 2,000 requests of 20 messages a
second on one core. Memory: what a conversation keeps between requests (fingerprints and
counts, as :meth:`~ctxkit.audit.checks.ConversationAudit.state_bytes` states them) and what
Python really holds for it (tracemalloc, the auditor alone).

    python benchmarks/audit.py [--conversations N] [--requests N] [--messages N] [--json F]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from google.protobuf import json_format  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)
from prometheus_client import CollectorRegistry  # noqa: E402

from ctxkit.audit import Auditor  # noqa: E402
from ctxkit.audit.genai import requests_of  # noqa: E402
from ctxkit.audit.otlp import _hex_ids_to_base64, decode_json_line, records_of  # noqa: E402
from ctxkit.audit.publish import AuditMetrics, publish_request  # noqa: E402
from ctxkit.events import EventBus  # noqa: E402
from ctxkit.telemetry.prometheus import PrometheusMetrics  # noqa: E402

SPANS_PER_EXPORT = 50


def conversation(number: int, requests: int, window: int) -> list[list[dict[str, Any]]]:
    """An agent loop: user, assistant call, tool result, assistant answer, ...; each request
    the system prompt and the newest ``window - 1`` messages, never starting on a result."""
    system = {"role": "system", "content": f"You are agent {number}. Answer briefly."}
    history: list[dict[str, Any]] = []
    views = []
    turn = 0
    while len(views) < requests:
        call_id = f"call_{number}_{turn}"
        history.append({"role": "user", "content": f"Question {turn}: what is in file {turn}?"})
        views.append(history)
        history = [
            *history,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": f'{{"n": {turn}}}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": f"contents {turn} " * 20},
        ]
        views.append(history)
        history = [*history, {"role": "assistant", "content": f"File {turn} holds data."}]
        turn += 1
    out = []
    for view in views[:requests]:
        tail = view[-(window - 1) :]
        while tail and tail[0]["role"] == "tool":
            tail = tail[1:]
        out.append([system, *tail])
    return out


def exports(conversations: int, requests: int, window: int) -> list[str]:
    """The fleet as OTLP/JSON lines (hex ids), time-interleaved across conversations."""
    spans = []
    fleet = [conversation(n, requests, window) for n in range(conversations)]
    for index in range(requests):
        for number, views in enumerate(fleet):
            start = 1_760_000_000_000_000_000 + (index * conversations + number) * 1_000_000
            spans.append(
                {
                    "traceId": f"{number + 1:032x}",
                    "spanId": f"{len(spans) + 1:016x}",
                    "name": "chat gpt-4o",
                    "startTimeUnixNano": str(start),
                    "endTimeUnixNano": str(start + 500_000),
                    "attributes": [
                        {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                        {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
                        {"key": "gen_ai.conversation.id", "value": {"stringValue": f"c{number}"}},
                        {
                            "key": "gen_ai.input.messages",
                            "value": {"stringValue": json.dumps(views[index])},
                        },
                    ],
                }
            )
    lines = []
    for at in range(0, len(spans), SPANS_PER_EXPORT):
        lines.append(
            json.dumps(
                {
                    "resourceSpans": [
                        {
                            "resource": {"attributes": []},
                            "scopeSpans": [
                                {
                                    "scope": {"name": "bench"},
                                    "spans": spans[at : at + SPANS_PER_EXPORT],
                                }
                            ],
                        }
                    ]
                }
            )
        )
    return lines


def protobuf(line: str) -> bytes:
    request = ExportTraceServiceRequest()
    json_format.ParseDict(_hex_ids_to_base64(json.loads(line)), request)
    return request.SerializeToString()


def timed(work: Any) -> float:
    gc.collect()
    start = time.process_time()
    work()
    return time.process_time() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--requests", type=int, default=40, help="per conversation")
    parser.add_argument("--messages", type=int, default=20, help="per request")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    lines = exports(args.conversations, args.requests, args.messages)
    bodies = [protobuf(line) for line in lines]
    total = args.conversations * args.requests

    def decode_json() -> None:
        for line in lines:
            for record in decode_json_line(json.loads(line)):
                json.loads(record.attributes["gen_ai.input.messages"])

    def audit_file() -> None:
        auditor = Auditor()
        records = [(r, "f") for line in lines for r in decode_json_line(json.loads(line))]
        requests, _ = requests_of(records)
        for request in sorted(requests, key=lambda r: r.time_ns):
            auditor.add(request)
        assert auditor.requests == total, auditor.requests

    def decode_protobuf() -> None:
        for body in bodies:
            for record in records_of(body, "application/x-protobuf", "traces"):
                json.loads(record.attributes["gen_ai.input.messages"])

    def audit_otlp() -> None:
        registry = CollectorRegistry()
        bus = EventBus()
        bus.subscribe(PrometheusMetrics(registry))
        metrics = AuditMetrics(registry)
        auditor = Auditor()

        async def run() -> None:
            for body in bodies:
                records = [
                    (r, "otlp") for r in records_of(body, "application/x-protobuf", "traces")
                ]
                requests, _ = requests_of(records)
                for request in sorted(requests, key=lambda r: r.time_ns):
                    audit, found = auditor.add(request)
                    metrics.count(audit, request, found)
                    await publish_request(bus, audit, request, found)
                bus.flush()

        asyncio.run(run())
        assert auditor.requests == total

    runs = {
        "decode JSON": decode_json,
        "audit file": audit_file,
        "decode protobuf": decode_protobuf,
        "audit OTLP": audit_otlp,
    }
    seconds = {name: min(timed(work) for _ in range(args.repeat)) for name, work in runs.items()}

    records = [(r, "f") for line in lines for r in decode_json_line(json.loads(line))]
    requests, _ = requests_of(records)
    del records
    auditor = Auditor()
    auditor.add(requests[0])  # the token encoding loaded before measuring
    tracemalloc.start()
    for request in sorted(requests[1:], key=lambda r: r.time_ns):
        auditor.add(request)
        request.messages = []
    del requests
    gc.collect()
    with_auditor = tracemalloc.get_traced_memory()[0]
    state_bytes = auditor.state_bytes()
    del auditor
    gc.collect()
    grown = with_auditor - tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    state = state_bytes / args.conversations
    held = grown / args.conversations

    rows = [
        {
            "run": name,
            "seconds": round(seconds[name], 3),
            "requests_per_s": round(total / seconds[name]),
        }
        for name in runs
    ]
    ratio_file = seconds["audit file"] / seconds["decode JSON"]
    ratio_otlp = seconds["audit OTLP"] / seconds["decode protobuf"]
    print(
        f"{total} requests of {args.messages} messages ({args.conversations} conversations), "
        f"{platform.python_implementation()} {platform.python_version()}, one core "
        "(process time)"
    )
    print(f"{'run':<18}{'seconds':>9}{'requests/s':>12}")
    for row in rows:
        print(f"{row['run']:<18}{row['seconds']:>9.3f}{row['requests_per_s']:>12,}")
    print(f"audit file / decode JSON:      {ratio_file:.2f}x (goal <= 2x)")
    print(f"audit OTLP / decode protobuf:  {ratio_otlp:.2f}x")
    print(
        f"memory per conversation: {state:,.0f} bytes of fingerprints and counts (state_bytes), "
        f"{held:,.0f} bytes held by Python (tracemalloc)"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "requests": total,
                    "messages": args.messages,
                    "runs": rows,
                    "audit_over_decode_json": ratio_file,
                    "audit_over_decode_protobuf": ratio_otlp,
                    "state_bytes_per_conversation": state,
                    "python_bytes_per_conversation": held,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
