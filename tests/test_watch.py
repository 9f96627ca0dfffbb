"""``ctxkit watch``: real OTLP from real instrumentations and from a seeded fleet, received
live, judged as ``ctxkit audit`` judges files; OTLP's answers for what does not decode and
for a full queue; two receivers sharded by conversation, summed by a real Prometheus, whose
alert fires on a planted breakage."""

from __future__ import annotations

import gzip
import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ctxkit.audit.otlp import _hex_ids_to_base64
from ctxkit.audit.receiver import MAX_BODY_BYTES
from tests.audit_fleet import fleet, otlp_exports, otlp_lines
from tests.otlp_files import details_log
from tests.ports import free_port
from tests.schemas import valid
from tests.system import require_binary

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Receiver:
    process: subprocess.Popen[str]
    url: str
    metrics_url: str
    report: Path
    log: Path
    grpc: str | None = None

    def stop(self) -> dict:
        self.process.terminate()
        self.process.wait(timeout=30)
        written = json.loads(self.report.read_text())
        valid("audit-report", written)
        return written

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as response:
            text = response.read().decode()
        pattern = rf"^{re.escape(name)} (\S+)$"
        found = [float(v) for v in re.findall(pattern, text, re.MULTILINE)]
        return sum(found)


@contextmanager
def watching(
    tmp_path: Path, *args: str, ctxkit: Sequence[str] = (sys.executable, "-m", "ctxkit")
) -> Iterator[Receiver]:
    """A ``ctxkit watch`` of its own (the command ``ctxkit`` names: this environment's unless
    said). Its ``--settle`` is 5 s unless ``args`` say otherwise: the fleets here arrive in
    shuffled exports, and a request that comes more than the settle time after a newer one of
    its conversation is checked alone (late), so all of a test's exports must arrive within
    it, on a loaded machine too."""
    log, report = tmp_path / f"watch-{time.monotonic_ns()}.log", tmp_path / "report.json"
    with log.open("w") as out:
        process = subprocess.Popen(
            [
                *ctxkit, "watch", "--otlp-http", "127.0.0.1:0",
                "--metrics-port", "0", "--settle", "5", "--report-json", str(report), *args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            text = log.read_text()
            otlp = re.search(r"receiving OTLP/HTTP on (http://\S+)", text)
            grpc_at = re.search(r"receiving OTLP/gRPC on (\S+)", text)
            metrics = re.search(r"metrics on (http://\S+)", text)
            if otlp and metrics:
                break
            assert process.poll() is None, text
            time.sleep(0.1)
        else:
            pytest.fail(f"ctxkit watch did not start:\n{log.read_text()}")
        yield Receiver(
            process, otlp.group(1), metrics.group(1), report, log, grpc_at and grpc_at.group(1)
        )
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def post(url: str, body: bytes, content_type: str, **headers: str) -> tuple[int, bytes, Any]:
    """POST; the status, the body and the (case-insensitive) headers of the answer."""
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"content-type": content_type, **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), response.headers
    except urllib.error.HTTPError as error:
        return error.code, error.read(), error.headers


def protobuf(line: str) -> bytes:
    request = ExportTraceServiceRequest()
    json_format.ParseDict(_hex_ids_to_base64(json.loads(line)), request)
    return request.SerializeToString()


def test_a_fleet_over_json_protobuf_and_gzip_is_judged_exactly(tmp_path: Path):
    conversations = fleet(seed=21, size=36)
    lines = otlp_lines(conversations, batch=5, seed=4)
    with watching(tmp_path) as receiver:
        traces = f"{receiver.url}/v1/traces"
        for number, line in enumerate(lines):
            if number % 4 == 0:
                answer = post(traces, line.encode(), "application/json")
            elif number % 4 == 1:
                answer = post(traces, protobuf(line), "application/x-protobuf")
            elif number % 4 == 2:
                answer = post(
                    traces, gzip.compress(protobuf(line)), "application/x-protobuf",
                    **{"content-encoding": "gzip"},
                )  # fmt: skip
            else:  # the Python SDK's exporter offers deflate too
                answer = post(
                    traces, zlib.compress(line.encode()), "application/json",
                    **{"content-encoding": "deflate"},
                )  # fmt: skip
            assert answer[0] == 200, answer
        report = receiver.stop()
    found = {
        c["key"]: {(f["property"], f["kind"], f["request"]) for f in c["findings"]}
        for c in report["conversations"]
    }
    for conv in conversations:
        assert found.get(conv.key, set()) == conv.expected, (conv.shape, conv.planted)


def test_a_fleet_over_otlp_grpc_is_judged_exactly_and_a_taken_port_is_a_sentence(
    tmp_path: Path,
):
    """What a Collector's otlp exporter sends (gRPC): the fleet's traces, and a logs export
    of a call recorded as the details event, each judged as over HTTP."""
    grpc = pytest.importorskip("grpc", reason="pip install 'ctxkit-llm[grpc]'")
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    conversations = fleet(seed=22, size=24)
    exports = otlp_exports(conversations, batch=5, seed=4)
    with watching(tmp_path, "--otlp-grpc", "127.0.0.1:0") as receiver:
        assert receiver.grpc is not None, receiver.log.read_text()
        with grpc.insecure_channel(receiver.grpc) as channel:
            traces = trace_service_pb2_grpc.TraceServiceStub(channel)
            for export in exports:
                traces.Export(export, timeout=10)
            logs_service_pb2_grpc.LogsServiceStub(channel).Export(details_log(), timeout=10)
        taken = subprocess.run(
            [sys.executable, "-m", "ctxkit", "watch", "--otlp-http", "127.0.0.1:0",
             "--otlp-grpc", receiver.grpc],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        report = receiver.stop()
    assert taken.returncode == 2
    assert f"cannot receive OTLP/gRPC on {receiver.grpc}: in use" in taken.stderr
    assert "Traceback" not in taken.stderr
    found = {
        c["key"]: {(f["property"], f["kind"], f["request"]) for f in c["findings"]}
        for c in report["conversations"]
    }
    for conv in conversations:
        assert found.get(conv.key, set()) == conv.expected, (conv.shape, conv.planted)
    spans = sum(len(s.spans) for e in exports for r in e.resource_spans for s in r.scope_spans)
    assert report["requests"] == spans + 1, "every span and the logs export's call"


def test_what_does_not_decode_gets_otlp_answers_and_changes_nothing(tmp_path: Path):
    with watching(tmp_path) as receiver:
        code, body, _ = post(
            f"{receiver.url}/v1/traces", b"\xff\x00garbage", "application/x-protobuf"
        )
        assert code == 400
        status = status_pb2.Status()
        status.ParseFromString(body)
        assert "does not decode" in status.message
        code, body, _ = post(f"{receiver.url}/v1/traces", b"[1, 2]", "application/json")
        assert code == 400
        assert "does not decode" in json.loads(body)["message"]
        code, _, _ = post(
            f"{receiver.url}/v1/traces", b"not gzip", "application/x-protobuf",
            **{"content-encoding": "gzip"},
        )  # fmt: skip
        assert code == 400
        code, _, _ = post(f"{receiver.url}/v1/metrics", b"", "application/x-protobuf")
        assert code == 404
        code, _, _ = post(f"{receiver.url}/v1/traces", b"[" * 100_000, "application/json")
        assert code == 400  # deeper than Python's parser goes: bad JSON like any other
        assert receiver.metric('ctxkit_audit_skipped_total{reason="undecodable"}') == 4
        # A span whose message list is nested too deeply is skipped; the watch goes on.
        deep = {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                {
                                    "traceId": "5b8efff798038103d269b633813fc60c",
                                    "spanId": "eee19b7ec3c1b174",
                                    "name": "chat",
                                    "attributes": [
                                        {
                                            "key": "gen_ai.input.messages",
                                            "value": {"stringValue": "[" * 100_000},
                                        }
                                    ],
                                }
                            ]
                        }
                    ]
                }
            ]
        }
        code, _, _ = post(
            f"{receiver.url}/v1/traces", json.dumps(deep).encode(), "application/json"
        )
        assert code == 200
        report = receiver.stop()
    assert report["requests"] == 0
    assert [p["reason"] for p in report["skipped"]] == [
        "gen_ai.input.messages is not a JSON list of messages"
    ]
    assert receiver.process.returncode == 0


