"""``ctxkit watch``: an OTLP/HTTP receiver that audits every request as it arrives.

The HTTP side only decodes and queues: it answers at once and never blocks the sender. An
export that does not decode gets OTLP's own answer (400 with a ``google.rpc.Status``); when
the queue is full the answer is 503 with ``Retry-After`` (a status OTLP exporters retry), so
memory stays bounded and nothing is lost that the sender does not know about. Bodies may be
gzip- or deflate-compressed (gzip is the Collector's default); an export is refused (413)
past :data:`MAX_BODY_BYTES`, sent or inflated, and a sender that stops mid-request is let go
after :data:`READ_TIMEOUT_S`.

The audit side takes records off the queue and holds each for ``settle_s`` after its own
arrival (:mod:`ctxkit.audit.settle`), so that a span's log records (sent in a separate export)
can join it and batches delivered out of order find their place, and the audit keeps up with
traffic that never pauses; then it keys, checks and publishes them in time order: events on a bus
(Prometheus, the inspector's JSON Lines stream) and the audit's own counters. A request older
than one already audited in its conversation is checked alone (it is counted as late).
Several receivers can share a fleet, each conversation sent to one of them (the Collector's
load-balancing exporter): every figure is per conversation or a sum. A span or log record
received twice (an exporter's retry of an export whose answer it lost) counts once
(:mod:`ctxkit.audit.duplicates`).
"""

from __future__ import annotations

import asyncio
import queue
import sys
import threading
import time
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO

from google.rpc import status_pb2

from ctxkit.audit.auditor import Auditor
from ctxkit.audit.duplicates import Duplicates
from ctxkit.audit.genai import Twins, requests_of
from ctxkit.audit.otlp import NotOtlp, Record, Sink, body_line, records_of
from ctxkit.audit.publish import AuditMetrics, publish_request
from ctxkit.audit.settle import Settling
from ctxkit.events import EventBus

__all__ = ["MAX_BODY_BYTES", "OtlpReceiver", "Watch"]

MAX_BODY_BYTES = 32 * 1024 * 1024
"""A larger export, as sent or once inflated, is refused (413): the Collector's default batch
is far below it."""

READ_TIMEOUT_S = 30.0
"""A connection that sends nothing for this long is closed (it holds a thread)."""

_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}

HOLD_AT_MOST = 6
"""A log record waits this many settle periods at most for the span it names."""

RECORDS_PER_EXPORT = 16
"""Records queued and held before the audit, per place in the queue (``--queue``): memory is
bounded by records, not by exports of any size, and a receiver that falls behind answers 503
(senders retry) rather than hold a backlog."""

_SIGNALS = {"/v1/traces": "traces", "/v1/logs": "logs"}
_INVALID_ARGUMENT = 3


