"""What ``ctxkit watch`` holds before it audits: each record waits ``settle_s`` after its own
arrival, so the audit keeps up with traffic that never pauses.

The wait is there for what arrives apart but belongs together: a span's log records (the
per-message events, the inference details) come in exports of their own, before or after the span,
and batches reach the receiver out of order. A span is released ``settle_s`` after it arrived,
with every log record of it that has arrived by then, and with every record of its conversation
(its recorded key, else its trace) that arrived since but was recorded before it: a batch
delivered up to ``settle_s`` late is audited in its place, not after newer requests of its
conversation (other conversations are left to ripen: another agent's clock may run ahead); a
log record that names a span waits for it (released with it when it comes) for at most
``hold_at_most`` settle periods, then goes alone. Nothing waits on the stream going quiet, so
under steady load every record is audited about ``settle_s`` after it arrived, and what is held
is what arrived within that time (the receiver bounds it: past its limit, senders are told to
retry).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque

from ctxkit.audit.otlp import Record

__all__ = ["Settling"]

Held = tuple[float, Record, str]


class Settling:
    """Records waiting to be audited, released as they ripen, each with the held records of
    its conversation recorded before it."""

    def __init__(self, settle_s: float, *, hold_at_most: float) -> None:
        self.settle_s = settle_s
        self.hold_at_most = hold_at_most
        self.held = 0
        self._held: dict[int, tuple[Record, str]] = {}
        """Spans and log records that name no span, by their place in arrival order."""
        self._by_arrival: deque[tuple[float, int]] = deque()
        self._by_time: dict[str, list[tuple[int, int]]] = {}
        """Per conversation (its recorded key, else its trace), a heap of (recorded time,
        place); places already released are skipped."""
        self._places = itertools.count()
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
                place = next(self._places)
                self._held[place] = (record, where)
                self._by_arrival.append((arrival, place))
                heapq.heappush(
                    self._by_time.setdefault(_group(record), []), (record.time_ns, place)
                )
            self.held += 1

    def ripe(self, now: float, *, everything: bool = False) -> list[tuple[Record, str]]:
        """What is ready at ``now`` (all of it with ``everything``): what arrived
        ``settle_s`` ago or more, each with what arrived since in its conversation but was
        recorded before it (a batch delivered late finds its place), each span followed by
        the log records of it that have arrived."""
        out: list[tuple[Record, str]] = []
        cut = now - self.settle_s
        while self._by_arrival and (everything or self._by_arrival[0][0] <= cut):
            place = self._by_arrival.popleft()[1]
            if place in self._held:
                record = self._take(place, out)
                self._take_older(record, out)
        self.held -= len(out)
        expired = now - self.hold_at_most * self.settle_s
        while self._log_order and (everything or self._log_order[0][0] <= expired):
            alone = self._release(self._log_order.popleft()[1])
            self.held -= len(alone)
            out.extend(alone)
        return out

    def _take(self, place: int, out: list[tuple[Record, str]]) -> Record:
        record, where = self._held.pop(place)
        out.append((record, where))
        if record.kind == "span":
            out.extend(self._release((record.trace_id, record.span_id)))
        return record

    def _take_older(self, record: Record, out: list[tuple[Record, str]]) -> None:
        """Take the held records of ``record``'s conversation recorded before it (no other
        conversation's: another agent's clock may run ahead)."""
        group = _group(record)
        heap = self._by_time.get(group)
        while heap and heap[0][0] <= record.time_ns:
            place = heapq.heappop(heap)[1]
            if place in self._held:
                self._take(place, out)
        if not heap:
            self._by_time.pop(group, None)

    def _release(self, key: tuple[str, str]) -> list[tuple[Record, str]]:
        return [(record, where) for _, record, where in self._logs.pop(key, ())]


def _group(record: Record) -> str:
    """What a record's requests are ordered within: its recorded conversation key, else its
    trace."""
    attributes = record.attributes
    key = attributes.get("gen_ai.conversation.id") or attributes.get("session.id")
    return f"key:{key}" if key else f"trace:{record.trace_id}"
