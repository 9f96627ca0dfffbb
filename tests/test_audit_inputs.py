"""Every input read or refused, never an internal error (issue 46, item 2): what the audit's
readers (and the replay's, which are the same) make of damaged, repeated, mistyped and
unusual input. A record of the wrong type is skipped with its file:line; a gzip stream is read
up to its damage; a span or request line read twice counts once; a stream that can be read
only once is read (and spooled, for a replay that reads twice); an empty file beside its
rotated backups is a note; stdin closed is exit 2; recorded control characters never reach a
terminal as they are."""

from __future__ import annotations

import copy
import gzip
import json
import os
import re
import subprocess
import sys
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxkit.audit.auditor import Auditor
from ctxkit.audit.files import UnknownFormat, read_paths, spooled
from ctxkit.audit.report import Outcome, as_json, text_summary
from tests.audit_fleet import body_lines, fleet, otlp_exports, otlp_lines
from tests.otlp_files import collector_line, framed

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "ctxkit", "audit"]
RECORDINGS = sorted((ROOT / "tests" / "recordings").glob("*.jsonl"))
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def _audited(paths: list[str]) -> tuple[Outcome, Any]:
    """Read and audit in process, as ``ctxkit audit`` does."""
    read = read_paths(paths)
    auditor = Auditor()
    for request in read.requests:
        auditor.add(request)
    return Outcome.of(auditor, read.problems, notes=sorted(read.notes), gate=True), read


def _figures(outcome: Outcome) -> dict[str, Any]:
    """What an audit found, without what is said of how it was read (notes, and where in
    which file each finding was read)."""

    def unplaced(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: unplaced(v) for k, v in value.items() if k != "where"}
        if isinstance(value, list):
            return [unplaced(v) for v in value]
        return value

    report = as_json(outcome)
    return unplaced({k: v for k, v in report.items() if k not in ("notes", "python")})


# -- a property over typed mutations of good inputs, in every reader ---------------------------

GOOD: dict[str, list[str]] = {path.name: path.read_text().splitlines() for path in RECORDINGS}
GOOD["bodies"] = body_lines(fleet(seed=5, size=8), keyed=True)
GOOD["bodies with usage"] = [
    json.dumps(
        {
            "timestamp": 1_760_000_000 + n,
            "usage": {
                "prompt_tokens": 12,
                "prompt_tokens_details": {"cached_tokens": 4},
                "completion_tokens": 3,
            },
            "body": json.loads(line)["body"],
        }
    )
    for n, line in enumerate(GOOD["bodies"][:6])
]
OTLP = [name for name in GOOD if name.endswith(".jsonl")]

OTHER_TYPES = st.sampled_from(
    [None, True, 0, -3, 2.5, 10**30, "", "7", "x\x1b[2J", [], [1, "a"], {}, {"k": [None]},
     [{"role": "user"}], {"role": "user", "content": 3}]
).map(copy.deepcopy)  # fmt: skip
"""JSON values of every type, put where a field was (each a copy of its own: one put inside
another never makes a cycle)."""
ANY_VALUES = st.sampled_from(
    [{"intValue": "5"}, {"boolValue": True}, {"doubleValue": 1.5}, {"doubleValue": "NaN"},
     {"doubleValue": "Infinity"}, {"bytesValue": "AAEC"}, {}, {"stringValue": ""},
     {"stringValue": "[1, 2]"}, {"stringValue": "{}"}, {"arrayValue": {}},
     {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "1"}]}},
     {"kvlistValue": {"values": [{"key": "role", "value": {"stringValue": "user"}}]}}]
).map(copy.deepcopy)  # fmt: skip
"""OTLP attribute values of every type, put where an attribute's value was."""


def _places(value: Any, path: tuple = ()) -> list[tuple]:
    """Every place in a JSON value below its top, JSON text inside a string included (an
    attribute holding a message list): ``("json",)`` steps into it."""
    found = []
    if isinstance(value, dict):
        for key, inner in value.items():
            found += [(*path, key), *_places(inner, (*path, key))]
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += [(*path, index), *_places(inner, (*path, index))]
    elif isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            inner = json.loads(value)
        except ValueError:
            return found
        found += [(*path, ("json",), *place) for place in _places(inner)]
    return found


