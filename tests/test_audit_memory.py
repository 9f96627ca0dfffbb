"""``ctxkit audit`` of files holds the conversations in flight, not every conversation it
read (issue 46, item 3): a first reading learns where each conversation ends, the second
finishes each at its last request (spooled to disk) and lets its audit go, and the reports
are written from the spool. They must be exactly the reports of an audit that holds every
conversation to the end, as ``ctxkit watch`` does."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from ctxkit.audit import Auditor
from ctxkit.audit.files import Reading, read_paths
from ctxkit.audit.finished import Spool
from ctxkit.audit.in_flight import audit_files
from ctxkit.audit.report import Outcome, as_json, text_summary, write_html, write_json, write_junit
from ctxkit.cli import main
from tests.audit_fleet import START_NS, body_lines, fleet, otlp_lines
from tests.schemas import valid

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of a mixed fleet: OTLP keyed by gen_ai.conversation.id, bodies keyed by
    metadata.conversation_id, and bodies with no key (joined by their prefixes)."""
    folder = tmp_path_factory.mktemp("mixed")
    (folder / "a-otlp.jsonl").write_text("\n".join(otlp_lines(fleet(31, 24), batch=5, seed=2)))
    keyed = [c for c in fleet(32, 24) if c.shape != "genai"]
    (folder / "b-keyed.jsonl").write_text("\n".join(body_lines(keyed, keyed=True)))
    plain = [c for c in fleet(33, 18) if c.shape != "genai"]
    (folder / "c-plain.jsonl").write_text("\n".join(body_lines(plain, keyed=False)))
    return folder


def _in_memory(paths: list[str], *, strict: bool, show_content: bool) -> Outcome:
    """Every conversation held to the end, then reported (what ``ctxkit audit`` did)."""
    contents: dict[str, dict[int, list[Any]]] = {}

    def keep(audit: Any, request: Any, found: list[Any]) -> None:
        if found:
            contents.setdefault(audit.key, {})[audit.requests - 1] = request.messages

    auditor = Auditor(listener=keep)
    read = read_paths(paths)
    for request in read.requests:
        auditor.add(request)
    shown = contents if show_content else None
    notes = sorted(read.notes)
    return Outcome.of(auditor, read.problems, strict=strict, contents=shown, notes=notes, gate=True)


def _written(outcome: Outcome, folder: Path, *, verbose: bool) -> dict[str, str]:
    folder.mkdir()
    write_json(outcome, folder / "report.json")
    write_junit(outcome, folder / "junit.xml")
    write_html(outcome, folder / "page.html")
    said = {path.name: path.read_text() for path in folder.iterdir()}
    return {**said, "text": text_summary(outcome, verbose=verbose)}


@pytest.mark.parametrize(
    ("strict", "show_content", "verbose"), [(False, False, False), (True, True, True)]
)
def test_a_streamed_audit_reports_exactly_what_one_held_in_memory_reports(
    mixed: Path, tmp_path: Path, strict: bool, show_content: bool, verbose: bool
):
    """JSON, text, JUnit and HTML alike, byte for byte: conversations in the order they
    began, every total, the exit code and state_bytes; messages shown only where found."""
    paths = [str(mixed)]
    streamed = audit_files(paths, strict=strict, show_content=show_content)
    assert isinstance(streamed.conversations, Spool)
    held = _in_memory(paths, strict=strict, show_content=show_content)
    said = _written(streamed, tmp_path / "streamed", verbose=verbose)
    assert said == _written(held, tmp_path / "held", verbose=verbose)

    report = as_json(held)
    valid("audit-report", report)
    assert said["report.json"] == json.dumps(report, indent=2) + "\n"
    assert as_json(streamed) == report
    assert streamed.exit_code == held.exit_code == 1
    failing = sum(c["verdict"] == "fail" for c in report["conversations"])
    counted = (streamed.tally.conversations, streamed.tally.failing)
    assert counted == (len(report["conversations"]), failing)
    assert len(report["conversations"]) > 60
    assert streamed.tally.requests == report["requests"] > 300
    assert ("\n    message[" in said["text"]) == show_content
    suite = ET.fromstring(said["junit.xml"])  # what ElementTree writes of the whole suite
    ET.indent(suite)
    assert said["junit.xml"] == ET.tostring(suite, encoding="unicode") + "\n"
    assert suite.get("failures") == str(failing)


def test_the_command_writes_the_reports_of_an_audit_held_in_memory(mixed: Path, tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(
            ["audit", str(mixed), "--report-json", str(out / "report.json"),
             "--junit", str(out / "junit.xml"), "--html", str(out / "page.html")]
        )  # fmt: skip
    held = _in_memory([str(mixed)], strict=False, show_content=False)
    expected = _written(held, tmp_path / "held", verbose=False)
    assert code == held.exit_code == 1
    assert printed.getvalue() == expected.pop("text") + "\n"
    assert {path.name: path.read_text() for path in out.iterdir()} == expected


def _sequential(tmp_path: Path) -> Path:
    """Keyed bodies, each conversation's requests in a row, one conversation after another."""
    lines = []
    for conversation in fleet(34, 30):
        if conversation.shape != "genai":
            lines.extend(body_lines([conversation], keyed=True))
    stamped = []
    for number, line in enumerate(lines):
        record = json.loads(line)
        record["timestamp"] = START_NS + number * 1_000_000
        stamped.append(json.dumps(record))
    path = tmp_path / "sequential.jsonl"
    path.write_text("\n".join(stamped) + "\n")
    return path


@pytest.mark.parametrize("recording", ["sequential", "mixed"])
def test_the_auditor_holds_only_the_conversations_in_flight(
    recording: str, mixed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """At each request, every conversation held has begun and not yet ended; after the
    audit, none is held. One after another, that is one conversation at a time."""
    path = str(_sequential(tmp_path) if recording == "sequential" else mixed)
    spans: dict[str, list[int]] = {}  # where each conversation begins and ends
    keyer = Auditor()
    for number, request in enumerate(Reading([path])):
        key, _ = keyer.key_of(request)
        spans.setdefault(key, [number, number])[1] = number
    held: list[tuple[int, list[str]]] = []
    auditors: list[Auditor] = []
    add = Auditor.add

    def watched(self: Auditor, request: Any, prints: Any = None) -> Any:
        done = add(self, request, prints)
        if self.listener is not None:  # the second reading's auditor
            auditors[:] = [self]
            held.append((self.requests - 1, list(self.conversations)))
        return done

    monkeypatch.setattr(Auditor, "add", watched)
    outcome = audit_files([path])
    assert len(held) == outcome.tally.requests == keyer.requests
    for number, keys in held:
        assert all(spans[key][0] <= number <= spans[key][1] for key in keys), number
    assert not auditors[0].conversations
    assert outcome.tally.conversations == len(spans)
    if recording == "sequential":
        assert max(len(keys) for _, keys in held) == 1
    else:
        assert max(len(keys) for _, keys in held) < len(spans)


def test_memory_does_not_follow_the_number_of_conversations(tmp_path: Path):
    """A real measurement, by the benchmark's own script: the peak resident memory of
    ``ctxkit audit`` of 1,000 and of 10,000 one-shot calls, writing its JSON report, is
    within 1.25x (it was 1.6x while every conversation was held to the end; 20,000 and
    200,000 are the benchmark's own figures)."""
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "memory_in_flight.py"), "--sizes", "1000",
         "10000", "--commands", "audit", "--json", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())["audit"]
    assert figures["ratio"] < 1.25, figures
    assert "| `ctxkit audit` |" in done.stdout
