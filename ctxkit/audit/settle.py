"""What ``ctxkit watch`` holds before it audits: each record waits ``settle_s`` after its own
arrival, so the audit keeps up with traffic that never pauses.

The wait is there for what arrives apart but belongs together: a span's log records (the
per-message events, the inference details) come in exports of their own, before or after the
span, and batches reach the receiver out of order. A span is released ``settle_s`` after it
arrived, with every log record of it that has arrived by then; a log record that names a span
waits for it (released with it when it comes) for at most ``hold_at_most`` settle periods,
then goes alone. Nothing waits on the stream going quiet, so under steady load every record
is audited about ``settle_s`` after it arrived, and what is held is what arrived within that
time (the receiver bounds it: past its limit, senders are told to retry).
"""

from __future__ import annotations

from collections import deque

from ctxkit.audit.otlp import Record

__all__ = ["Settling"]

Held = tuple[float, Record, str]


class Settling:
    """Records waiting to be audited, released in arrival order as they ripen."""

    def __init__(self, settle_s: float, *, hold_at_most: float) -> None:
        self.settle_s = settle_s
        self.hold_at_most = hold_at_most
        self.held = 0
        self._first: deque[Held] = deque()
        """Spans and log records that name no span, in arrival order."""
        self._logs: dict[tuple[str, str], list[Held]] = {}
        """(trace id, span id) -> the log records of that span, waiting for it."""
        self._log_order: deque[tuple[float, tuple[str, str]]] = deque()

    def add(self, arrival: float, records: list[Record], where: str) -> None:
        """One export's records, received at ``arrival`` (a monotonic time)."""
        for record in records:
            if record.kind == "log" and record.span_id:
                key = (record.trace_id, record.span_id)
                if key not in self._logs:
                    self._log_order.append((arrival, key))
                self._logs.setdefault(key, []).append((arrival, record, where))
            else:
                self._first.append((arrival, record, where))
            self.held += 1

    def ripe(self, now: float, *, everything: bool = False) -> list[tuple[Record, str]]:
        """What is ready at ``now`` (all of it with ``everything``), each span followed by the
        log records of it that have arrived."""
        out: list[tuple[Record, str]] = []
        cut = now - self.settle_s
        while self._first and (everything or self._first[0][0] <= cut):
            _, record, where = self._first.popleft()
            out.append((record, where))
            if record.kind == "span":
                out.extend(self._release((record.trace_id, record.span_id)))
        self.held -= len(out)
        expired = now - self.hold_at_most * self.settle_s
        while self._log_order and (everything or self._log_order[0][0] <= expired):
            alone = self._release(self._log_order.popleft()[1])
            self.held -= len(alone)
            out.extend(alone)
        return out

    def _release(self, key: tuple[str, str]) -> list[tuple[Record, str]]:
        return [(record, where) for _, record, where in self._logs.pop(key, ())]
