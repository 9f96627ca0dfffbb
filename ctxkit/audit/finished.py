"""Finished conversations, kept on disk: what every report says of a conversation is made
once, when its last request has been checked (:func:`ctxkit.audit.report.finish`), and the
conversation's audit is then let go. The reports are written from here at the end, one
conversation at a time, so an audit of files holds the conversations in flight, not every
conversation it read; the tally keeps the totals exact.
"""

from __future__ import annotations

import json
import tempfile
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Finished", "Spool", "Tally"]


@dataclass(frozen=True, slots=True)
class Finished:
    """One conversation as the reports show it."""

    json: dict[str, Any]
    """Its object in the JSON report (and on the HTML page)."""
    lines: tuple[str, ...]
    """Its lines in the text summary, as recorded (made printable when printed)."""
    case: str
    """Its JUnit ``<testcase>``, indented as a child of the suite."""

    @property
    def failed(self) -> bool:
        return bool(self.json["verdict"] == "fail")

    @property
    def found(self) -> bool:
        """Whether it has findings (a passing conversation has none)."""
        return bool(self.json["findings"])


@dataclass
class Tally:
    """The totals the reports state before any conversation (the summary's last line, the
    JUnit suite, the exit code): counted as conversations finish, so none need be held."""

    requests: int = 0
    state_bytes: int = 0
    conversations: int = 0
    failing: int = 0
    found: int = 0
    """Conversations with findings."""
    findings: int = 0

    def add(self, finished: Finished) -> None:
        self.conversations += 1
        self.failing += finished.failed
        self.found += finished.found
        self.findings += finished.json["findings_total"]


class Spool:
    """Finished conversations in a temporary file, read back in the order the conversations
    began (the order of an audit that holds them all): a slot is taken at a conversation's
    first request (:meth:`began`) and filled when it ends, so what is held is one offset
    per conversation. Iterable as often as the reports need."""

    def __init__(self) -> None:
        # held for the spool's life (closed by close(), or deleted when collected)
        self._file = tempfile.NamedTemporaryFile(prefix="ctxkit-audit-", suffix=".jsonl")  # noqa: SIM115
        self._offsets = array("q")
        self._slots: dict[str, int] = {}
        """Conversations begun and not finished: key -> slot."""

    def began(self, key: str) -> None:
        """Note the conversation's place, if it is new."""
        if key not in self._slots:
            self._slots[key] = len(self._offsets)
            self._offsets.append(-1)

    def add(self, key: str, finished: Finished) -> None:
        """The conversation's results, in the slot taken when it began."""
        self.began(key)
        self._file.seek(0, 2)
        self._offsets[self._slots.pop(key)] = self._file.tell()
        record = [finished.json, finished.lines, finished.case]
        self._file.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")

    @property
    def open(self) -> list[str]:
        """Conversations begun and not finished."""
        return list(self._slots)

    def __len__(self) -> int:
        return len(self._offsets)

    def __iter__(self) -> Iterator[Finished]:
        """Every conversation from the first begun, through a reader of its own (two
        readings may be under way at once)."""
        if self._slots:
            raise RuntimeError(f"{len(self._slots)} conversation(s) begun were not finished")
        self._file.flush()
        with open(self._file.name, "rb") as reader:
            for offset in self._offsets:
                reader.seek(offset)
                data, lines, case = json.loads(reader.readline())
                yield Finished(data, tuple(lines), case)

    def close(self) -> None:
        self._file.close()
