"""Reading recorded requests from files: OTLP/JSON as the Collector's ``file`` exporter writes
it (one export request of traces or logs per line), or JSON Lines of raw request bodies.

A directory stands for the files in it (the exporter leaves its rotated backups beside the
current file); a gzip file is read through gzip, and the exporter's framed binary form
(``format: proto`` or ``compression: zstd``, :mod:`ctxkit.audit.frames`) frame by frame, each
told by its first bytes, not its name.

Each file's form is told from its first record; a file in neither form is the user's mistake
(:class:`UnknownFormat`). Inside a file, a line that does not parse or decode, or a span with a
malformed message list, is a :class:`~ctxkit.audit.request.Problem` with its file and line, and
the rest goes on. A file that is one JSON document (a pretty-printed export, or an array of
bodies) is read as a whole.

Files are read as a stream (:class:`Reading`): what is held at any time is a window of
:data:`REORDER` records and requests, whatever the files' length, so a day of a fleet's traces
is audited in the memory of a few seconds of it.
"""

from __future__ import annotations

import contextlib
import gzip
import heapq
import io
import os
import shutil
import stat
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ctxkit.audit.bodies import NotABody, is_body_line, request_of
from ctxkit.audit.duplicates import Duplicates
from ctxkit.audit.frames import Decoded, MissingDecompressor, frames, is_framed
from ctxkit.audit.genai import Twins, requests_of
from ctxkit.audit.otlp import NotOtlp, Record, decode_json_line
from ctxkit.audit.request import Problem, Request, parse_json
from ctxkit.audit.settle import Settling

__all__ = [
    "FORMATS",
    "REORDER",
    "Read",
    "Reading",
    "UnknownFormat",
    "files_of",
    "in_order",
    "read_paths",
    "spooled",
]

GZIP_MAGIC = b"\x1f\x8b"

FORMATS = ("auto", "otlp", "bodies")
"""``--format`` choices: tell each file's form from its first record, or say it."""


REORDER = 1024
"""How far out of place, in records and in requests, a file may hold what belongs together:
a span and its log records, and two requests of one time. What is held at any time is that
much of the files, whatever their length; a request further out of time order is checked
alone (counted as late)."""


class UnknownFormat(ValueError):
    """A file in none of the forms the audit reads."""


class _Gone(UnknownFormat):
    """A file that was there when its folder was listed, and is not when it is opened (the
    exporter rotated it away, or removed an old backup)."""


@dataclass
class Read:
    """What the files held, all at once: the requests in time order, and what was skipped."""

    requests: list[Request] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    notes: set[str] = field(default_factory=set)
    """What is worth saying once about how the files were read (base64 ids)."""
    lines: int = 0
    records: int = 0


def _otlp_like(data: Any) -> bool:
    return isinstance(data, dict) and bool(
        {"resourceSpans", "resourceLogs", "resource_spans", "resource_logs"} & data.keys()
    )


def _documents(handle: IO[str]) -> Iterator[tuple[int, Any, str, int]]:
    """(line number, parsed JSON or None, error, characters read so far) per non-empty line.

    A first line that does not parse alone may begin one JSON document spread over lines: the
    lines are held and, if together they parse, come back as that document (its items, for an
    array); if not, each is read as a line of its own after all, so a bad first line costs
    that line only. A held line that is a record on its own (a file copied from the middle of
    a line on, its first line cut) ends the holding at once: the rest is read line by line,
    never held whole.
    """
    held: list[tuple[int, str, int]] = []
    consumed = 0
    for number, line in enumerate(handle, 1):
        consumed += len(line)
        if not line.strip():
            continue
        if held:
            entry = _line(number, line, consumed) if line.lstrip()[:1] == "{" else None
            if entry is None or not _record_like(entry[1]):
                held.append((number, line, consumed))
                continue
            for at, text, read in held:
                yield _line(at, text, read)
            held = []
            yield entry
            continue
        entry = _line(number, line, consumed)
        if number == 1 and entry[2]:
            held.append((number, line, consumed))
            continue
        yield entry
    if not held:
        return
    try:
        whole = parse_json("".join(line for _, line, _ in held))
    except ValueError:
        for number, line, at in held:
            yield _line(number, line, at)
        return
    for item in whole if isinstance(whole, list) else [whole]:
        yield 1, item, "", consumed