class OtlpReceiver:
    """OTLP/HTTP on ``host:port`` (port 0: any free port); decoded exports go to ``sink``
    (with a function that writes the export as a file-exporter line, for a recording), which
    returns False when it cannot take more (the sender is told to retry)."""

    def __init__(
        self,
        sink: Sink,
        *,
        host: str = "127.0.0.1",
        port: int = 4318,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = READ_TIMEOUT_S

            def do_POST(self) -> None:
                receiver._handle(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.sink = sink
        self.on_error = on_error
        self.server = _QuietServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> OtlpReceiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        signal = _SIGNALS.get(handler.path.split("?")[0])
        content_type = handler.headers.get("content-type", "application/x-protobuf")
        json_body = "json" in content_type
        if signal is None:
            self._answer(handler, 404, json_body, f"no OTLP signal at {handler.path}")
            return
        length = _content_length(handler)
        if length is None:
            self._answer(handler, 411, json_body, "send the export with a Content-Length")
            handler.close_connection = True  # what was sent cannot be skipped
            return
        if length > MAX_BODY_BYTES:
            self._answer(handler, 413, json_body, f"export of {length} bytes is too large")
            handler.close_connection = True
            return
        encoding = handler.headers.get("content-encoding", "").strip().lower()
        sent = handler.rfile.read(length)
        if len(sent) < length:  # the sender stopped short: what came is no whole export
            handler.close_connection = True
            self._answer(
                handler,
                400,
                json_body,
                f"the body ended after {len(sent)} of its Content-Length {length} bytes",
            )
            return
        try:
            body = _inflated(sent, encoding)
            records = records_of(body, content_type, signal)
        except _TooLarge as exc:
            self._answer(handler, 413, json_body, str(exc))
            return
        except (NotOtlp, zlib.error) as exc:
            if self.on_error is not None:
                self.on_error(str(exc))
            self._answer(handler, 400, json_body, f"the export does not decode: {exc}")
            return
        if not self.sink(records, f"otlp {signal}", lambda: body_line(body, content_type, signal)):
            self._answer(handler, 503, json_body, "the audit queue is full; retry", retry=True)
            return
        self._answer(handler, 200, json_body, "")

    @staticmethod
    def _answer(
        handler: BaseHTTPRequestHandler,
        code: int,
        json_body: bool,
        message: str,
        retry: bool = False,
    ) -> None:
        if code == 200:
            data = b"{}" if json_body else b""  # an empty Export*ServiceResponse
        else:
            status = status_pb2.Status(code=_INVALID_ARGUMENT, message=message)
            if json_body:
                from google.protobuf import json_format

                data = json_format.MessageToJson(status).encode()
            else:
                data = status.SerializeToString()
        try:
            handler.send_response(code)
            handler.send_header(
                "content-type", "application/json" if json_body else "application/x-protobuf"
            )
            handler.send_header("content-length", str(len(data)))
            if retry:
                handler.send_header("retry-after", "1")
            handler.end_headers()
            handler.wfile.write(data)
        except OSError:  # the sender left before its answer: nothing to tell it
            handler.close_connection = True


class _QuietServer(ThreadingHTTPServer):
    """An HTTP server that says nothing of a sender that left early (a reset, a broken pipe,
    a timeout): the sender's exporter retries, and a traceback on stderr for each would bury
    what the watch prints. Anything else is ctxkit's bug, and is printed."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class _TooLarge(ValueError):
    """An export that inflates past :data:`MAX_BODY_BYTES`."""


def _content_length(handler: BaseHTTPRequestHandler) -> int | None:
    """The body's length as the sender gave it; None when it gave none that can be used
    (chunked, or not a number)."""
    if "chunked" in handler.headers.get("transfer-encoding", "").lower():
        return None
    text = handler.headers.get("content-length")
    if text is None:
        return 0
    return int(text) if text.strip().isdigit() else None


def _inflated(body: bytes, encoding: str) -> bytes:
    """``body`` as it was before the sender compressed it (``Content-Encoding``), never
    inflated past :data:`MAX_BODY_BYTES` (a small bomb is refused, not unpacked)."""
    if encoding in ("", "identity"):
        return body
    if encoding not in _WBITS:
        raise NotOtlp(f"content-encoding {encoding!r} is none of gzip, deflate, identity")
    inflater = zlib.decompressobj(_WBITS[encoding])
    data = inflater.decompress(body, MAX_BODY_BYTES + 1)
    if len(data) > MAX_BODY_BYTES or inflater.unconsumed_tail:
        raise _TooLarge(f"the export inflates past {MAX_BODY_BYTES} bytes")
    if not inflater.eof:
        raise NotOtlp(f"the {encoding} stream is cut off")
    return data


class Watch:
    """Receives, audits and publishes; ``run()`` until ``stop()``."""

    def __init__(
        self,
        *,
        bus: EventBus,
        metrics: AuditMetrics,
        auditor: Auditor | None = None,
        host: str = "127.0.0.1",
        port: int = 4318,
        queue_size: int = 1024,
        settle_s: float = 5.0,
        on_finding: Callable[[Any, Any, list[Any]], None] | None = None,
        grpc_address: tuple[str, int] | None = None,
        record: TextIO | None = None,
    ) -> None:
        self.bus = bus
        self.metrics = metrics
        self.auditor = auditor or Auditor()
        self.settle_s = settle_s
        self.on_finding = on_finding
        self.queue_size = queue_size
        self.queue: queue.Queue[tuple[float, list[Record], str]] = queue.Queue(queue_size)
        self.receiver = OtlpReceiver(self._offer, host=host, port=port, on_error=self._bad)
        self.grpc_receiver = None
        if grpc_address is not None:
            grpc_host, grpc_port = grpc_address
            try:  # grpcio is optional: imported only when asked for
                from ctxkit.audit.grpc_receiver import OtlpGrpcReceiver

                self.grpc_receiver = OtlpGrpcReceiver(
                    self._offer, host=grpc_host, port=grpc_port, max_message_bytes=MAX_BODY_BYTES
                )
            except (OSError, ImportError):
                self.receiver.server.server_close()  # nothing is left listening
                raise
        self._stopping = threading.Event()
        self.problems: list[Any] = []
        self.record = record
        """Where every accepted export is written as a file-exporter line (``--record``)."""
        self._record_lock = threading.Lock()
        self._twins = Twins()
        self.duplicates = Duplicates()
        """Spans and log records received before: an exporter that retries an export the
        receiver took (its answer lost) sends them again; they count once."""
        self.max_records = RECORDS_PER_EXPORT * queue_size
        """Records queued and held at most: past it, exports are answered 503."""
        self._count_lock = threading.Lock()
        self._queued = 0
        self._held = 0

    @property
    def port(self) -> int:
        return self.receiver.port

    def _offer(self, records: list[Record], where: str, line: Callable[[], str]) -> bool:
        with self._count_lock:
            waiting = self._queued + self._held
            if waiting and waiting + len(records) > self.max_records:
                self.metrics.rejected.inc()
                return False  # behind: the sender retries (and it is not recorded twice)
            try:
                self.queue.put_nowait((time.monotonic(), records, where))
            except queue.Full:
                self.metrics.rejected.inc()
                return False
            self._queued += len(records)
        self.metrics.queue_depth.set(self.queue.qsize())
        if self.record is not None:
            self._write_record(line() + "\n")
        return True

    def _write_record(self, text: str) -> None:
        """Append to ``--record``; a write that fails (a full disk) stops the recording,
        said once, and the audit goes on."""
        with self._record_lock:
            if self.record is None:
                return
            try:
                self.record.write(text)
                self.record.flush()
            except OSError as exc:
                name = getattr(self.record, "name", "the recording")
                print(f"ctxkit: stopped recording to {name}: {exc}", file=sys.stderr, flush=True)
                self.record = None

    def _bad(self, reason: str) -> None:
        self.metrics.skipped.labels("undecodable").inc()

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        """Audit what arrives until :meth:`stop`; what was received is audited before the
        receiver returns. Each record waits ``settle_s`` after its own arrival
        (:class:`~ctxkit.audit.settle.Settling`)."""
        self.receiver.start()
        if self.grpc_receiver is not None:
            self.grpc_receiver.start()
        settling = Settling(self.settle_s, hold_at_most=HOLD_AT_MOST)
        try:
            while True:
                stopping = self._stopping.is_set()
                while True:
                    try:
                        arrival, records, where = self.queue.get_nowait()
                    except queue.Empty:
                        break
                    with self._count_lock:
                        self._queued -= len(records)
                    settling.add(arrival, self.duplicates.records(records), where)
                self.metrics.queue_depth.set(self.queue.qsize())
                ready = settling.ripe(time.monotonic(), everything=stopping)
                self._held = settling.held
                if ready:
                    await self._audit(ready, final=stopping)
                if stopping and not settling.held and self.queue.empty():
                    break
                await asyncio.sleep(0.05)
        finally:
            self.receiver.stop()
            if self.grpc_receiver is not None:
                self.grpc_receiver.stop()

    async def _audit(self, records: list[tuple[Record, str]], *, final: bool) -> None:
        requests, problems = requests_of(records, self._twins, final=final)
        for problem in problems:
            self.metrics.skipped.labels("no content" if problem.hint else "malformed").inc()
        self.problems.extend(problems[-100:])
        del self.problems[:-100]
        for request in sorted(requests, key=lambda r: r.time_ns):
            audit, found = self.auditor.add(request)
            self.metrics.count(audit, request, found)
            await publish_request(self.bus, audit, request, found)
            if self.on_finding is not None and found:
                self.on_finding(audit, request, found)
            request.messages = []
        self.bus.flush()
