"""Stored conversations over time: which are active, idle, expired or archived, and cleanup.

A storage directory holds one history file per conversation, ``DIR/<id>.jsonl`` (the format
is in :mod:`ctxkit.reference.journal`). A conversation's state comes from its last activity:
the ``at`` of its last whole record, else the header's ``created``.

``active``      last activity less than ``idle_after`` (:data:`DEFAULT_IDLE_AFTER`) ago
``idle``        at least ``idle_after`` ago
``expired``     at least ``ttl`` (:data:`DEFAULT_TTL`) ago: :func:`cleanup` archives it
``archived``    moved to ``DIR/archive/``; a manager can still open it there
``unreadable``  not a ctxkit history, or damaged: listed with the reason, never moved unasked

Listing reads each file's first line and its tail, checks every line's checksum in between
(version 2 files; nothing is parsed, so it costs a fraction of a load), and takes no lock:
whether a process has a file open comes from /proc/locks
(:func:`~ctxkit.reference.journal.lock_holder`), since even a short-lived lock could make a
real writer's open fail. A version 1 file has no checksums: it is listed as not verified.
Cleanup never deletes anything: it moves files, holding each one's lock while it does, so a
history a manager has open is never moved, and a manager opening one meanwhile gets
:class:`~ctxkit.reference.journal.HistoryFileLocked`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

from ctxkit.durations import format_duration
from ctxkit.messages import text_of, tool_calls_of
from ctxkit.reference.journal import (
    OPS,
    HistoryFileCorrupt,
    HistoryFileError,
    Loaded,
    find_damage,
    lock_holder,
    lock_holders,
    parse_history,
    read_history_file,
    sync_directory,
)
from ctxkit.reference.timeline import Timeline
from ctxkit.reference.working_state import WorkingState

__all__ = [
    "ARCHIVE_DIR",
    "DEFAULT_IDLE_AFTER",
    "DEFAULT_TTL",
    "Action",
    "StoredConversation",
    "UnknownConversation",
    "cleanup",
    "details",
    "examine",
    "expired",
    "find",
    "preview",
    "scan",
    "state_of",
    "stored_details",
    "unknown_conversation",
]

DEFAULT_IDLE_AFTER = 300.0
"""Seconds without a record after which a conversation counts as idle (5 minutes)."""

DEFAULT_TTL = 24 * 3_600.0
"""Seconds without a record after which a conversation is expired (24 hours): an agent loop
that has not written for a day is done, or left, and its file can leave the live directory.
Expired is not deleted: :func:`cleanup` only moves the file to ``archive/``."""

ARCHIVE_DIR = "archive"
SUFFIX = ".jsonl"
TORN_SUFFIX = ".torn"
MEMORY_FILES = (".memory.sqlite", ".memory.sqlite-wal", ".memory.sqlite-shm")
"""What a history's recall memory leaves beside it (:mod:`ctxkit.reference.recall`): it moves
with the history."""

TAIL_BYTES = 64 * 1024
"""Bytes read from a file's end to find its last record (more only for a longer line)."""

HEADER_BYTES = 64 * 1024
"""The longest first line taken for a header (a real one is under 200 bytes)."""

State = Literal["active", "idle", "expired", "archived", "unreadable"]
Outcome = Literal["archived", "would_archive", "skipped"]


class UnknownConversation(LookupError):
    """No stored conversation has this id in the directory."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True, slots=True)
class StoredConversation:
    """One history file as a listing sees it (its first line, its tail, its checksums)."""

    id: str
    """The file's name without ``.jsonl``: what names it in ``DIR`` (in a database, the
    conversation's name)."""
    path: Path | str
    """The history file, or ``URL#conversation`` in a database."""
    state: State
    last_activity: float | None
    created: float | None
    size_bytes: int
    open_by: int | str | None
    """The pid of the live process holding the file's lock, if any (Linux: /proc/locks); in a
    database, who holds the conversation (``ctxkit pid N on HOST (...)``)."""
    encoding: str | None
    conversation_id: str | None = None
    """The header's id (the same as ``id`` when created as ``DIR / f"{id}.jsonl"``)."""
    reason: str | None = None
    """Why the file is ``unreadable``."""
    verified: bool = False
    """Every line passed its checksum. A version 1 file has none: only its ends were read."""

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        return data