def test_a_bomb_a_chunked_or_a_lying_sender_gets_an_answer_and_the_watch_goes_on(
    tmp_path: Path,
):
    """What a hostile or odd sender does costs it an answer, never the receiver's memory or a
    thread: a small gzip that inflates past the limit is refused unpacked (413), a body with
    no usable length is refused (411), an unknown encoding is a 400."""
    bomb = gzip.compress(b"\0" * (MAX_BODY_BYTES + 1024))
    assert len(bomb) < 100_000
    with watching(tmp_path) as receiver:
        traces = f"{receiver.url}/v1/traces"
        code, _, _ = post(
            traces, bomb, "application/x-protobuf", **{"content-encoding": "gzip"}
        )  # fmt: skip
        assert code == 413
        code, _, _ = post(traces, b"x", "application/json", **{"content-encoding": "br"})
        assert code == 400
        host, port = urllib.parse.urlsplit(receiver.url).netloc.split(":")
        for headers in (
            "Transfer-Encoding: chunked\r\n",
            "Content-Length: twelve\r\n",
            "Content-Length: -5\r\n",
        ):
            with socket.create_connection((host, int(port)), timeout=10) as raw:
                raw.sendall(
                    f"POST /v1/traces HTTP/1.1\r\nHost: x\r\n{headers}"
                    "Content-Type: application/json\r\n\r\n".encode()
                )
                assert raw.recv(200).startswith(b"HTTP/1.1 411"), headers
        code, _, _ = post(traces, b"{}", "application/json")
        assert code == 200, "the receiver goes on"
        report = receiver.stop()
    assert receiver.process.returncode == 0
    assert report["requests"] == 0


