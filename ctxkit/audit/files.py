"""Reading recorded requests from files: OTLP/JSON as the Collector's ``file`` exporter writes
it (one export request of traces or logs per line), or JSON Lines of raw request bodies.

A directory stands for the files in it (the exporter leaves its rotated backups beside the
current file); a gzip file is read through gzip, told by its first bytes, not its name.

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
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ctxkit.audit.bodies import NotABody, is_body_line, request_of
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
        if held or (number == 1 and not _parses(line)):
            held.append((number, line, consumed))
            continue
        yield _line(number, line, consumed)
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


def _parses(line: str) -> bool:
    try:
        parse_json(line)
    except ValueError:
        return False
    return True


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


def _open(path: str) -> tuple[IO[str], str]:
    if path == "-":
        return sys.stdin, "<stdin>"
    try:
        raw = open(path, "rb")  # noqa: SIM115 - returned open, closed by the caller
    except OSError as exc:
        raise UnknownFormat(f"cannot read {path}: {exc.strerror or exc}") from None
    binary: IO[bytes] = gzip.GzipFile(fileobj=raw) if raw.peek(2)[:2] == GZIP_MAGIC else raw
    return io.TextIOWrapper(binary, encoding="utf-8", errors="replace"), path


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
        handle, name = _open(path)
        skipped_before = len(read.problems)
        with handle if handle is not sys.stdin else nullcontext():
            kind = None if form == "auto" else form
            for number, data, error, consumed in _documents(handle):
                read.lines += 1
                where = f"{name}:{number}"
                if progress is not None:
                    progress(path, consumed)
                if error:
                    read.problems.append(Problem(where, error))
                    continue
                if kind is None:
                    kind = "otlp" if _otlp_like(data) else "bodies" if is_body_line(data) else None
                    if kind is None:
                        raise UnknownFormat(
                            f"{name}: the first record is neither OTLP/JSON (a line of the "
                            "OpenTelemetry Collector's file exporter, with resourceSpans or "
                            "resourceLogs) nor a request body (messages, input or contents); "
                            "see 'ctxkit audit --help'"
                        )
                if kind == "otlp":
                    try:
                        found = decode_json_line(data)
                    except NotOtlp as exc:
                        read.problems.append(Problem(where, str(exc)))
                        continue
                    read.records += len(found)
                    records.extend((record, where) for record in found)
                else:
                    try:
                        arrival.append(request_of(data, where, len(arrival)))
                    except NotABody as exc:
                        read.problems.append(Problem(where, str(exc)))
            if kind is None and form == "auto":
                skipped = read.problems[skipped_before:]
                if not skipped:
                    raise UnknownFormat(f"{name}: holds no record (an empty file?)")
                raise UnknownFormat(
                    f"{name}: no line reads as a record ({len(skipped)} tried; the first, "
                    f"{skipped[0].where}: {skipped[0].reason})"
                )
    found, problems = requests_of(records)
    arrival.extend(found)
    read.problems.extend(problems)
    read.requests = sorted(arrival, key=lambda r: r.time_ns)
    return read
