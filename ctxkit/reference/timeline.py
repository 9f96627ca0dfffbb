"""Every message a manager ever stored, and named points of its history: checkpoints.

The history a manager serves can be replaced, cleared or set back to a checkpoint; the
timeline keeps what came before and after all the same. A checkpoint's history can be read or
restored at any time, and restoring first names the history it leaves (an automatic
checkpoint), so a restore never loses the later messages. With a history file every change is
written there before it is made (:mod:`ctxkit.reference.journal`), and replaying the file's
records rebuilds the timeline.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ctxkit.reference.journal import HistoryFile, HistoryFileCorrupt, HistoryFileError
from ctxkit.tokens import MessageCost

__all__ = ["Checkpoint", "Timeline", "UnknownCheckpoint"]

log = logging.getLogger(__name__)


class UnknownCheckpoint(LookupError):
    """No checkpoint has this id."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A named point of the history: its id, label, time and length."""

    id: str
    label: str | None
    at: float
    messages: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


State = tuple[list[dict[str, Any]], list[MessageCost], list[float]]
"""A history's messages, their costs and their arrival times."""


class Timeline:
    """Every stored message by its sequence number, the current history as sequence numbers,
    and the checkpoints. It is the history's recorder: each change reaches it, under the
    history's lock, before the change is made; a failed write stops the change."""

    def __init__(self, file: HistoryFile | None = None) -> None:
        self.file = file
        self._messages: list[dict[str, Any]] = []
        self._costs: list[MessageCost] = []
        self._times: list[float] = []
        self._current: list[int] = []
        """Sequence numbers of the current history. Only ever appended to: a replace, clear
        or restore starts a new list, so a checkpoint can keep the list and a length."""
        self._points: dict[str, tuple[Checkpoint, list[int]]] = {}
        self.unwritten: list[dict[str, Any]] = []
        """Audit records a failed write left in memory, oldest first (see write_audit)."""

    # -- the history's recorder --------------------------------------------------------------

    def added(self, message: dict[str, Any], cost: MessageCost, at: float) -> None:
        self._write({"op": "add", "at": at, "message": message, "cost": dict(cost.parts)})
        self._current.append(self._store(message, cost, at))

    def replaced(self, messages: list[dict[str, Any]], costs: list[MessageCost], at: float) -> None:
        self._write(
            {
                "op": "set",
                "at": at,
                "messages": messages,
                "costs": [dict(cost.parts) for cost in costs],
            }
        )
        self._current = [self._store(m, c, at) for m, c in zip(messages, costs, strict=True)]

    def cleared(self, at: float) -> None:
        self._write({"op": "clear", "at": at})
        self._current = []

    # -- checkpoints -------------------------------------------------------------------------

    def checkpoint(self, label: str | None, at: float) -> Checkpoint:
        """Name the current history (call under the history's lock)."""
        point = Checkpoint(
            id=f"c{len(self._points) + 1}", label=label, at=at, messages=len(self._current)
        )
        self._write({"op": "checkpoint", **point.as_dict()})
        self._points[point.id] = (point, self._current)
        return point

    def restored(self, checkpoint_id: str, at: float) -> None:
        """Make the checkpoint's history the current one (call under the history's lock,
        after naming the current one)."""
        point, seqs = self._point(checkpoint_id)
        self._write({"op": "restore", "at": at, "id": checkpoint_id})
        self._current = seqs[: point.messages]

    def checkpoints(self) -> list[Checkpoint]:
        # list() copies the dict at once (one step under the GIL): a database store adds
        # checkpoints from a worker thread while the loop may be reading them.
        return [point for point, _ in list(self._points.values())]

    def state(self, checkpoint_id: str) -> State:
        """The checkpoint's history: new lists of the stored (shared, never edited) messages."""
        point, seqs = self._point(checkpoint_id)
        return self._state(seqs[: point.messages])

    def current(self) -> State:
        return self._state(self._current)

    def _point(self, checkpoint_id: str) -> tuple[Checkpoint, list[int]]:
        try:
            return self._points[checkpoint_id]
        except (KeyError, TypeError):
            known = ", ".join(self._points) or "none yet"
            raise UnknownCheckpoint(f"no checkpoint {checkpoint_id!r}; known: {known}") from None

    def _state(self, seqs: list[int]) -> State:
        messages, costs, times = self._messages, self._costs, self._times
        return [messages[s] for s in seqs], [costs[s] for s in seqs], [times[s] for s in seqs]

    # -- storage -----------------------------------------------------------------------------

    def _store(self, message: dict[str, Any], cost: MessageCost, at: float) -> int:
        self._messages.append(message)
        self._costs.append(cost)
        self._times.append(at)
        return len(self._messages) - 1

    def write(self, record: dict[str, Any]) -> None:
        """Append a record of the conversation's own beside its history (working state and
        tasks: :mod:`ctxkit.reference.working_state`) the way every change is written: under
        the history's lock (the caller holds it), audit entries still in memory first, so
        the file stays in the order things happened. Raises on a failed write."""
        self._write(record)

    def _write(self, record: dict[str, Any]) -> None:
        if self.file is not None:
            self.write_pending()
            self.file.append(record)

    def write_pending(self) -> None:
        """Append the audit records still in memory, oldest first (raises on a failed write,
        keeping the rest)."""
        if not self.unwritten or self.file is None:
            return
        had = len(self.unwritten)
        while self.unwritten:
            self.file.append(self.unwritten[0])
            del self.unwritten[0]
        log.info("%s: the %d audit entries kept in memory are written now", self.file.path, had)

    def write_audit(self, entry: dict[str, Any], at: float) -> HistoryFileError | None:
        """Keep an audit entry in the history file. One that cannot be written (a full disk)
        is kept in memory, in order, and goes first with the next write: a view never fails
        because its audit could not be persisted. Returns the write's error, if it failed."""
        record = {"op": "audit", "at": at, "entry": entry}
        try:
            self._write(record)
        except HistoryFileError as exc:
            self.unwritten.append(record)
            return exc
        return None

    def replay(
        self,
        path: Path,
        records: list[dict[str, Any]],
        *,
        recount: Callable[[dict[str, Any]], MessageCost] | None,
    ) -> list[dict[str, Any]]:
        """Rebuild from the records of the history file at ``path`` (writing nothing);
        returns the audit entries.

        ``recount``: count each message again (the file's encoding is not the manager's);
        None trusts the counts the file holds.
        """
        audit: list[dict[str, Any]] = []
        stored, costs, times = self._messages, self._costs, self._times
        for number, record in enumerate(records, start=2):
            op = record.get("op")
            try:
                at = record["at"]
                if type(at) is not float:
                    at = _number(at)
                if op == "add":  # the common case, kept short
                    message = record["message"]
                    if type(message) is not dict:
                        raise ValueError("holds a message that is not an object")
                    cost = recount(message) if recount else _cost(record["cost"])
                    self._current.append(len(stored))
                    stored.append(message)
                    costs.append(cost)
                    times.append(at)
                elif op == "set":
                    batch = [_message(m) for m in record["messages"]]
                    if recount:
                        batch_costs = [recount(m) for m in batch]
                    else:
                        batch_costs = [_cost(c) for c in record["costs"]]
                    if len(batch_costs) != len(batch):
                        raise ValueError("has a cost per message missing")
                    self._current = [
                        self._store(m, c, at) for m, c in zip(batch, batch_costs, strict=True)
                    ]
                elif op == "clear":
                    self._current = []
                elif op == "checkpoint":
                    label = record["label"]
                    if label is not None and not isinstance(label, str):
                        raise ValueError(f"has label {label!r}, not a string")
                    point = Checkpoint(
                        id=_text(record["id"]),
                        label=label,
                        at=at,
                        messages=record["messages"],
                    )
                    if point.messages != len(self._current):
                        raise ValueError("names a history of another length")
                    self._points[point.id] = (point, self._current)
                elif op == "restore":
                    point, seqs = self._point(record["id"])
                    self._current = seqs[: point.messages]
                elif op == "audit":
                    entry = record["entry"]
                    if not isinstance(entry, dict):
                        raise ValueError("has an entry that is not an object")
                    audit.append(entry)
            except (KeyError, TypeError, ValueError, UnknownCheckpoint) as exc:
                reason = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
                raise HistoryFileCorrupt.at_line(
                    path, number, f"is a bad {op!r} record: {reason}"
                ) from None
        return audit


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"has time {value!r}, not a number")
    return float(value)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"has id {value!r}, not a string")
    return value


def _message(value: Any) -> dict[str, Any]:
    if type(value) is not dict:
        raise ValueError("holds a message that is not an object")
    return value


def _cost(value: Any) -> MessageCost:
    if type(value) is not dict or not all(type(v) is int and v >= 0 for v in value.values()):
        raise ValueError("has a cost that is not an object of token counts")
    return MessageCost(sum(value.values()), tuple(value.items()))