def test_a_full_queue_answers_retryable_503_and_loses_nothing_accepted(tmp_path: Path):
    lines = otlp_lines(fleet(seed=3, size=12), batch=1, seed=1)
    with watching(tmp_path, "--queue", "1", "--settle", "5") as receiver:
        answers = [post(f"{receiver.url}/v1/traces", protobuf(line), "application/x-protobuf")
                   for line in lines]  # fmt: skip
        codes = Counter(code for code, _, _ in answers)
        assert set(codes) <= {200, 503}
        assert codes[503] >= 1, codes
        assert all(h.get("Retry-After") == "1" for code, _, h in answers if code == 503)
        assert receiver.metric("ctxkit_audit_rejected_total") == codes[503]
        report = receiver.stop()
    assert report["requests"] == codes[200]  # one span per export: every accepted one audited


# -- two receivers and a real Prometheus ----------------------------------------------------


def _findings_in_process(conversations) -> list[str]:
    """The property of every finding an in-process audit of the fleet makes (a planted split
    pair can orphan several results: one finding each)."""
    from ctxkit.audit import Auditor, Request

    found = []
    for conv in conversations:
        auditor = Auditor()
        for index, messages in enumerate(conv.requests):
            request = Request(messages, index, "", "gpt-4o", key=conv.key, keyed_by="session.id")
            found.extend(f.property for f in auditor.add(request)[1])
    return found


def _query(prometheus: str, expr: str) -> list[dict]:
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]["result"]