def _record_like(data: Any) -> bool:
    """Whether a line's JSON is a record of either form on its own."""
    return _otlp_like(data) or is_body_line(data)


def _line(number: int, line: str, consumed: int) -> tuple[int, Any, str, int]:
    try:
        return number, parse_json(line), "", consumed
    except ValueError as exc:
        return number, None, f"not JSON: {exc}", consumed


def files_of(paths: Sequence[str]) -> list[str]:
    """The files ``paths`` name: a directory stands for the files in it, by name (not those
    whose name starts with a dot, nor its subdirectories); ``-`` is stdin."""
    return [path for path, _ in _files_of(paths)]


def _files_of(paths: Sequence[str]) -> list[tuple[str, bool]]:
    """:func:`files_of`, each with whether a directory named it (an empty file there is the
    current file just after a rotation, not the user's mistake)."""
    found: list[tuple[str, bool]] = []
    for path in paths:
        if path != "-" and Path(path).is_dir():
            found.extend(
                (str(item), True)
                for item in sorted(Path(path).iterdir())
                if not item.name.startswith(".") and item.is_file()
            )
        else:
            found.append((path, False))
    return found


STDIN_CLOSED = (
    "-: stdin is closed, so there is nothing to read: pipe a recording in "
    "(ctxkit audit - < traces.jsonl) or name its file"
)


@contextmanager
def spooled(paths: Sequence[str]) -> Iterator[list[str]]:
    """The paths, with what can be read only once (``-`` for stdin, a FIFO, a process
    substitution's ``/dev/fd/N``) copied to a temporary file first, removed on leaving: for a
    reader that reads its input twice (``ctxkit replay``).

    Raises :class:`UnknownFormat` when stdin is closed or a stream cannot be read.
    """
    with tempfile.TemporaryDirectory(prefix="ctxkit-spool-") as folder:
        copies: list[str] = []
        for number, path in enumerate(paths):
            if path != "-" and not _once_only(path):
                copies.append(path)
                continue
            copy = os.path.join(folder, f"{number}.spool")
            try:
                with _opened(path) as source, open(copy, "wb") as target:
                    shutil.copyfileobj(source, target)
            except OSError as exc:
                raise UnknownFormat(f"cannot read {path}: {exc.strerror or exc}") from None
            copies.append(copy)
        yield copies


