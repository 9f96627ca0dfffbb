"""What was read twice: an exporter that retries an export the receiver had taken (its answer
lost), or a recording written twice, gives the same spans again. Counted twice, they move
findings to the wrong request and the prefix-kept figure with them, so each is counted once.

A span is the same span when its trace and span ids are (the ids OpenTelemetry makes unique);
a log record, when everything it holds is (ids, name, time, attributes, body): log records
have no id of their own, and a span's per-message events are told apart by their time and
content. A request body line is the same line when it is identical and carries something
that makes it one request (a timestamp, an id, a conversation id): a bare body written twice
cannot be told from an agent that sent it twice, and is counted each time.

What is remembered is a 64-bit hash a record (about 70 bytes in a set), of the newest
:data:`KEPT` records at most and half as many at least: a duplicate further apart than that
may be counted again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ctxkit.audit.otlp import Record
from ctxkit.wording import plural

__all__ = ["KEPT", "Duplicates"]

KEPT = 1 << 18
"""Records remembered at most (262,144, about 18 MB at the worst); the newest 131,072 always
are: more spans than one of the file exporter's rotated files holds at its default 100 MB, and
far more than arrive between an export and its retry."""

_LINE_IDS = ("timestamp", "time", "id", "request_id", "conversation_id")


class Duplicates:
    """Records and body lines seen, to drop the second copy of each; ``dropped`` counts
    them."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self.dropped = 0
        self._newer: set[int] = set()
        self._older: set[int] = set()

    def _seen(self, mark: int) -> bool:
        """Whether ``mark`` was seen (remember it if not): two generations, the older
        forgotten when the newer is full."""
        if mark in self._newer or mark in self._older:
            self.dropped += 1
            return True
        if len(self._newer) >= self.kept // 2:
            self._older, self._newer = self._newer, set()
        self._newer.add(mark)
        return False

    def records(self, records: Iterable[Record]) -> list[Record]:
        """The records not seen before (and, of several copies in ``records``, the first)."""
        return [record for record in records if not self._seen_record(record)]

    def _seen_record(self, record: Record) -> bool:
        if record.kind == "span":
            if not record.trace_id.strip("0") or not record.span_id.strip("0"):
                return False  # no ids to tell it by
            return self._seen(hash(("span", record.trace_id, record.span_id)))
        if not record.time_ns:
            return False
        try:
            content = repr((record.attributes, record.body))
        except RecursionError:  # nested past what repr follows: not told, counted
            return False
        return self._seen(
            hash(("log", record.trace_id, record.span_id, record.name, record.time_ns, content))
        )

    def line(self, data: Any) -> bool:
        """Whether a request body line was seen before: only lines that carry a timestamp or
        an id are told so (see the module's docstring)."""
        if not isinstance(data, Mapping) or not _identified(data):
            return False
        try:
            return self._seen(hash(("line", repr(data))))
        except RecursionError:  # nested past what repr follows: not told, counted
            return False

    def note(self) -> str:
        """What to say of the copies dropped; empty when none was."""
        if not self.dropped:
            return ""
        return (
            f"{plural(self.dropped, 'record')} read twice counted once (the same span's trace "
            "and span id, or the same request line again: an exporter's retry, or a file "
            "written twice)"
        )


def _identified(line: Mapping[str, Any]) -> bool:
    """Whether a body line says which request it is: a timestamp or an id of its own, or a
    conversation id (beside it or in the body's ``metadata``)."""
    if any(line.get(name) not in (None, "") for name in _LINE_IDS):
        return True
    for key in ("body", "request"):
        inner = line.get(key)
        if isinstance(inner, Mapping):
            line = inner
            break
    metadata = line.get("metadata")
    return isinstance(metadata, Mapping) and metadata.get("conversation_id") not in (None, "")