def _wait(what: str, attempt, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            result = attempt()
        except (OSError, KeyError, IndexError):
            result = None
        if result:
            return result
        time.sleep(0.5)
    pytest.fail(f"gave up waiting for {what}")


def test_two_receivers_sharded_by_conversation_sum_in_prometheus(tmp_path: Path):
    """The Collector's load-balancing exporter sends each conversation to one receiver;
    Prometheus sums them, and the alert fires once per property, not per receiver."""
    prometheus = require_binary("prometheus")
    conversations = fleet(seed=31, size=24)
    shards = [[c for c in conversations if zlib.crc32(c.key.encode()) % 2 == n] for n in (0, 1)]
    assert all(shards)
    with (
        watching(tmp_path / "a" if (tmp_path / "a").mkdir() is None else tmp_path) as first,
        watching(tmp_path / "b" if (tmp_path / "b").mkdir() is None else tmp_path) as second,
    ):
        web = free_port()
        targets = [urllib.parse.urlsplit(r.metrics_url).netloc for r in (first, second)]
        config = tmp_path / "prometheus.yml"
        rules = tmp_path / "audit-alerts.yml"
        rules.write_text((ROOT / "dashboards" / "audit-alerts.yml").read_text())
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"rule_files: [{json.dumps(str(rules))}]\n"
            "scrape_configs:\n  - job_name: ctxkit-watch\n"
            f"    static_configs: [{{targets: {json.dumps(targets)}}}]\n"
        )
        with (tmp_path / "prometheus.log").open("w") as out:
            server = subprocess.Popen(
                [prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{web}", "--log.level=warn"],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{web}"
            _wait(  # scraped before the breakages arrive, so that increase() sees them
                "Prometheus to scrape both receivers",
                lambda: [r for r in _query(url, 'sum(up{job="ctxkit-watch"})')
                         if r["value"][1] == "2"],
            )  # fmt: skip
            for receiver, shard in zip((first, second), shards, strict=True):
                for line in otlp_lines(shard, batch=4, seed=2):
                    assert post(f"{receiver.url}/v1/traces", protobuf(line),
                                "application/x-protobuf")[0] == 200  # fmt: skip
            total = sum(len(c.requests) for c in conversations)
            summed = _wait(
                "both receivers scraped with every request",
                lambda: [r for r in _query(url, "sum(ctxkit_audit_requests_total)")
                         if float(r["value"][1]) == total],
            )  # fmt: skip
            assert summed
            planted = Counter(_findings_in_process(conversations))
            by_property = {
                r["metric"]["property"]: float(r["value"][1])
                for r in _query(url, "sum by (property) (ctxkit_audit_violations_total)")
                if float(r["value"][1])
            }
            assert by_property == {p: float(n) for p, n in planted.items()}, [
                (c["key"], c["late_requests"], c["findings"])
                for r in (first, second)
                for c in (r.stop()["conversations"])
                if c["findings"] or c["late_requests"]
            ]
            assert _query(url, "count(ctxkit_audit_requests_total)")[0]["value"][1] == "2"
            required = {p for p in planted if p in ("tool_pair_integrity", "ordering")}

            def firing() -> set[str]:
                """The properties the alert fires for, once it fires for all of them (a rule
                evaluation can catch one series before another)."""
                found = {
                    a["metric"]["property"]
                    for a in _query(url, 'ALERTS{alertstate="firing"}')
                    if a["metric"]["alertname"] == "CtxkitAuditRequiredViolation"
                }
                return found if found >= required else set()

            assert _wait("the required-violation alert for each property", firing) == required
        finally:
            server.terminate()
            server.wait(timeout=30)
        first.stop()
        second.stop()


def test_the_inspector_shows_an_audited_conversation_like_a_managed_one(tmp_path: Path):
    events = tmp_path / "events.jsonl"
    with watching(tmp_path, "--events", str(events), "--settle", "0.5") as receiver:
        agent = subprocess.run(
            [sys.executable, str(ROOT / "tests" / "record_instrumented.py"),
             "openllmetry-openai", "--endpoint", receiver.url],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert agent.returncode == 0, agent.stderr
        receiver.stop()
    shown = subprocess.run(
        [sys.executable, "-m", "ctxkit", "inspect", "--play", str(events), "--speed", "0",
         "--json"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    snapshot = json.loads(shown.stdout)
    assert snapshot["skipped"] == 0
    (conversation,) = snapshot["conversations"]
    assert conversation["conversation_id"].startswith("trace:")
    assert conversation["views"] == 3
    assert conversation["budget"] == 128_000  # gpt-4o-mini's context window
    assert conversation["compactions"] == 1  # the dropped calling message, inferred
    assert conversation["violations"] == 1
    assert "list files" not in events.read_text()  # no message content in the stream


def test_a_recording_that_cannot_be_written_is_said_once_and_the_audit_goes_on(tmp_path: Path):
    """``--record`` on a full disk (/dev/full): the first write fails, the watch says so once,
    stops recording, and goes on answering and auditing."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    lines = otlp_lines(fleet(seed=5, size=3), batch=5, seed=1)
    with watching(tmp_path, "--record", "/dev/full", "--settle", "0.5") as receiver:
        for line in lines:
            code, _, _ = post(f"{receiver.url}/v1/traces", line.encode(), "application/json")
            assert code == 200
        report = receiver.stop()
    log = receiver.log.read_text()
    assert log.count("stopped recording to /dev/full") == 1, log
    assert "Traceback" not in log
    assert report["requests"] > 0