def _attribute_values(value: Any, path: tuple = ()) -> list[tuple]:
    """The places of OTLP attribute values (``{"key": ..., "value": HERE}``)."""
    found = []
    if isinstance(value, dict):
        if isinstance(value.get("key"), str) and "value" in value:
            found.append((*path, "value"))
        for key, inner in value.items():
            found += _attribute_values(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _attribute_values(inner, (*path, index))
    return found


def _changed(root: Any, path: tuple, new: Any, delete: bool) -> Any:
    """``root`` with the place at ``path`` replaced by ``new`` (or deleted)."""
    head, *rest = path
    if head == ("json",):
        return json.dumps(_changed(json.loads(root), tuple(rest), new, delete))
    if not rest:
        if delete:
            del root[head]
        else:
            root[head] = new
        return root
    root[head] = _changed(root[head], tuple(rest), new, delete)
    return root


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    """A good recording with one to three of its fields given another type (or deleted),
    written in one of the forms the file exporter writes (lines, gzip, framed protobuf, zstd
    frames), then maybe with lines repeated and the file cut short."""
    family = draw(st.sampled_from([OTLP, ["bodies"], ["bodies with usage"]]))
    name = draw(st.sampled_from(family))
    lines = list(GOOD[name])
    at = draw(st.integers(0, len(lines) - 1))
    data = json.loads(lines[at])
    for _ in range(draw(st.integers(1, 3))):
        attributes = _attribute_values(data)
        if attributes and draw(st.booleans()):
            data = _changed(data, draw(st.sampled_from(attributes)), draw(ANY_VALUES), False)
            continue
        places = _places(data)
        if not places:
            break
        delete = draw(st.integers(0, 3)) == 0
        data = _changed(data, draw(st.sampled_from(places)), draw(OTHER_TYPES), delete)
    lines[at] = json.dumps(data)
    if draw(st.integers(0, 3)) == 0:  # an exporter's retry, or a file written twice
        start = draw(st.integers(0, len(lines) - 1))
        lines += lines[start : start + draw(st.integers(1, 3))]
    form = draw(st.sampled_from(["lines", "gzip", "proto", "zstd"] if name in OTLP else ["lines"]))
    if form in ("proto", "zstd"):
        raw = _frames(lines, zstd=form == "zstd")
    else:
        raw = ("\n".join(lines) + "\n").encode()
        raw = gzip.compress(raw) if form == "gzip" else raw
    if draw(st.integers(0, 3)) == 0:
        raw = raw[: draw(st.integers(0, len(raw)))]
    return form, raw


def _frames(lines: list[str], *, zstd: bool) -> bytes:
    """Lines of OTLP/JSON as the file exporter's frames: each as protobuf where it parses as an
    export, else as the JSON text it is (a frame may hold either)."""
    import zstandard
    from google.protobuf import json_format
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from ctxkit.audit.otlp import _hex_ids_to_base64

    out = bytearray()
    for line in lines:
        try:
            data = json.loads(line)
            message: Any = (
                ExportTraceServiceRequest()
                if "resourceSpans" in data
                else ExportLogsServiceRequest()
            )
            json_format.ParseDict(_hex_ids_to_base64(copy.deepcopy(data)), message)
            payload = message.SerializeToString()
        except Exception:  # not an export: the frame holds its text
            payload = line.encode()
        if zstd:
            payload = zstandard.ZstdCompressor().compress(payload)
        out += len(payload).to_bytes(4, "big") + payload
    return bytes(out)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=mutated())
def test_a_mistyped_repeated_or_cut_recording_is_read_or_refused_never_a_crash(tmp_path, case):
    """Whatever was changed, the readers and the audit end in requests and problems (each
    named by file and line or frame), or in the user's error (a file in neither form): never
    in another exception, which the command would turn into exit 3."""
    form, raw = case
    source = tmp_path / f"recorded.{form}"
    source.write_bytes(raw)
    try:
        outcome, read = _audited([str(source)])
    except UnknownFormat:
        return
    assert all(p.where.startswith(f"{source}:") for p in read.problems)
    text = text_summary(outcome)
    json.dumps(as_json(outcome))
    assert not CONTROL.search(text)


