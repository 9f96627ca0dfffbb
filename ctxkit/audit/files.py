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
"""

from __future__ import annotations

import gzip
import io
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ctxkit.audit.bodies import NotABody, is_body_line, request_of
from ctxkit.audit.frames import Decoded, MissingDecompressor, frames, is_framed
from ctxkit.audit.genai import requests_of
from ctxkit.audit.otlp import NotOtlp, Record, decode_json_line
from ctxkit.audit.request import Problem, Request, parse_json

__all__ = ["FORMATS", "Read", "UnknownFormat", "files_of", "read_paths"]

GZIP_MAGIC = b"\x1f\x8b"

FORMATS = ("auto", "otlp", "bodies")
"""``--format`` choices: tell each file's form from its first record, or say it."""


class UnknownFormat(ValueError):
    """A file in none of the forms the audit reads."""


@dataclass
class Read:
    """What the files held: the requests in time order, and what was skipped."""

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
    that line only.
    """
    held: list[tuple[int, str, int]] = []
    consumed = 0
    for number, line in enumerate(handle, 1):
        consumed += len(line)
        if not line.strip():
            continue
        if held:
            held.append((number, line, consumed))
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


def _line(number: int, line: str, consumed: int) -> tuple[int, Any, str, int]:
    try:
        return number, parse_json(line), "", consumed
    except ValueError as exc:
        return number, None, f"not JSON: {exc}", consumed


def files_of(paths: Sequence[str]) -> list[str]:
    """The files ``paths`` name: a directory stands for the files in it, by name (not those
    whose name starts with a dot, nor its subdirectories); ``-`` is stdin."""
    found: list[str] = []
    for path in paths:
        if path != "-" and Path(path).is_dir():
            found.extend(
                str(item)
                for item in sorted(Path(path).iterdir())
                if not item.name.startswith(".") and item.is_file()
            )
        else:
            found.append(path)
    return found


@contextmanager
def _entries(path: str) -> Iterator[tuple[str, Iterator[tuple[str, Any, str, int]]]]:
    """The file's name, and its entries: (where in it, what it holds, what is wrong, bytes
    read so far), line by line or frame by frame. Stdin is read the same way, and left open."""
    if path == "-":
        stdin = getattr(sys.stdin, "buffer", None)
        if not hasattr(stdin, "peek"):  # replaced by a text stream
            yield "<stdin>", ((str(n), *rest) for n, *rest in _documents(sys.stdin))
            return
        with closing(_binary_entries(stdin)) as entries:
            yield "<stdin>", entries
        return
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed below, with what wraps it
    except OSError as exc:
        raise UnknownFormat(f"cannot read {path}: {exc.strerror or exc}") from None
    with raw, closing(_binary_entries(raw)) as entries:  # the reader ends before the file
        yield path, entries


def _binary_entries(raw: Any) -> Iterator[tuple[str, Any, str, int]]:
    """What :func:`_entries` yields, from a binary stream that can peek (gzip or not, framed
    or lines). The stream is not closed: whoever opened it does."""
    binary: Any = gzip.GzipFile(fileobj=raw) if raw.peek(2)[:2] == GZIP_MAGIC else raw
    if is_framed(binary.peek(1)):
        for number, *rest in frames(binary):
            yield (f"frame {number}", *rest)
        return
    text = io.TextIOWrapper(binary, encoding="utf-8", errors="replace")
    try:
        for number, *rest in _documents(text):
            yield (str(number), *rest)
    finally:
        text.detach()


def _take(
    data: Any,
    kind: str,
    where: str,
    records: list[tuple[Record, str]],
    arrival: list[Request],
    notes: set[str],
) -> str:
    """Add what one entry holds to ``records`` (OTLP) or ``arrival`` (bodies); what is wrong
    with it, or ""."""
    try:
        if kind == "bodies":
            if isinstance(data, Decoded):
                return "is an OTLP protobuf export, not a request body"
            arrival.append(request_of(data, where, len(arrival)))
            return ""
        found = data.records if isinstance(data, Decoded) else decode_json_line(data, notes)
    except (NotABody, NotOtlp) as exc:
        return str(exc)
    records.extend((record, where) for record in found)
    return ""


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


def read_paths(
    paths: Sequence[str],
    form: str = "auto",
    progress: Callable[[str, int], None] | None = None,
) -> Read:
    """Read every file; requests come back sorted by time (ties keep file and line order).

    ``progress(path, bytes read so far)`` is called as lines are read, if given.
    """
    read = Read()
    records: list[tuple[Record, str]] = []
    arrival: list[Request] = []
    for path in files_of(paths):
        with _entries(path) as (name, entries):
            skipped_before = len(read.problems)
            kind = None if form == "auto" else form
            try:
                for position, data, error, consumed in entries:
                    read.lines += 1
                    if progress is not None:
                        progress(path, consumed)
                    where = f"{name}:{position}"
                    if not error:
                        kind = kind or _form_of(name, data)
                        error = _take(data, kind, where, records, arrival, read.notes)
                    if error:
                        read.problems.append(Problem(where, error))
            except MissingDecompressor as exc:
                raise UnknownFormat(f"{name}: {exc}") from None
            if kind is None and form == "auto":
                skipped = read.problems[skipped_before:]
                if not skipped:
                    raise UnknownFormat(f"{name}: holds no record (an empty file?)")
                raise UnknownFormat(
                    f"{name}: nothing in it reads as a record ({len(skipped)} tried; the "
                    f"first, {skipped[0].where}: {skipped[0].reason})"
                )
    read.records = len(records)
    found, problems = requests_of(records)
    arrival.extend(found)
    read.problems.extend(problems)
    read.requests = sorted(arrival, key=lambda r: r.time_ns)
    return read
