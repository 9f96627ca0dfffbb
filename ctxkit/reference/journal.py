"""The history file: an append-only JSON Lines journal, one record per change, locked.

Line 1 is a header; every later line is one record, written whole by one ``write``:

``{"ctxkit": "history", "version": 2, "conversation_id": ..., "encoding": ..., "created": t}``
    the header.
``{"op": "add", "at": t, "message": {...}, "cost": {"user": 12, ...}}``
    a message added; ``cost`` is its token count by category in the header's encoding, so
    loading never re-encodes.
``{"op": "set", "at": t, "messages": [...], "costs": [...]}``
    the history replaced (one line, so a crash leaves all of it or none).
``{"op": "clear", "at": t}``
    the history emptied (what came before stays in the file).
``{"op": "checkpoint", "at": t, "id": "c1", "label": ..., "messages": n}``
    the history as it is now, named.
``{"op": "restore", "at": t, "id": "c1"}``
    the history set back to a checkpoint's (what came after stays in the file).
``{"op": "audit", "at": t, "entry": {...}}``
    a view left messages out or shortened them (see :mod:`ctxkit.reference.audit`).
``{"op": "state", "at": t, "state": {...}}`` and ``{"op": "task", "at": t, "action": ...}``
    the conversation's working state, set whole, and a task added or completed (see
    :mod:`ctxkit.reference.working_state`).

Every line of a version 2 file begins with its checksum, ``{"crc":"1c291ca3",...}``: the CRC-32
of the line's bytes after that prefix, up to its newline. Each line is still JSON, so any tool
reads the file, and a flipped bit anywhere in it is found: loading names the line instead of
returning altered messages or token counts. Version 1 files (no checksums) are read and
appended to as they are.

A crash can leave only the last line incomplete (no newline, or not JSON): loading reports
it, and a writer moves those bytes to ``<name>.torn`` before it appends. A bad line anywhere
else is damage, not a crash, and raises :class:`HistoryFileCorrupt` without changing the file.

Durability: with ``fsync="always"`` (the default) a record is on disk (``fdatasync``) before the
call that wrote it returns, so it survives a power loss; an audit record, which describes a view
rather than the history, becomes durable with the next change or on closing. With
``fsync="never"`` it is in the operating system when the call returns: it survives the process
being killed, not the machine failing. The lock is an ``flock`` on the file: a second writer, in
this process or another, gets :class:`HistoryFileLocked`; the lock goes when the holder closes
or dies.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

__all__ = [
    "FORMAT",
    "FSYNC_POLICIES",
    "VERSION",
    "HistoryFile",
    "HistoryFileCorrupt",
    "HistoryFileError",
    "HistoryFileLocked",
    "Loaded",
    "Torn",
    "checksum_problem",
    "encode_record",
    "find_damage",
    "lock_holder",
    "lock_holders",
    "new_header",
    "read_history_file",
    "sync_directory",
]

FORMAT = "history"
VERSION = 2
"""The version new files are written in; :data:`VERSIONS` are read."""
VERSIONS = (1, 2)
CHECKSUM_PREFIX = b'{"crc":"'
_DIGITS_END = len(CHECKSUM_PREFIX) + 8
_CHECKED_FROM = _DIGITS_END + 2
"""Where the checksummed bytes begin: after ``{"crc":"xxxxxxxx",``."""
FSYNC_POLICIES = ("always", "never")
FsyncPolicy = Literal["always", "never"]

OPS = frozenset({"add", "set", "clear", "checkpoint", "restore", "audit", "state", "task"})


class HistoryFileError(Exception):
    """A history file cannot be used; the message names the file and what to do."""


class HistoryFileLocked(HistoryFileError):
    """Another manager, in this process or another, has the file open."""


class HistoryFileCorrupt(HistoryFileError):
    """A line before the last is not a record: damage, not a crash. The file was not changed.

    In a database (``path`` a ``URL#conversation`` label) ``line`` is the row's ``seq``."""

    def __init__(self, path: Path | str, line: int, offset: int, reason: str) -> None:
        self.path, self.line, self.offset, self.reason = path, line, offset, reason
        if isinstance(path, str) and "://" in path:
            super().__init__(
                f"{path}: row {line} {reason}. No row was changed. To keep what comes before, "
                f"copy rows 1 to {line - 1} of ctxkit_records into a new conversation."
            )
            return
        if line == 1:
            advice = "Is it a ctxkit history? Give the manager a storage_path of its own."
        else:
            advice = (
                f"To keep what comes before, copy the file and cut the copy at byte {offset} "
                f"(truncate -s {offset} COPY)."
            )
        super().__init__(
            f"{path}: line {line} (byte {offset}) {reason}. The file was not changed. {advice}"
        )

    @classmethod
    def at_line(cls, path: Path | str, line: int, reason: str) -> HistoryFileCorrupt:
        """The error for a whole line found bad after parsing (its byte offset read again)."""
        if isinstance(path, str) and "://" in path:
            return cls(path, line, -1, reason)
        try:
            with open(path, "rb") as file:
                offset = sum(len(text) for _, text in zip(range(line - 1), file, strict=False))
        except OSError:
            offset = -1
        return cls(path, line, offset, reason)


@dataclass(frozen=True, slots=True)
class Torn:
    """An incomplete last line, left by a crash while it was being written."""

    line: int
    offset: int
    length: int
    reason: str

    def describe(self, path: Path) -> str:
        return (
            f"{path}: line {self.line} (byte {self.offset}, {self.length} bytes) {self.reason}: "
            "an append cut short by a crash; it was never acknowledged and is skipped"
        )


@dataclass(slots=True)
class Loaded:
    """What a history file holds: its header, its records in order, and a torn tail if any."""

    path: Path
    header: dict[str, Any] | None
    records: list[dict[str, Any]] = field(default_factory=list)
    torn: Torn | None = None
    size: int = 0
    """Bytes of whole lines: where the torn tail, if any, begins."""


def new_header(conversation_id: str, encoding: str) -> dict[str, Any]:
    """The header a new history starts with (line 1 of a file, row 1 in a database)."""
    return {
        "ctxkit": FORMAT,
        "version": VERSION,
        "conversation_id": conversation_id,
        "encoding": encoding,
        "created": time.time(),
    }


def encode_record(record: Mapping[str, Any], *, checksum: bool = True) -> bytes:
    """One line. ASCII-only JSON, so any string (even a lone surrogate) round-trips; with
    ``checksum`` (version 2) it begins with its CRC-32.

    Raises :class:`TypeError` naming the value when something in it is not JSON.
    """
    if not record:
        raise ValueError("a history record is never empty")
    try:
        text = json.dumps(record, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"a persistent history stores messages as JSON: {exc}") from None
    if not checksum:
        return text.encode("ascii") + b"\n"
    body = text.encode("ascii")[1:]  # after the opening brace
    return b'{"crc":"%08x",' % zlib.crc32(body) + body + b"\n"


def checksum_problem(line: bytes) -> str | None:
    """Why ``line`` (without its newline) fails its checksum, or None when it passes."""
    if not line.startswith(CHECKSUM_PREFIX) or line[_DIGITS_END:_CHECKED_FROM] != b'",':
        return "has no checksum"
    try:
        stored = int(line[len(CHECKSUM_PREFIX) : _DIGITS_END], 16)
    except ValueError:
        return "has a malformed checksum"
    if zlib.crc32(memoryview(line)[_CHECKED_FROM:]) != stored:
        return "does not match its checksum (its bytes changed after it was written)"
    return None


def read_history_file(path: str | os.PathLike[str]) -> Loaded:
    """Read and check a history file without changing it or taking its lock.

    A missing or empty file reads as no header and no records. Raises
    :class:`HistoryFileCorrupt` for a bad line before the last, or a file that is not a
    ctxkit history.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Loaded(path=path, header=None)
    return parse_history(path, data)


def parse_history(path: Path, data: bytes) -> Loaded:
    """Parse a history file's bytes (see :func:`read_history_file`)."""
    lines = data.split(b"\n")
    last = len(lines) - 1  # lines[last] is what follows the final newline: b"" when whole
    loaded = Loaded(path=path, header=None)
    records = loaded.records
    loads = json.loads
    checked = False  # the header says whether records carry checksums
    for number, line in enumerate(lines[:last]):
        problem = checksum_problem(line) if checked or number == 0 else None
        if problem is not None and (checked or line.startswith(CHECKSUM_PREFIX)):
            if number == last - 1 and not lines[last] and not _merged(line):
                loaded.torn = _torn(lines, number, problem)
                break
            raise HistoryFileCorrupt(path, number + 1, _offset(lines, number), problem)
        try:
            record = loads(line)
        except ValueError as exc:  # bytes that are not text raise UnicodeDecodeError
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8 text"
            if number == last - 1 and not lines[last]:
                loaded.torn = _torn(lines, number, f"is not JSON ({why})")
                break
            raise HistoryFileCorrupt(
                path, number + 1, _offset(lines, number), f"is not JSON ({why})"
            ) from None
        if type(record) is not dict:
            raise HistoryFileCorrupt(path, number + 1, _offset(lines, number), "is not an object")
        if number == 0:
            loaded.header = _check_header(path, record, checksummed=problem is None)
            checked = loaded.header["version"] >= 2
        elif record.get("op") not in OPS:
            raise HistoryFileCorrupt(
                path, number + 1, _offset(lines, number), f"has unknown op {record.get('op')!r}"
            )
        else:
            if checked:
                del record["crc"]
            records.append(record)
    else:
        if lines[last]:
            if checked and _merged(lines[last]):
                raise HistoryFileCorrupt(
                    path, last + 1, _offset(lines, last), "has no newline and holds two records"
                )
            loaded.torn = _torn(lines, last, "has no newline")
    loaded.size = loaded.torn.offset if loaded.torn else len(data)
    return loaded


def find_damage(path: Path, file: BinaryIO, *, line: int, offset: int) -> HistoryFileCorrupt | None:
    """The first line, from ``file``'s position on, that fails its checksum (version 2), as
    the error a load would raise; None when every line passes. ``line`` and ``offset`` say
    where the position is in the file. Reads line by line and parses nothing, so a listing
    can check a whole file in a fraction of a load's time; the torn-tail rule is
    :func:`parse_history`'s."""
    failed: tuple[int, int, str] | None = None  # damage unless it proves to be the last line
    for text in file:
        if failed is not None:
            return HistoryFileCorrupt(path, *failed)
        whole = text.endswith(b"\n")
        body = text[:-1] if whole else text
        if not whole:
            if _merged(body):
                return HistoryFileCorrupt(
                    path, line, offset, "has no newline and holds two records"
                )
            break  # a torn tail
        problem = checksum_problem(body)
        if problem is not None:
            failed = (line, offset, problem)
            if _merged(body):
                return HistoryFileCorrupt(path, *failed)
        line += 1
        offset += len(text)
    return None


def _merged(line: bytes) -> bool:
    """A checksummed record starts inside ``line``: a newline between two records was lost.
    A crash only ever cuts one append short, so this is damage, never a torn tail."""
    return line.find(CHECKSUM_PREFIX, 1) >= 0


def _check_header(path: Path, record: dict[str, Any], *, checksummed: bool) -> dict[str, Any]:
    if record.get("ctxkit") != FORMAT:
        raise HistoryFileCorrupt(path, 1, 0, "is not a ctxkit history header")
    version = record.get("version")
    if version not in VERSIONS or type(version) is not int:
        readable = " and ".join(map(str, VERSIONS))
        raise HistoryFileCorrupt(
            path, 1, 0, f"has format version {version!r}; this ctxkit reads {readable}"
        )
    if checksummed != (version >= 2):
        why = "has no checksum" if version >= 2 else "has a checksum, which version 1 has not"
        raise HistoryFileCorrupt(path, 1, 0, why)
    record.pop("crc", None)
    return record


def _offset(lines: list[bytes], number: int) -> int:
    return sum(len(line) + 1 for line in lines[:number])


def _torn(lines: list[bytes], number: int, reason: str) -> Torn:
    return Torn(
        line=number + 1,
        offset=_offset(lines, number),
        length=len(lines[number]) + (1 if number < len(lines) - 1 else 0),
        reason=reason,
    )


def _open_regular(path: Path) -> int:
    """A descriptor on the regular file at ``path``, created (with its folders) if missing.
    Never follows a symbolic link, and refuses a FIFO, a device or a directory: a history is
    only ever a file of ctxkit's own, so nothing another program owns is overwritten."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HistoryFileError(f"{path.parent}: cannot create the folder: {exc.strerror}") from None
    flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if path.is_symlink():
            raise HistoryFileError(
                f"{path}: is a symbolic link; a history file must be a regular file "
                "(ctxkit never follows links, so it cannot overwrite what one points to)"
            ) from None
        raise HistoryFileError(f"{path}: cannot open: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device or other special file"
        raise HistoryFileError(f"{path}: is {kind}; a history file must be a regular file")
    os.set_blocking(fd, True)
    return fd


class HistoryFile:
    """The open, locked history file of one manager: read once, then appended to.

    Opening takes the lock, reads what is there, moves a torn tail aside, and writes the
    header to a new or empty file. ``loaded`` keeps what was read.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        conversation_id: str,
        encoding: str,
        fsync: FsyncPolicy = "always",
        lock_wait: float = 0.0,
    ) -> None:
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync must be one of {', '.join(FSYNC_POLICIES)}, got {fsync!r}")
        self.path = Path(path)
        self.fsync = fsync
        created = not self.path.exists()
        self._fd = _open_regular(self.path)
        try:
            lock(self._fd, self.path, wait=lock_wait)
            self.loaded = parse_history(self.path, _read_all(self._fd))
            if self.loaded.torn is not None:
                self._set_torn_aside(self.loaded.torn)
            self.end = self.loaded.size
            header = self.loaded.header
            self.checksums = header is None or header["version"] >= 2
            """Records carry checksums (a version 1 file is appended to as version 1)."""
            if header is None:
                header = new_header(conversation_id, encoding)
                self.loaded.header = header
                self.append(header)
                self.sync()
                if created and fsync == "always":
                    sync_directory(self.path.parent)
        except BaseException:
            os.close(self._fd)
            self._fd = -1
            raise

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def append(self, record: Mapping[str, Any]) -> int:
        """Write one record; returns the file's end after it. All or nothing: a failed write
        (a full disk) is cut off again and raises :class:`HistoryFileError`."""
        line = encode_record(record, checksum=self.checksums)
        if self._fd < 0:
            raise HistoryFileError(f"{self.path}: the history file is closed")
        try:
            view = memoryview(line)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError as exc:
            os.ftruncate(self._fd, self.end)
            raise HistoryFileError(f"{self.path}: cannot write: {exc.strerror}") from None
        self.end += len(line)
        return self.end

    def sync(self) -> None:
        """Make what was written durable, as the fsync policy says."""
        if self.fsync == "always" and self._fd >= 0:
            try:
                os.fdatasync(self._fd)
            except OSError as exc:
                raise HistoryFileError(
                    f"{self.path}: cannot make what was written durable: {exc.strerror}"
                ) from None

    def close(self) -> None:
        """Make what was written durable (as the policy says), release the lock and the file;
        appending after this raises."""
        if self._fd >= 0:
            try:
                self.sync()
            finally:
                fd, self._fd = self._fd, -1
                os.close(fd)  # closing the only descriptor releases the flock

    def _set_torn_aside(self, torn: Torn) -> None:
        """Keep the torn bytes in ``<name>.torn`` (never acknowledged, but never thrown away),
        then cut them off so the next record starts on a line of its own."""
        os.lseek(self._fd, torn.offset, os.SEEK_SET)
        tail = os.read(self._fd, torn.length)
        aside = self.path.with_name(self.path.name + ".torn")
        try:
            with open(aside, "ab") as out:
                out.write(tail if tail.endswith(b"\n") else tail + b"\n")
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:
            raise HistoryFileError(
                f"{self.path}: its torn last line cannot be kept in {aside} ({exc.strerror}), "
                "so it was not cut off: the file was not changed"
            ) from None
        try:
            os.ftruncate(self._fd, torn.offset)
            os.fsync(self._fd)
        except OSError as exc:
            raise HistoryFileError(
                f"{self.path}: cannot cut off its torn last line: {exc.strerror}"
            ) from None


def _read_all(fd: int) -> bytes:
    """The whole file in one buffer (one copy: a history can be hundreds of megabytes)."""
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0)
    while len(data) < size:  # a short read: go on where it stopped
        more = os.pread(fd, size - len(data), len(data))
        if not more:
            break
        data += more
    return data


