"""Reading recorded requests from files: OTLP/JSON as the Collector's ``file`` exporter writes
it (one export request of traces or logs per line), or JSON Lines of raw request bodies.

Each file's form is told from its first record; a file in neither form is the user's mistake
(:class:`UnknownFormat`). Inside a file, a line that does not parse or decode, or a span with a
malformed message list, is a :class:`~ctxkit.audit.request.Problem` with its file and line, and
the rest goes on. A file that is one JSON document (a pretty-printed export, or an array of
bodies) is read as a whole.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import IO, Any

from ctxkit.audit.bodies import NotABody, is_body_line, request_of
from ctxkit.audit.genai import requests_of
from ctxkit.audit.otlp import NotOtlp, Record, decode_json_line
from ctxkit.audit.request import Problem, Request

__all__ = ["FORMATS", "Read", "UnknownFormat", "read_paths"]

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
    """(line number, parsed JSON or None, error, characters read so far) per non-empty line;
    a file that is one JSON document spread over lines comes back as that document (its
    items, for an array)."""
    text_lines: list[str] = []
    first_error = ""
    consumed = 0
    for number, line in enumerate(handle, 1):
        consumed += len(line)
        if not line.strip():
            continue
        if text_lines or (number == 1 and not _parses(line)):
            text_lines.append(line)
            continue
        try:
            yield number, json.loads(line), "", consumed
        except ValueError as exc:
            yield number, None, f"not JSON: {exc}", consumed
    if text_lines:
        try:
            whole = json.loads("".join(text_lines))
        except ValueError as exc:
            first_error = str(exc)
            yield 1, None, f"not JSON: {first_error}", consumed
            return
        for item in whole if isinstance(whole, list) else [whole]:
            yield 1, item, "", consumed


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _open(path: str) -> tuple[IO[str], str]:
    if path == "-":
        return sys.stdin, "<stdin>"
    try:
        return open(path, encoding="utf-8", errors="replace"), path
    except OSError as exc:
        raise UnknownFormat(f"cannot read {path}: {exc.strerror or exc}") from None


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
    for path in paths:
        handle, name = _open(path)
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
                raise UnknownFormat(f"{name}: holds no record (an empty file?)")
    found, problems = requests_of(records)
    arrival.extend(found)
    read.problems.extend(problems)
    read.requests = sorted(arrival, key=lambda r: r.time_ns)
    return read