@pytest.mark.parametrize(
    ("usage", "said"),
    [
        ({"prompt_tokens": "12"}, "usage.prompt_tokens is a string, not a number of tokens"),
        ({"prompt_tokens": [12]}, "usage.prompt_tokens is a list, not a number of tokens"),
        ({"input_tokens": {"n": 1}}, "usage.input_tokens is an object, not a number of tokens"),
        ({"completion_tokens": True}, "usage.completion_tokens is a boolean"),
        ({"prompt_tokens_details": {"cached_tokens": -1}}, "cached_tokens is a number, not"),
        ("12", "usage is a string, not an object of token counts"),
    ],
)
def test_a_usage_count_of_the_wrong_type_skips_its_line_by_file_and_line(tmp_path, usage, said):
    lines = GOOD["bodies"][:3]
    spoiled = json.loads(lines[1])
    spoiled["usage"] = usage
    source = tmp_path / "bodies.jsonl"
    source.write_text("\n".join([lines[0], json.dumps(spoiled), lines[2]]) + "\n")
    _, read = _audited([str(source)])
    assert len(read.requests) == 2
    ((where, reason),) = [(p.where, p.reason) for p in read.problems]
    assert where == f"{source}:2"
    assert said in reason


def test_a_span_with_a_model_or_key_of_the_wrong_type_is_skipped_with_its_place():
    from ctxkit.audit.genai import requests_of
    from ctxkit.audit.otlp import Record

    def span(span_id: str, extra: dict[str, Any]) -> Record:
        messages = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "q"}]}])
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": messages}
        return Record("span", "chat", 1, "ab" * 16, span_id, "", {**attributes, **extra}, "s", {})

    requests, problems = requests_of(
        [
            (span("01", {"gen_ai.request.model": "gpt-4o"}), "f:1"),
            (span("02", {"gen_ai.request.model": ["gpt-4o"]}), "f:2"),
            (span("03", {"gen_ai.conversation.id": {"id": 1}}), "f:3"),
            (span("04", {"gen_ai.usage.input_tokens": float("nan")}), "f:4"),
        ]
    )
    assert [r.where for r in requests] == ["f:1 span 01 (chat)"]
    assert [p.where.split(" ")[0] for p in problems] == ["f:2", "f:3", "f:4"]
    assert "gen_ai.request.model is ['gpt-4o'], not text" in problems[0].reason
    assert "not a number of tokens" in problems[2].reason


# -- the same export twice --------------------------------------------------------------------


def test_an_export_written_twice_gives_exactly_the_figures_of_it_once(tmp_path: Path):
    """An exporter that retries an export the receiver had taken, or a file copied twice into
    the folder, gives every span twice: counted once, with a note of how many were dropped."""
    conversations = fleet(seed=21, size=16)
    for name, lines in (
        ("otlp", otlp_lines(conversations, batch=4, seed=3)),
        ("bodies", body_lines(conversations, keyed=True)),
    ):
        once = tmp_path / f"{name}-once.jsonl"
        once.write_text("\n".join(lines) + "\n")
        retried = tmp_path / f"{name}-retried.jsonl"  # each export again, a little later
        retried.write_text("\n".join(lines[:3] + lines + lines[-5:]) + "\n")
        folder = tmp_path / f"{name}-folder"
        folder.mkdir()
        (folder / "traces.jsonl").write_text(once.read_text())
        (folder / "traces-copy.jsonl").write_text(once.read_text())
        expected, read = _audited([str(once)])
        assert not read.notes
        requests = expected.tally.requests
        assert requests > 50
        again = lines[:3] + lines[-5:]
        spans = sum(line.count('"spanId"') for line in again) if name == "otlp" else len(again)
        for twice, dropped in ((retried, spans), (folder, requests)):
            outcome, read = _audited([str(twice)])
            assert _figures(outcome) == _figures(expected), (name, twice)
            assert read.notes == {
                f"{dropped} records read twice counted once (the same span's trace and span id, "
                "or the same request line again: an exporter's retry, or a file written twice)"
            }
    exports = otlp_exports(conversations, batch=4, seed=3)
    framed_twice = tmp_path / "twice.bin"
    framed_twice.write_bytes(framed(exports + exports, zstd=True))
    outcome, _ = _audited([str(framed_twice)])
    once = tmp_path / "otlp-once.jsonl"
    assert _figures(outcome)["conversations"] == _figures(_audited([str(once)])[0])["conversations"]


