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
Python really holds for it (tracemalloc, the auditor alone); and the peak resident memory of a
process auditing files of 1x and 2x the requests in the same conversations, streamed as
``ctxkit audit`` reads (goal, issue 32: at most 1.25x) and read whole first (as it read before).

    python benchmarks/audit.py [--conversations N] [--requests N] [--messages N] [--json F]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import subprocess
import sys
import tempfile
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
from ctxkit.audit.files import Reading  # noqa: E402
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


_PEAK = """
import re, sys
from ctxkit.audit import Auditor
from ctxkit.audit.files import Reading, read_paths
auditor = Auditor()
if sys.argv[2] == "streamed":
    for request in Reading([sys.argv[1]]):
        auditor.add(request)
        request.messages = []
else:  # every request read first, then audited: how ctxkit audit read files before
    for request in read_paths([sys.argv[1]]).requests:
        auditor.add(request)
        request.messages = []
# VmHWM, not ru_maxrss: the latter keeps the peak of the process this one was forked from.
status = open("/proc/self/status").read()
print(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1))
"""


def peak_mib(path: Path, way: str) -> float:
    """The peak resident memory of a process that audits ``path`` (``way``: streamed, as
    ``ctxkit audit`` reads, or read whole first)."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(path), way],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return int(done.stdout.split()[-1]) / 1024


def file_peaks(
    folder: Path, conversations: int, requests: int, window: int
) -> dict[str, tuple[float, float]]:
    """Peak memory auditing files of ``requests`` and twice as many requests in the same
    conversations, streamed and read whole."""
    files = []
    for count in (requests, 2 * requests):
        path = folder / f"fleet-{count}.jsonl"
        path.write_text("\n".join(exports(conversations, count, window)) + "\n")
        files.append(path)
    return {
        way: (peak_mib(files[0], way), peak_mib(files[1], way))
        for way in ("streamed", "read whole first")
    }


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
    with tempfile.TemporaryDirectory(prefix="ctxkit-bench-") as scratch:  # gone when done
        return measure(args, Path(scratch))


def measure(args: argparse.Namespace, folder: Path) -> int:
    lines = exports(args.conversations, args.requests, args.messages)
    bodies = [protobuf(line) for line in lines]
    total = args.conversations * args.requests

    def decode_json() -> None:
        for line in lines:
            for record in decode_json_line(json.loads(line)):
                json.loads(record.attributes["gen_ai.input.messages"])

    recording = folder / "fleet.jsonl"
    recording.write_text("\n".join(lines) + "\n")

    def audit_file() -> None:
        auditor = Auditor()
        for request in Reading([str(recording)]):  # what `ctxkit audit` does
            auditor.add(request)
            request.messages = []
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
    peaks = file_peaks(folder, args.conversations, args.requests, args.messages)
    print(
        f"peak memory auditing a file of {args.requests} and {2 * args.requests} requests per "
        "conversation (the same conversations), a process each:"
    )
    for way, (one, two) in peaks.items():
        print(f"  {way:<28}{one:>8.1f} MiB {two:>8.1f} MiB  {two / one:.2f}x")
    print("  (goal: at most 1.25x, streamed)")
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
                    "peak_mib": {way: list(pair) for way, pair in peaks.items()},
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