@dataclass(frozen=True, slots=True)
class Action:
    """What :func:`cleanup` did, or would do, with one conversation, and why."""

    id: str
    source: Path | str
    outcome: Outcome
    reason: str
    destination: Path | str | None = None
    """Where it went: a path in ``archive/``; in a database, the conversation itself (it is
    marked archived, not moved)."""
    open: bool = False
    """Skipped because a live process holds the history open."""
    open_by: int | str | None = None
    """That process's pid, when /proc/locks tells it (in a database: who holds it)."""

    def describe(self) -> str:
        """One line for a person."""
        if self.outcome == "skipped":
            return f"skipped {self.id}: {self.reason}"
        verb = "archived" if self.outcome == "archived" else "would archive"
        return f"{verb} {self.id} -> {self.destination} ({self.reason})"

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["source"] = str(self.source)
        data["destination"] = None if self.destination is None else str(self.destination)
        return data


class _Unreadable(Exception):
    """A file that is not a readable ctxkit history; the message says why."""


# -- listing -----------------------------------------------------------------------------------


def scan(
    directory: str | os.PathLike[str],
    *,
    now: float | None = None,
    idle_after: float = DEFAULT_IDLE_AFTER,
    ttl: float = DEFAULT_TTL,
    archived: bool = False,
) -> list[StoredConversation]:
    """Every ``*.jsonl`` history in ``directory`` (and in its ``archive/`` with ``archived``),
    by id. A bad or foreign file is listed as ``unreadable`` with a reason; a file that
    vanishes while being looked at is left out. Raises :class:`OSError` when ``directory``
    cannot be read."""
    directory = Path(directory)
    now = time.time() if now is None else now
    places = [(directory, False)]
    if archived and (directory / ARCHIVE_DIR).is_dir():
        places.append((directory / ARCHIVE_DIR, True))
    found = []
    holders = lock_holders()
    for place, in_archive in places:
        for path in _histories(place):
            with contextlib.suppress(FileNotFoundError):
                found.append(
                    examine(
                        path,
                        now=now,
                        idle_after=idle_after,
                        ttl=ttl,
                        archived=in_archive,
                        holders=holders,
                    )
                )
    return found


