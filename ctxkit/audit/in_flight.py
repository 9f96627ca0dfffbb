"""An audit of files in the memory of the conversations in flight, not of all it read.

Files are read twice. The first reading keys every request (:meth:`Auditor.key_of`: nothing
of a conversation is kept) and learns which request is each conversation's last
(:class:`Ends`, kept on disk). The second audits as the files are read and, at each
conversation's last request, finishes it (:func:`~ctxkit.audit.report.finish`: its JSON object,
text lines and JUnit case to a :class:`~ctxkit.audit.finished.Spool` on disk, its counts to
the tally) and lets its audit go. The reports are then written from the spool, one
conversation at a time: the same reports, totals and exit code as an audit that held every
conversation to the end. What one cannot read twice (stdin, a FIFO) is spooled first.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import islice
from typing import Any

from ctxkit.audit.auditor import Auditor
from ctxkit.audit.checks import ConversationAudit, Finding
from ctxkit.audit.files import Reading, spooled
from ctxkit.audit.finished import Spool, Tally
from ctxkit.audit.report import Outcome, finish
from ctxkit.audit.request import Request

__all__ = ["Ends", "audit_files"]

Progress = Callable[[str, str, int], None]
"""Told (the reading: ``keying`` or ``auditing``, the path, bytes read of it) as files are
read."""


class Ends:
    """Which request is each conversation's last: noted request by request in a database on
    disk (one row a conversation, a small page cache), then read out into one bit a
    request. Held in memory at the end: ``requests / 8`` bytes."""

    def __init__(self) -> None:
        self._file = tempfile.NamedTemporaryFile(prefix="ctxkit-ends-", suffix=".db")  # noqa: SIM115
        self._db = sqlite3.connect(self._file.name)
        self._db.executescript(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;"
            "CREATE TABLE ends (key TEXT PRIMARY KEY, last INTEGER NOT NULL) WITHOUT ROWID;"
        )
        self._batch: list[tuple[str, int]] = []
        self.requests = 0
        self._last = bytearray()

    def saw(self, key: str) -> None:
        """The next request is of conversation ``key``."""
        self._batch.append((key, self.requests))
        self.requests += 1
        if len(self._batch) >= 512:
            self._flush()

    def _flush(self) -> None:
        self._db.executemany(
            "INSERT INTO ends VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET last = excluded.last",
            self._batch,
        )
        self._batch.clear()

    def close(self, keep: Callable[[str], bool] | None = None) -> int:
        """Every request noted: read the ends out (of the conversations ``keep`` keeps, all
        without it: a replay's shard), let the database go, and say how many there are."""
        self._flush()
        self._last = bytearray((self.requests + 7) // 8)
        kept = 0
        for key, last in self._db.execute("SELECT key, last FROM ends"):
            if keep is None or keep(key):
                self._last[last >> 3] |= 1 << (last & 7)
                kept += 1
        self._db.close()
        self._file.close()
        return kept

    def __contains__(self, request: int) -> bool:
        """Whether request number ``request`` (0-based, in reading order) ends its
        conversation."""
        return request < self.requests and bool(self._last[request >> 3] >> (request & 7) & 1)


@contextmanager
def _readable_twice(paths: Sequence[str]) -> Iterator[tuple[list[str], dict[str, str]]]:
    """The paths (stdin and streams copied to temporary files), and each copy's name as the
    user gave it (``<stdin>`` for ``-``), for what is said of it."""
    with spooled(paths) as copies:
        yield (
            copies,
            {
                copy: "<stdin>" if path == "-" else path
                for path, copy in zip(paths, copies, strict=True)
                if copy != path
            },
        )


def audit_files(
    paths: Sequence[str],
    form: str = "auto",
    *,
    windows: Mapping[str, int] | None = None,
    strict: bool = False,
    show_content: bool = False,
    progress: Progress | None = None,
) -> Outcome:
    """Audit the files in two readings (see the module); the outcome's conversations are a
    :class:`~ctxkit.audit.finished.Spool`, in the order they began. ``show_content``: keep the
    messages of the requests with findings, until their conversation is finished.

    Raises :class:`~ctxkit.audit.files.UnknownFormat` for a file in neither form (or stdin
    closed)."""

    def told(reading: str) -> Callable[[str, int], None] | None:
        if progress is None:
            return None
        return lambda path, done: progress(reading, path, done)

    with _readable_twice(paths) as (copies, names):
        first = Reading(copies, form, told("keying"), names)
        keying = Auditor(windows=windows)
        ends = Ends()
        try:
            for request in first:
                key, _ = keying.key_of(request)
                ends.saw(key)
        finally:
            ends.close()
        problems, notes = first.problems, first.notes
        del first, keying

        contents: dict[str, dict[int, list[Any]]] = {}

        def keep(audit: ConversationAudit, request: Request, found: list[Finding]) -> None:
            if show_content and found:
                contents.setdefault(audit.key, {})[audit.requests - 1] = request.messages

        auditor = Auditor(windows=windows, listener=keep)
        spool = Spool()
        tally = Tally()

        def done(key: str) -> None:
            shown = contents.pop(key, {}) if show_content else None
            finished = finish(auditor.release(key), strict=strict, contents=shown)
            spool.add(key, finished)
            tally.add(finished)

        # the second reading audits what the first keyed: a file that grew in between is
        # audited as it was
        second = islice(Reading(copies, form, told("auditing"), names), ends.requests)
        for number, request in enumerate(second):
            audit, _ = auditor.add(request)
            request.messages = []  # only fingerprints outlive a request
            spool.began(audit.key)
            if number in ends:
                done(audit.key)
        for key in list(auditor.conversations):  # (none, unless a file changed in between)
            done(key)
    tally.requests, tally.state_bytes = auditor.requests, auditor.state_bytes()
    return Outcome(spool, tally, problems, strict=strict, notes=sorted(notes), gate=True)