LOCK_POLL = 0.05
"""Seconds between tries while waiting for another manager to close (``lock_wait``)."""


def lock(fd: int, path: Path, advice: str | None = None, *, wait: float = 0.0) -> None:
    """Take the history file's lock, waiting at most ``wait`` seconds for its holder to let
    go; :class:`HistoryFileLocked` names the holder, then ``advice`` (what to do; a second
    writer's by default)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() < deadline:
                time.sleep(LOCK_POLL)
                continue
        holder = lock_holder(path)
        by = f" by process {holder}" if holder else ""
        waited = f" (waited {wait:g} s)" if wait else ""
        advice = advice or (
            "one manager at a time may write a history. Close the other manager "
            "(manager.close()), give this one lock_wait=SECONDS to wait for it, or its own "
            "storage_path."
        )
        raise HistoryFileLocked(f"{path} is open{by}{waited}: {advice}")


def lock_holders() -> dict[tuple[int, int, int], int]:
    """Every flock on this machine: ``(device major, device minor, inode) -> pid``, from
    /proc/locks (Linux; empty elsewhere). Read once to ask about many files."""
    try:
        text = Path("/proc/locks").read_text()
    except OSError:
        return {}
    holders = {}
    for line in text.splitlines():
        parts = line.split()  # "1: FLOCK  ADVISORY  WRITE 32650 fe:00:2146447 0 EOF"
        if len(parts) > 5 and parts[1] == "FLOCK" and parts[4].isdigit():
            try:
                major, minor, inode = parts[5].split(":")
                holders[(int(major, 16), int(minor, 16), int(inode))] = int(parts[4])
            except ValueError:
                continue
    return holders


def lock_holder(
    path: str | os.PathLike[str], holders: dict[tuple[int, int, int], int] | None = None
) -> int | None:
    """The pid holding an flock on ``path``; None if none or unknown. ``holders``: what
    :func:`lock_holders` returned, when asking about many files.

    It only reads: asking this way cannot make a writer's open fail, as taking the lock to
    test it could.
    """
    try:
        status = os.stat(path)
    except OSError:
        return None
    if holders is None:
        holders = lock_holders()
    key = (os.major(status.st_dev), os.minor(status.st_dev), status.st_ino)
    return holders.get(key)


def sync_directory(directory: Path) -> None:
    """Make the names in ``directory`` (a file created, renamed) survive a power loss."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