def examine(
    path: str | os.PathLike[str],
    *,
    now: float | None = None,
    idle_after: float = DEFAULT_IDLE_AFTER,
    ttl: float = DEFAULT_TTL,
    archived: bool = False,
    holders: dict[tuple[int, int, int], int] | None = None,
) -> StoredConversation:
    """One history file's state, from its first line, its tail and its lines' checksums,
    without taking its lock.
    ``holders``: :func:`~ctxkit.reference.journal.lock_holders`, read once for many files.

    Raises :class:`FileNotFoundError` when there is no such file; anything else wrong with
    it gives state ``unreadable`` and a reason.
    """
    path = Path(path)
    now = time.time() if now is None else now
    name = path.name.removesuffix(SUFFIX)
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        try:
            header = _header(path, file)
            verified = header["version"] >= 2
            if verified:
                damage = find_damage(path, file, line=2, offset=file.tell())
                if damage is not None:
                    raise _Unreadable(
                        f"line {damage.line} (byte {damage.offset}) {damage.reason}: "
                        "damage, not a crash"
                    )
            last = _last_record_time(file, size)
        except (_Unreadable, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            return StoredConversation(
                id=name,
                path=path,
                state="unreadable",
                last_activity=None,
                created=None,
                size_bytes=size,
                open_by=lock_holder(path, holders),
                encoding=None,
                reason=reason,
            )
    created = _time_or_none(header.get("created"))
    last_activity = last if last is not None else created
    state, reason = state_of(
        last_activity, now=now, idle_after=idle_after, ttl=ttl, archived=archived
    )
    return StoredConversation(
        id=name,
        path=path,
        state=state,
        last_activity=last_activity,
        created=created,
        size_bytes=size,
        open_by=lock_holder(path, holders),
        encoding=_text_or_none(header.get("encoding")),
        conversation_id=_text_or_none(header.get("conversation_id")),
        reason=reason,
        verified=verified,
    )


def state_of(
    last_activity: float | None, *, now: float, idle_after: float, ttl: float, archived: bool
) -> tuple[State, str | None]:
    """A conversation's state from its last activity, and why it is unreadable if it is."""
    if last_activity is None:
        return "unreadable", "no time in its header or records"
    if archived:
        return "archived", None
    age = now - last_activity
    return ("expired" if age >= ttl else "idle" if age >= idle_after else "active"), None


def _histories(directory: Path) -> list[Path]:
    return sorted(
        path
        for path in directory.iterdir()
        if path.name.endswith(SUFFIX) and len(path.name) > len(SUFFIX) and path.is_file()
    )


def _header(path: Path, file: BinaryIO) -> dict[str, Any]:
    """The header, checked by the journal's own rules."""
    line = file.readline(HEADER_BYTES)
    if not line:
        raise _Unreadable("empty: no header yet")
    try:
        loaded = parse_history(path, line)
    except HistoryFileCorrupt as exc:
        raise _Unreadable(f"line 1 {exc.reason}") from None
    if loaded.header is None:
        why = loaded.torn.reason if loaded.torn else "is empty"
        raise _Unreadable(f"line 1 {why}: not a whole header")
    return loaded.header


def _last_record_time(file: BinaryIO, size: int) -> float | None:
    """The ``at`` of the last record that counts, reading only the file's end; None when the
    header is the last whole line.

    The journal's rule (:func:`~ctxkit.reference.journal.parse_history`): bytes after the
    last newline are a torn append; the last whole line is torn too when nothing follows it
    and it does not parse. Any other bad line is damage.
    """
    tail = _Tail(file, size)
    stop, fragment = tail.line_before(size, whole=False)
    may_be_torn = not fragment
    while stop > 0:
        start, line = tail.line_before(stop, whole=True)
        if start == 0:
            return None  # the header
        try:
            record = json.loads(line)
        except ValueError:
            if may_be_torn:
                may_be_torn, stop = False, start
                continue
            raise _Unreadable(
                f"the line at byte {start} is not JSON: damage, not a crash"
            ) from None
        if type(record) is not dict or record.get("op") not in OPS:
            raise _Unreadable(f"the line at byte {start} is not a history record")
        at = _time_or_none(record.get("at"))
        if at is None:
            raise _Unreadable(f"the record at byte {start} has no time")
        return at
    return None


class _Tail:
    """A file read backwards from ``size``, in chunks that double, for its last lines."""

    def __init__(self, file: BinaryIO, size: int) -> None:
        self.file = file
        self.start = size
        """Where ``data`` begins in the file; ``data`` runs to ``size``."""
        self.data = b""
        self.step = TAIL_BYTES

    def line_before(self, stop: int, *, whole: bool) -> tuple[int, bytes]:
        """The line ending at byte ``stop`` (just after its newline when ``whole``; for the
        bytes after the last newline, ``stop`` is the size) and where it starts."""
        end = stop - 1 if whole else stop
        while True:
            cut = self.data.rfind(b"\n", 0, max(0, end - self.start))
            if cut >= 0:
                begin = self.start + cut + 1
                break
            if self.start == 0:
                begin = 0
                break
            self._read_more()
        return begin, self.data[begin - self.start : end - self.start]

    def _read_more(self) -> None:
        step = min(self.step, self.start)
        self.step *= 2
        self.start -= step
        self.file.seek(self.start)
        chunk = self.file.read(step)
        if len(chunk) != step:
            raise _Unreadable("the file shrank while being read; look again")
        self.data = chunk + self.data


def _time_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# -- one conversation in full ------------------------------------------------------------------


def details(path: str | os.PathLike[str], *, newest: int = 5) -> dict[str, Any]:
    """A full read of one history file (taking no lock): its header, the current history's
    message and token counts, records by op, checkpoints, audit entries, a torn tail, the
    working state and tasks (``working_state``, ``active_tasks``, ``completed_tasks``), the
    recall memory beside it (``memory``: its path, or None), and the ``newest`` messages of the
    current history, each with a one-line ``preview``.

    Raises :class:`FileNotFoundError`, or
    :class:`~ctxkit.reference.journal.HistoryFileError` for a file that is not a whole history.
    """
    path = Path(path)
    size = path.stat().st_size
    loaded = read_history_file(path)
    if loaded.header is None:
        why = f"line 1 {loaded.torn.reason}" if loaded.torn else "the file is empty"
        raise HistoryFileError(f"{path}: {why}: no whole header, so not a ctxkit history (yet)")
    aside = path.with_name(path.name + TORN_SUFFIX)
    memory = path.with_name(path.name + MEMORY_FILES[0])
    return stored_details(
        loaded,
        name=path.name.removesuffix(SUFFIX),
        where=str(path),
        size=size,
        set_aside=str(aside) if aside.exists() else None,
        memory=str(memory) if memory.exists() else None,
        newest=newest,
    )


def stored_details(
    loaded: Loaded,
    *,
    name: str,
    where: str,
    size: int,
    set_aside: str | None,
    memory: str | None,
    newest: int,
) -> dict[str, Any]:
    """:func:`details` of a history read whole from anywhere (a file, a database's rows)."""
    assert loaded.header is not None
    path = loaded.path
    timeline = Timeline()
    audit = timeline.replay(path, loaded.records, recount=None)
    work = WorkingState()
    work.replay(path, loaded.records)
    messages, costs, times = timeline.current()
    header = loaded.header
    created = _time_or_none(header.get("created"))
    last = _time_or_none(loaded.records[-1]["at"]) if loaded.records else created
    first = max(0, len(messages) - max(0, newest))
    return {
        "id": name,
        "path": where,
        "header": header,
        "conversation_id": _text_or_none(header.get("conversation_id")),
        "encoding": _text_or_none(header.get("encoding")),
        "created": created,
        "last_activity": last,
        "size_bytes": size,
        "messages": len(messages),
        "tokens": sum(cost.total for cost in costs),
        "records": dict(Counter(record["op"] for record in loaded.records)),
        "checkpoints": [point.as_dict() for point in timeline.checkpoints()],
        "audit_entries": len(audit),
        "torn": None
        if loaded.torn is None
        else {
            "line": loaded.torn.line,
            "offset": loaded.torn.offset,
            "length": loaded.torn.length,
            "reason": loaded.torn.reason,
        },
        "set_aside": set_aside,
        **work.as_dict(),
        "memory": memory,
        "newest": [
            {
                "index": index,
                "role": messages[index].get("role"),
                "tokens": costs[index].total,
                "at": times[index],
                "preview": preview(messages[index]),
                "message": messages[index],
            }
            for index in range(first, len(messages))
        ],
    }


def preview(message: dict[str, Any], width: int = 80) -> str:
    """A message's text on one line, at most ``width`` characters; a message without text
    names the calls it makes."""
    text = " ".join(text_of(message).split())
    if not text:
        try:
            calls = tool_calls_of(message)
        except ValueError:
            calls = ()
        text = f"[calls {', '.join(calls)}]" if calls else ""
    return text if len(text) <= width else text[: width - 3] + "..."


# -- cleanup -----------------------------------------------------------------------------------


def cleanup(
    directory: str | os.PathLike[str],
    *,
    ttl: float = DEFAULT_TTL,
    now: float | None = None,
    ids: Iterable[str] | None = None,
    dry_run: bool = False,
) -> list[Action]:
    """Archive (move to ``directory/archive/``) every expired conversation, or exactly the
    conversations named by ``ids`` whatever their age. Never deletes anything.

    A conversation a live process has open is skipped, and its :class:`Action` says by
    which pid: each file's lock is taken (without waiting) and held across the move, so no
    manager can open it meanwhile. Its ``<name>.jsonl.torn`` and its recall memory
    (``<name>.jsonl.memory.sqlite``, with SQLite's ``-wal`` and ``-shm``) move with it; a name
    taken in
    ``archive/`` gets a number (``<id>.1.jsonl``), so nothing is overwritten. ``dry_run``
    changes nothing and takes no lock. Raises :class:`UnknownConversation`, before moving
    anything, when an id names no conversation in ``directory``.
    """
    if isinstance(ids, str):
        raise TypeError(f"ids must be a list of ids, not the string {ids!r}")
    directory = Path(directory)
    now = time.time() if now is None else now
    if not directory.is_dir():
        raise NotADirectoryError(f"no such directory: {directory}")
    archive = directory / ARCHIVE_DIR
    if ids is None:
        chosen = expired(scan(directory, now=now, ttl=ttl), now=now, ttl=ttl)
    else:
        paths = [find(directory, name) for name in dict.fromkeys(ids)]
        chosen = [(examine(path, now=now), "named") for path in paths]
    if dry_run:
        return [_plan(found, reason, archive) for found, reason in chosen]
    if not chosen:
        return []
    archive.mkdir(exist_ok=True)
    with _locked(archive):  # one cleanup at a time picks names in archive/
        actions = [
            _archive(found, reason, archive, ttl=ttl if ids is None else None, now=now)
            for found, reason in chosen
        ]
    if any(action.outcome == "archived" for action in actions):
        sync_directory(archive)
        sync_directory(directory)
    return actions


def expired(
    found: Iterable[StoredConversation], *, now: float, ttl: float
) -> list[tuple[StoredConversation, str]]:
    """The expired ones of ``found``, each with the reason a cleanup gives."""
    return [
        (one, f"expired: last activity {_age(now, one)}, ttl {format_duration(ttl)}")
        for one in found
        if one.state == "expired"
    ]


def find(directory: str | os.PathLike[str], name: str, *, archived: bool = False) -> Path:
    """The history file of conversation ``name`` in ``directory`` (or, with ``archived``, in
    its ``archive/`` when not in ``directory``). Raises :class:`UnknownConversation` saying
    which ids there are."""
    directory = Path(directory)
    valid = bool(name) and "/" not in name and name not in (".", "..")
    path = directory / f"{name}{SUFFIX}"
    if valid and path.is_file():
        return path
    stored = directory / ARCHIVE_DIR / f"{name}{SUFFIX}"
    if valid and stored.is_file():
        if archived:
            return stored
        raise UnknownConversation(f"{name!r} is archived already (in {stored.parent})")
    known = [path.name.removesuffix(SUFFIX) for path in _histories(directory)]
    raise unknown_conversation(name, str(directory), known)


def unknown_conversation(name: str, where: str, known: list[str]) -> UnknownConversation:
    """The error for an id that names no conversation ``where``, saying which ids there are."""
    listed = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "") if known else "none"
    return UnknownConversation(f"no conversation {name!r} in {where} (it has: {listed})")