def test_log_records_sent_twice_do_not_double_a_requests_messages(tmp_path: Path):
    """Per-message events are log records, which have no id: the same record again (its ids,
    time and content) is dropped; two records of one span that differ are both kept."""
    from tests.otlp_files import details_log

    logs = details_log()
    line = collector_line(logs)
    source = tmp_path / "logs.jsonl"
    source.write_text(line + "\n" + line + "\n")
    read = read_paths([str(source)])
    assert len(read.requests) == 1
    assert len(read.requests[0].messages) == 1


# -- damage --------------------------------------------------------------------------------


def _readable_lines(compressed: bytes) -> int:
    """How many whole lines the bytes of a cut gzip stream give, decompressed as far as
    they go."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(compressed)
    except zlib.error:
        data = b""
    return data.count(b"\n")


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.95])
def test_a_gzip_file_cut_short_keeps_every_line_before_the_cut_and_says_where(
    tmp_path: Path, cut: float
):
    lines = GOOD["bodies"]
    whole = gzip.compress(("\n".join(lines) + "\n").encode())
    source = tmp_path / "traces-rotated.jsonl.gz"
    source.write_bytes(whole[: int(len(whole) * cut)])
    read = read_paths([str(source)])
    kept = _readable_lines(source.read_bytes())
    assert 0 < kept < len(lines)
    assert len(read.requests) == kept
    (problem,) = read.problems
    assert problem.where == f"{source}:{kept + 1}"
    assert "the gzip stream is cut short" in problem.reason


def test_a_corrupt_gzip_file_keeps_what_came_before_the_damage(tmp_path: Path):
    lines = GOOD["bodies"]
    whole = bytearray(gzip.compress(("\n".join(lines) + "\n").encode()))
    whole[-6] ^= 0xFF  # the trailer's CRC: every line is there, the check fails
    source = tmp_path / "crc.jsonl.gz"
    source.write_bytes(bytes(whole))
    read = read_paths([str(source)])
    assert len(read.requests) == len(lines)
    assert [p.reason.split(" (")[0] for p in read.problems] == ["the gzip stream is damaged"]
    middle = bytearray(gzip.compress(("\n".join(lines) + "\n").encode()))
    middle[len(middle) // 2] ^= 0xFF
    source.write_bytes(bytes(middle))
    read = read_paths([str(source)])
    assert 0 < len(read.requests) < len(lines)
    assert "the gzip stream is" in read.problems[-1].reason


# -- streams, stdin, folders -------------------------------------------------------------------


def _written_by_a_thread(path: str, data: bytes) -> threading.Thread:
    def write() -> None:
        with open(path, "wb") as pipe:
            pipe.write(data)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_fifo_is_read_by_the_audit_and_spooled_for_a_second_reading(tmp_path: Path):
    """A FIFO (or a process substitution's /dev/fd/N) gives its bytes once: the audit reads it
    as it comes; :func:`spooled` copies it once, so that a replay reads it twice."""
    from ctxkit.replay.session import Recording

    data = ("\n".join(GOOD["bodies"]) + "\n").encode()
    fifo = str(tmp_path / "traces.fifo")
    os.mkfifo(fifo)
    writer = _written_by_a_thread(fifo, data)
    assert len(read_paths([fifo]).requests) == len(GOOD["bodies"])
    writer.join(10)
    reading, writing = os.pipe()  # what <(cat traces.jsonl) hands over: /dev/fd/N

    def write() -> None:
        with os.fdopen(writing, "wb") as pipe:
            pipe.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    with spooled([f"/dev/fd/{reading}", "keep/this.jsonl"]) as paths:
        writer.join(10)
        assert paths[1] == "keep/this.jsonl"
        recording = Recording(paths[:1])
        conversations = list(recording)
    os.close(reading)
    assert len(conversations) == recording.conversations == 8
    assert sum(len(c.calls) for c in conversations) == recording.requests == len(GOOD["bodies"])
    assert not Path(paths[0]).exists(), "the copy is removed"


def test_stdin_closed_is_exit_2_with_a_sentence(tmp_path: Path, monkeypatch):
    done = subprocess.run(
        ["sh", "-c", " ".join([*CLI, "-"]) + " <&-"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "stdin is closed" in done.stderr
    assert "Traceback" not in done.stderr
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(UnknownFormat, match="stdin is closed"), spooled(["-"]):
        pass


def test_an_empty_current_file_beside_its_rotated_backups_is_a_note(tmp_path: Path):
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "traces.jsonl").write_text("")  # just rotated
    with gzip.open(folder / "traces-2026-11-29T08-00-00.000.jsonl.gz", "wt") as rotated:
        rotated.write("\n".join(GOOD["bodies"]) + "\n")
    read = read_paths([str(folder)])
    assert len(read.requests) == len(GOOD["bodies"])
    assert read.notes == {
        f"{folder / 'traces.jsonl'} is empty (the current file just after a rotation?)"
    }
    with pytest.raises(UnknownFormat, match="holds no record"):
        read_paths([str(folder / "traces.jsonl")])  # named alone, it is the user's mistake


def test_the_command_reads_a_folder_of_damaged_files_and_never_exits_3(tmp_path: Path):
    """One run of the command over every kind of damage at once: each is a skipped record
    with its place, the rest is audited, and the exit code is the audit's own."""
    folder = tmp_path / "traces"
    folder.mkdir()
    lines = GOOD["bodies"]
    (folder / "a-current.jsonl").write_text("")
    whole = gzip.compress(("\n".join(lines[:20]) + "\n").encode())
    (folder / "b-cut.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    spoiled = json.loads(lines[21])
    spoiled["usage"] = {"prompt_tokens": {"n": 3}}
    (folder / "c-usage.jsonl").write_text("\n".join([json.dumps(spoiled), *lines[22:]]) + "\n")
    exports = otlp_exports(fleet(seed=4, size=3), batch=2, seed=1)
    (folder / "d-frames.bin").write_bytes(framed(exports)[:-7])
    report = tmp_path / "report.json"
    done = subprocess.run(
        [*CLI, str(folder), "--report-json", str(report)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr
    written = json.loads(report.read_text())
    skipped = {p["where"].split(":")[0].rsplit("/", 1)[-1]: p["reason"] for p in written["skipped"]}
    assert "cut short" in skipped["b-cut.jsonl.gz"]
    assert "usage.prompt_tokens is an object" in skipped["c-usage.jsonl"]
    assert "cut off" in skipped["d-frames.bin"]
    assert any("a-current.jsonl is empty" in note for note in written["notes"])
    assert written["requests"] > 20


# -- what reaches a terminal -----------------------------------------------------------------


def test_control_characters_in_a_key_a_model_or_a_reason_are_escaped_in_text(tmp_path: Path):
    hostile = "conv\x1b]0;owned\x07\x1b[2J\u202e\x9b"
    body = {
        "model": "gpt\x1b[31m",
        "metadata": {"conversation_id": hostile},
        "messages": [{"role": "user", "content": "q"}],
    }
    source = tmp_path / "hostile.jsonl"
    source.write_text(
        json.dumps({"timestamp": 1, "body": body})
        + "\n"
        + json.dumps({"timestamp": "\x1b[2J", "body": body})
        + "\n"
    )
    outcome, _ = _audited([str(source)])
    text = text_summary(outcome, verbose=True)
    assert not CONTROL.search(text)
    assert "\u202e" not in text
    assert "conv\\x1b]0;owned\\x07\\x1b[2J\\u202e\\x9b" in text
    assert as_json(outcome)["conversations"][0]["key"] == hostile, "JSON keeps what was recorded"


def test_the_replay_table_names_skipped_records_and_escapes_recorded_text():
    from ctxkit.audit.request import Problem
    from ctxkit.replay.report import as_json as replay_json
    from ctxkit.replay.report import merge, text_report
    from ctxkit.replay.session import Outcome as Replayed

    problems = [
        Problem(f"rec.jsonl:{n}", f"usage.prompt_tokens is a string ({n})") for n in range(7)
    ]
    report = replay_json(Replayed([], {}, 0, problems, ["a note"]))
    assert [p["where"] for p in report["skipped"]] == [p.where for p in problems]
    assert merge([report, report])["skipped"] == report["skipped"], "shards read the same files"
    key = "k\x1b[2J[/bold]"
    report["managers"] = [
        {
            "name": "recorded[/x]",
            "target": "recorded",
            "totals": {
                "requests": 1, "tokens_sent": 10, "billed_tokens": 10.0, "prefix_kept": None,
                "references_kept": None, "compactions": 0, "required_findings": 1, "errors": 0,
                "cost": None,
            },
            "conversations": [
                {
                    "key": key,
                    "findings": [
                        {"level": "required", "request": 0, "property": "ordering",
                         "message": "moved \x1b[31m"}
                    ],
                    "error": "",
                }
            ],
        }
    ]  # fmt: skip
    text = text_report(report)
    assert "7 records skipped" in text
    assert "skipped rec.jsonl:0: usage.prompt_tokens is a string (0)" in text
    assert "... and 2 more skipped records" in text
    assert "k\\x1b[2J[/bold]" in text
    assert "recorded[/x]" in text
    assert not CONTROL.search(text)


def test_a_file_whose_first_line_is_cut_is_read_as_it_comes_not_held_whole(tmp_path: Path):
    """A copy that starts in the middle of a line (``tail -c``) has a first line that is no
    JSON, which may begin a pretty-printed document: the next line that is a record on its
    own ends that wait, so the rest streams. Seen through a FIFO whose writer waits for the
    audit's first request before it writes the end: held whole, it would never come."""
    from ctxkit.audit.files import Reading

    lines = [  # past the 1,024 requests held to put them in time order
        json.dumps(
            {
                "timestamp": 1_760_000_000 + n,
                "body": {"model": "gpt-4o", "messages": [{"role": "user", "content": f"q{n}"}]},
            }
        )
        for n in range(1200)
    ]
    fifo = str(tmp_path / "cut.fifo")
    os.mkfifo(fifo)
    first_read = threading.Event()
    ended_first = []

    def write() -> None:
        with open(fifo, "w") as pipe:
            pipe.write(lines[0][17:] + "\n" + "\n".join(lines[1:-50]) + "\n")
            pipe.flush()
            ended_first.append(not first_read.wait(20))
            pipe.write("\n".join(lines[-50:]) + "\n")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    reading = Reading([fifo])
    requests = []
    for request in reading:
        first_read.set()
        requests.append(request)
    writer.join(10)
    assert ended_first == [False], "the first request came before the file's end"
    assert len(requests) == len(lines) - 1
    assert [p.where for p in reading.problems] == [f"{fifo}:1"]


def test_what_is_remembered_to_tell_a_copy_is_bounded():
    """Memory stays bounded however long the input: the newest half of what may be kept is
    always told, older marks are let go."""
    from ctxkit.audit.duplicates import Duplicates
    from ctxkit.audit.otlp import Record

    def span(number: int) -> Record:
        return Record("span", "chat", 1, f"{number:032x}", f"{number + 1:016x}", "", {}, "", {})

    duplicates = Duplicates(kept=8)
    assert len(duplicates.records([span(n) for n in range(20)])) == 20
    assert duplicates.records([span(n) for n in range(16, 20)]) == [], "the newest are told"
    assert len(duplicates.records([span(n) for n in range(4)])) == 4, "the oldest let go"
    assert duplicates.dropped == 4
    assert len(duplicates._newer) + len(duplicates._older) <= 8


def test_a_file_rotated_away_between_listing_and_reading_is_a_note(tmp_path: Path, monkeypatch):
    """The exporter may rename or remove a file after the folder was listed: that file is a
    note; a file named outright that is not there stays the user's mistake."""
    import ctxkit.audit.files as files

    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "traces.jsonl").write_text("\n".join(GOOD["bodies"]) + "\n")
    gone = folder / "traces-2026-11-29T07-00-00.000.jsonl"
    listed = files._files_of

    def listing(paths: Any) -> list[tuple[str, bool]]:
        return [(str(gone), True), *listed(paths)]

    monkeypatch.setattr(files, "_files_of", listing)
    read = read_paths([str(folder)])
    assert len(read.requests) == len(GOOD["bodies"])
    assert read.notes == {f"{gone} was gone before it was read (rotated away?)"}
    with pytest.raises(UnknownFormat, match="it is gone"):
        read_paths([str(gone)])
