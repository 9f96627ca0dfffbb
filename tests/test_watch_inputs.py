"""``ctxkit watch``'s receiver and senders that do not finish: a body shorter than its
Content-Length is refused (400) and never audited, so the sender's retry is not counted
twice; a sender that leaves before its answer costs nothing, not even a line on stderr."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from ctxkit.audit.receiver import OtlpReceiver
from tests.audit_fleet import fleet, otlp_lines


class Sink:
    """What the receiver handed on, export by export; ``delay``: seconds it takes each."""

    def __init__(self, delay: float = 0.0) -> None:
        self.exports: list[Any] = []
        self.delay = delay

    def __call__(self, records: list[Any], where: str, line: Any) -> bool:
        time.sleep(self.delay)
        self.exports.append(records)
        return True


@contextmanager
def receiving(sink: Sink) -> Iterator[int]:
    receiver = OtlpReceiver(sink, host="127.0.0.1", port=0).start()
    try:
        yield receiver.port
    finally:
        receiver.stop()


def _head(length: int) -> bytes:
    return (
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def _answer(raw: socket.socket) -> bytes:
    data = b""
    while chunk := raw.recv(4096):
        data += chunk
    return data


EXPORT = otlp_lines(fleet(seed=2, size=2), batch=3, seed=1)[0].encode()


def test_a_body_shorter_than_its_length_is_400_and_not_audited():
    sink = Sink()
    with receiving(sink) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(_head(len(EXPORT)) + EXPORT[: len(EXPORT) // 2])
            raw.shutdown(socket.SHUT_WR)  # the sender stopped there
            answer = _answer(raw)
        assert answer.startswith(b"HTTP/1.1 400"), answer[:100]
        assert f"ended after {len(EXPORT) // 2} of its Content-Length {len(EXPORT)}".encode() in (
            answer
        )
        assert sink.exports == []
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(_head(len(EXPORT)) + EXPORT)  # the retry, whole
            raw.shutdown(socket.SHUT_WR)
            assert _answer(raw).startswith(b"HTTP/1.1 200")
        assert len(sink.exports) == 1, "the export is audited once"


def test_senders_that_leave_before_their_answer_leave_nothing_on_stderr(capfd):
    """Each closes with a reset while the receiver is still taking its export: the answer
    cannot be written. Before, each was a BrokenPipe or ConnectionReset traceback on stderr."""
    sink = Sink(delay=0.2)
    with receiving(sink) as port:
        for _ in range(3):
            raw = socket.create_connection(("127.0.0.1", port), timeout=10)
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            raw.sendall(_head(len(EXPORT)) + EXPORT)
            raw.close()  # a reset, at once
        deadline = time.monotonic() + 10
        while len(sink.exports) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # the answers were tried
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(_head(len(EXPORT)) + EXPORT)
            raw.shutdown(socket.SHUT_WR)
            assert _answer(raw).startswith(b"HTTP/1.1 200"), "the receiver goes on"
    assert len(sink.exports) == 4
    assert "Traceback" not in capfd.readouterr().err
    assert threading.active_count() < 50


@pytest.mark.parametrize("error", [BrokenPipeError, ConnectionResetError, TimeoutError])
def test_only_a_senders_leaving_is_kept_quiet(capfd, error):
    """What the server says of an error in a handler: nothing for a sender that left, the
    traceback for anything else (ctxkit's bug, which must be seen)."""
    from ctxkit.audit.receiver import _QuietServer

    server = _QuietServer.__new__(_QuietServer)  # its handle_error alone, no socket
    for raised, shown in ((error("gone"), False), (KeyError("bug"), True)):
        try:
            raise raised
        except Exception:
            server.handle_error(None, ("127.0.0.1", 1))
        assert ("Traceback" in capfd.readouterr().err) is shown, raised


def test_an_export_sent_again_after_its_answer_was_lost_counts_once():
    """An exporter that did not get its answer (a timeout, a dropped connection) sends the
    export again: the receiver took both, the audit counts the spans once and says so."""
    import asyncio
    import urllib.request

    from prometheus_client import CollectorRegistry

    from ctxkit.audit.publish import AuditMetrics
    from ctxkit.audit.receiver import Watch
    from ctxkit.events import EventBus

    watch = Watch(bus=EventBus(), metrics=AuditMetrics(CollectorRegistry()), port=0, settle_s=0)
    running = threading.Thread(target=lambda: asyncio.run(watch.run()), daemon=True)
    running.start()
    try:
        for _ in range(2):
            request = urllib.request.Request(
                f"http://127.0.0.1:{watch.port}/v1/traces",
                data=EXPORT,
                headers={"content-type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=10) as answer:
                assert answer.status == 200
    finally:
        watch.stop()
        running.join(30)
    spans = EXPORT.count(b'"spanId"')
    assert spans >= 2
    assert watch.auditor.requests == spans
    assert watch.duplicates.dropped == spans