def _age(now: float, found: StoredConversation) -> str:
    if found.last_activity is None:
        return "unknown"
    return f"{format_duration(now - found.last_activity)} ago"


def _plan(found: StoredConversation, reason: str, archive: Path) -> Action:
    if found.open_by is not None:
        return _opened(found, found.open_by)
    return Action(found.id, found.path, "would_archive", reason, _free_name(archive, found.id))


def _skipped(found: StoredConversation, reason: str) -> Action:
    return Action(found.id, found.path, "skipped", reason)


def _opened(found: StoredConversation, pid: int | str | None) -> Action:
    by = "another process" if pid is None else pid if isinstance(pid, str) else f"process {pid}"
    return Action(found.id, found.path, "skipped", f"open by {by}", open=True, open_by=pid)


def _archive(
    found: StoredConversation, reason: str, archive: Path, *, ttl: float | None, now: float
) -> Action:
    """Move one history (and its ``.torn``) into ``archive`` under the history's lock.

    ``ttl``: archive only if it is still expired once locked (a writer may have come back).
    """
    path = found.path
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return _skipped(found, "gone meanwhile")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _opened(found, lock_holder(path))
        try:
            if os.stat(path).st_ino != os.fstat(fd).st_ino:
                return _skipped(found, "replaced meanwhile")
        except FileNotFoundError:
            return _skipped(found, "gone meanwhile")
        if ttl is not None:
            again = examine(path, now=now, ttl=ttl)
            if again.state != "expired":
                return _skipped(found, f"written to meanwhile ({again.state})")
        destination = _free_name(archive, found.id)
        os.rename(path, destination)
        for suffix in (TORN_SUFFIX, *MEMORY_FILES):
            beside = path.with_name(path.name + suffix)
            with contextlib.suppress(FileNotFoundError):
                os.rename(beside, destination.with_name(destination.name + suffix))
        return Action(found.id, path, "archived", reason, destination)
    finally:
        os.close(fd)  # releases the lock, after the move


def _free_name(archive: Path, name: str) -> Path:
    """``archive/<name>.jsonl``, or ``<name>.1.jsonl`` and so on: a name whose history and
    the files beside it (``.torn``, the memory) are all untaken."""
    for number in range(1_000_000):
        stem = name if number == 0 else f"{name}.{number}"
        candidate = archive / f"{stem}{SUFFIX}"
        beside = [archive / f"{stem}{SUFFIX}{suffix}" for suffix in (TORN_SUFFIX, *MEMORY_FILES)]
        if not any(os.path.lexists(path) for path in (candidate, *beside)):
            return candidate
    raise OSError(f"{archive}: no free name for {name}")


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