def _once_only(path: str) -> bool:
    """Whether the file at ``path`` is a stream (a FIFO, a pipe, a character device, a
    socket), read once and gone, not a file that can be read again."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


@contextmanager
def _opened(path: str) -> Iterator[Any]:
    """A binary stream of ``path`` (stdin's for ``-``, left open)."""
    if path != "-":
        with open(path, "rb") as handle:
            yield handle
        return
    if sys.stdin is None:
        raise UnknownFormat(STDIN_CLOSED)
    yield getattr(sys.stdin, "buffer", sys.stdin)


@contextmanager
def _entries(path: str) -> Iterator[tuple[str, Iterator[tuple[str, Any, str, int]]]]:
    """The file's name, and its entries: (where in it, what it holds, what is wrong, bytes
    read so far), line by line or frame by frame. Stdin is read the same way, and left open."""
    if path == "-":
        if sys.stdin is None:  # started with stdin closed (<&-)
            raise UnknownFormat(STDIN_CLOSED)
        stdin = getattr(sys.stdin, "buffer", None)
        if not hasattr(stdin, "peek"):  # replaced by a text stream
            yield "<stdin>", ((str(n), *rest) for n, *rest in _documents(sys.stdin))
            return
        with closing(_binary_entries(stdin)) as entries:
            yield "<stdin>", entries
        return
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed below, with what wraps it
    except FileNotFoundError:
        raise _Gone(f"cannot read {path}: it is gone") from None
    except OSError as exc:
        raise UnknownFormat(f"cannot read {path}: {exc.strerror or exc}") from None
    with raw, closing(_binary_entries(raw)) as entries:  # the reader ends before the file
        yield path, entries


def _binary_entries(raw: Any) -> Iterator[tuple[str, Any, str, int]]:
    """What :func:`_entries` yields, from a binary stream that can peek (gzip or not, framed
    or lines). The stream is not closed: whoever opened it does. A gzip stream is read up to
    its damage (cut short, or corrupt), which is the last entry, a problem."""
    compressed = raw.peek(2)[:2] == GZIP_MAGIC
    binary: Any = gzip.GzipFile(fileobj=raw) if compressed else raw
    reached = ["1", 0]  # the next entry's place, and the bytes read before it
    try:
        if is_framed(binary.peek(1)):
            for number, *rest in frames(binary):
                reached = [f"frame {number + 1}", rest[-1]]
                yield (f"frame {number}", *rest)
            return
        text = io.TextIOWrapper(binary, encoding="utf-8", errors="replace")
        try:
            for number, *rest in _documents(text):
                reached = [str(number + 1), rest[-1]]
                yield (str(number), *rest)
        finally:
            text.detach()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        if not compressed:
            raise
        yield reached[0], None, _damage(exc), reached[1]


_DAMAGED = "the gzip stream is"


def _damage(exc: BaseException) -> str:
    """A gzip stream's damage, in words: what was before it was read."""
    if isinstance(exc, EOFError):
        what = f"{_DAMAGED} cut short (a file still being written, or copied in part)"
    else:
        what = f"{_DAMAGED} damaged ({exc})"
    return what + ": what comes after this point is lost, everything before it was read"


def _form_of(name: str, data: Any) -> str:
    """A file's form, told from its first record."""
    if isinstance(data, Decoded) or _otlp_like(data):
        return "otlp"
    if is_body_line(data):
        return "bodies"
    raise UnknownFormat(
        f"{name}: the first record is neither OTLP/JSON (a line of the OpenTelemetry "
        "Collector's file exporter, with resourceSpans or resourceLogs) nor a request body "
        "(messages, input or contents); see 'ctxkit audit --help'"
    )


class Reading:
    """The requests in files, read as a stream, in time order: what is held at any time is a
    window of the files, never all of them (see :data:`REORDER`). Iterate once; ``problems``,
    ``notes``, ``lines`` and ``records`` are filled as it goes.

    Raises :class:`UnknownFormat` (while iterating) for a file in neither form.
    """

    def __init__(
        self,
        paths: Sequence[str],
        form: str = "auto",
        progress: Callable[[str, int], None] | None = None,
        names: Mapping[str, str] | None = None,
    ) -> None:
        self.paths = paths
        self.form = form
        self.progress = progress
        self.names = dict(names or {})
        """A file's name in what is said of it, where not its path (a :func:`spooled` copy
        is said by the name it was given as, ``<stdin>`` for ``-``)."""
        self.problems: list[Problem] = []
        self.notes: set[str] = set()
        self.lines = 0
        self.records = 0
        self._bodies = 0
        self._duplicates = Duplicates()

    def __iter__(self) -> Iterator[Request]:
        return in_order(self._requests(), REORDER)

    def _requests(self) -> Iterator[Request]:
        """Requests in file order; an OTLP record waits until :data:`REORDER` newer ones were
        read (a log record up to four times that for its span), so that a span's log records
        join it wherever they were written near it."""
        held = Settling(float(REORDER), hold_at_most=4)
        twins = Twins()
        for path, in_folder in _files_of(self.paths):
            with contextlib.ExitStack() as stack:
                try:
                    name, entries = stack.enter_context(_entries(path))
                    name = self.names.get(name, name)
                except _Gone:
                    if not in_folder:
                        raise
                    self.notes.add(f"{path} was gone before it was read (rotated away?)")
                    continue
                skipped_before = len(self.problems)
                kind = None if self.form == "auto" else self.form
                try:
                    for position, data, error, consumed in entries:
                        self.lines += 1
                        if self.progress is not None:
                            self.progress(path, consumed)
                        where = f"{name}:{position}"
                        if not error:
                            kind = kind or _form_of(name, data)
                            try:
                                if kind == "bodies":
                                    request = self._body(data, where)
                                    if request is not None:
                                        yield request
                                else:
                                    found = self._records(data)
                                    held.add(float(self.records), found, where)
                                    self.records += len(found)
                            except (NotABody, NotOtlp) as exc:
                                error = str(exc)
                        if error:
                            self.problems.append(Problem(where, error))
                        ripe = held.ripe(float(self.records))
                        if ripe:
                            yield from self._made(ripe, twins, final=False)
                except MissingDecompressor as exc:
                    raise UnknownFormat(f"{name}: {exc}") from None
                if kind is None and self.form == "auto":
                    skipped = self.problems[skipped_before:]
                    if skipped and all(p.reason.startswith(_DAMAGED) for p in skipped):
                        continue  # damaged before its first record: said, not refused
                    if not skipped and in_folder:
                        self.notes.add(f"{name} is empty (the current file just after a rotation?)")
                        continue
                    if not skipped:
                        raise UnknownFormat(f"{name}: holds no record (an empty file?)")
                    raise UnknownFormat(
                        f"{name}: nothing in it reads as a record ({len(skipped)} tried; the "
                        f"first, {skipped[0].where}: {skipped[0].reason})"
                    )
        yield from self._made(held.ripe(float(self.records), everything=True), twins, final=True)
        if self._duplicates.dropped:
            self.notes.add(self._duplicates.note())

    def _body(self, data: Any, where: str) -> Request | None:
        """The line's request; None for a line read before (see
        :class:`~ctxkit.audit.duplicates.Duplicates`)."""
        if isinstance(data, Decoded):
            raise NotABody("is an OTLP protobuf export, not a request body")
        request = request_of(data, where, self._bodies)
        self._bodies += 1
        if self._duplicates.line(data):
            return None
        return request

    def _records(self, data: Any) -> list[Record]:
        found = data.records if isinstance(data, Decoded) else decode_json_line(data, self.notes)
        return self._duplicates.records(found)

    def _made(
        self, records: list[tuple[Record, str]], twins: Twins, *, final: bool
    ) -> Iterator[Request]:
        found, problems = requests_of(records, twins, final=final)
        self.problems.extend(problems)
        yield from found


def in_order(requests: Iterable[Request], held: int) -> Iterator[Request]:
    """Requests in time order from a stream whose disorder is at most ``held`` requests: the
    oldest of the ``held`` newest is given out as each new one comes (ties keep stream
    order). A request further out of place comes out late, and its conversation checks it
    alone."""
    heap: list[tuple[int, int, Request]] = []
    for arrival, request in enumerate(requests):
        heapq.heappush(heap, (request.time_ns, arrival, request))
        if len(heap) > held:
            yield heapq.heappop(heap)[2]
    while heap:
        yield heapq.heappop(heap)[2]


def read_paths(
    paths: Sequence[str],
    form: str = "auto",
    progress: Callable[[str, int], None] | None = None,
) -> Read:
    """Every request of the files at once, in time order (:class:`Reading`, kept whole)."""
    reading = Reading(paths, form, progress)
    requests = list(reading)
    return Read(requests, reading.problems, reading.notes, reading.lines, reading.records)
