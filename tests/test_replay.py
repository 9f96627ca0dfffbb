"""``ctxkit replay``: recorded traffic through candidate managers.

What must hold: a recording of an agent that never compacted, replayed through a manager
that keeps everything, is the recording again (same messages, same token counts), in every
recording form; a last-N window shows its pair breaks at the requests they happen; the
reference manager none, each view within its budget; ``recorded`` shows what the audit shows;
references kept are what they are on conversations built with known answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.audit.auditor import Auditor
from ctxkit.audit.files import read_paths
from ctxkit.audit.request import Request
from ctxkit.replay.conversation import Conversation
from ctxkit.replay.references import references
from ctxkit.replay.run import ManagerSpec
from ctxkit.replay.session import Options, Recording
from ctxkit.replay.session import replay as replay_all
from tests.audit_fleet import body_lines, fleet, otlp_exports, otlp_lines
from tests.schemas import valid

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ManagerSpec("recorded", "recorded")
EVERYTHING = ManagerSpec("everything", "tests.replay_managers:everything")
LAST_FOUR = ManagerSpec("last four", "tests.replay_managers:last_four")

pytestmark = pytest.mark.xdist_group("replay")


def replay(conversations: Any, managers: list[ManagerSpec], options: Options) -> dict[str, Any]:
    """Each manager's figures, one process."""
    return replay_all(conversations, managers, options)[0]


def _never_compacted() -> list[Any]:
    """Clean conversations of every shape whose agent never compacted."""
    found = [c for c in fleet(7, 96) if not c.planted and not c.clean_compactions]
    assert {c.shape for c in found} == {
        "openai",
        "anthropic",
        "responses",
        "gemini",
        "bedrock",
        "genai",
    }
    return found


def _write(path: Path, form: str, conversations: list[Any]) -> Path:
    """The conversations recorded in one of the forms ``ctxkit audit`` reads: ``otlp`` (the
    Collector's JSON lines), ``otlp-proto`` (its ``format: proto``, framed), ``bodies``."""
    if form == "otlp-proto":
        from tests.otlp_files import framed

        path.write_bytes(framed(otlp_exports(conversations, batch=4, seed=1)))
        return path
    lines = (
        otlp_lines(conversations, batch=4, seed=1)
        if form == "otlp"
        else body_lines(conversations, keyed=True)
    )
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def clean_fleet() -> list[Any]:
    return _never_compacted()


@pytest.mark.parametrize("form", ["otlp", "otlp-proto", "bodies"])
def test_a_recording_that_never_compacted_is_reproduced_by_a_manager_that_keeps_everything(
    tmp_path, form, clean_fleet
):
    path = _write(tmp_path / "recording.jsonl", form, clean_fleet)
    conversations = list(Recording([str(path)]))
    assert sorted(c.key for c in conversations) == sorted(c.key for c in clean_fleet)
    results = replay(conversations, [RECORDED, EVERYTHING], Options(keep_views=True))
    sent = {c.key: c.requests for c in clean_fleet}
    for recorded, everything in zip(results["recorded"], results["everything"], strict=True):
        assert everything.error == ""
        assert recorded.views == everything.views
        assert everything.tokens == recorded.tokens
        assert everything.findings == recorded.findings == []
        assert len(everything.views) == len(sent[everything.key])
    for conversation in conversations:
        assert conversation.unreconstructed == []


KEEPS_EVERYTHING_JS = """
export default class KeepsEverything {
  constructor(config, hooks) { this.messages = []; }
  addMessage(message) { this.messages.push(message); }
  getMessagesForRequest() { return this.messages; }
  getMessages() { return this.messages; }
  setMessages(messages) { this.messages = messages; }
  clear() { this.messages = []; }
}
"""


def test_a_javascript_manager_replays_like_a_python_one(tmp_path, clean_fleet):
    """A ``.mjs`` target, run under ctxkit's Node harness as ``ctxkit conformance`` runs it,
    reproduces a recording that never compacted exactly."""
    from tests.system import require_binary

    require_binary("node")
    manager = tmp_path / "keeps.mjs"
    manager.write_text(KEEPS_EVERYTHING_JS)
    path = _write(tmp_path / "recording.jsonl", "bodies", clean_fleet[:4])
    spec = ManagerSpec("js", str(manager))
    results = replay(list(Recording([str(path)])), [RECORDED, spec], Options(keep_views=True))
    for recorded, js in zip(results["recorded"], results["js"], strict=True):
        assert js.error == ""
        assert js.views == recorded.views
        assert js.tokens == recorded.tokens


def test_a_committed_instrumentation_recording_replays_exactly_through_keep_everything():
    """A real instrumentation's recording (OpenLLMetry on the OpenAI SDK): the agent's
    requests up to the planted break, where the recording dropped a message, rebuilt."""
    path = ROOT / "tests" / "recordings" / "openllmetry-openai.jsonl"
    (conversation,) = list(Recording([str(path)]))
    results = replay([conversation], [RECORDED, EVERYTHING], Options(keep_views=True))
    recorded, everything = results["recorded"][0], results["everything"][0]
    assert everything.views[:2] == recorded.views[:2]
    assert everything.tokens[:2] == recorded.tokens[:2]
    assert [(f.property, f.request) for f in recorded.findings] == [("tool_pair_integrity", 2)]
    assert everything.findings == []


def _first_cut_result(view: list[dict[str, Any]]) -> bool:
    """A view whose first message after the system prompt is a tool result (or, in the API
    shapes, answers a call) begins inside a tool pair: the window cut it."""
    from ctxkit.conformance.judge.parts import is_result

    rest = [m for m in view if m.get("role") != "system"]
    return bool(rest) and is_result(rest[0])


def test_a_last_n_window_shows_its_pair_breaks_at_the_requests_they_happen(tmp_path):
    # Responses left out: a cut there may part a reasoning item from its call, found as such
    conversations = [c for c in fleet(11, 60) if c.shape != "responses" and not c.planted]
    path = _write(tmp_path / "recording.jsonl", "bodies", conversations)
    rebuilt = list(Recording([str(path)]))
    results = replay(rebuilt, [RECORDED, LAST_FOUR], Options(keep_views=True))
    broke = 0
    for window in results["last four"]:
        cut = {k for k, view in enumerate(window.views) if _first_cut_result(view)}
        found = {f.request for f in window.findings if f.property == "tool_pair_integrity"}
        assert found == cut, window.key
        broke += bool(cut)
    assert broke, "the window cuts a pair somewhere in the fleet"


def test_the_reference_manager_breaks_nothing_and_keeps_each_view_within_its_budget(tmp_path):
    conversations = [c for c in fleet(13, 36) if not c.planted][:12]
    path = _write(tmp_path / "recording.jsonl", "otlp", conversations)
    rebuilt = list(Recording([str(path)]))
    reference = ManagerSpec("reference", "ctxkit.reference:mount")
    results = replay(rebuilt, [reference], Options(budget=400))
    compacted = 0
    for replayed in results["reference"]:
        assert replayed.error == ""
        assert [f for f in replayed.findings if f.level == "required"] == []
        assert all(tokens <= 400 for tokens in replayed.tokens), replayed.tokens
        compacted += replayed.compactions
    assert compacted, "a budget of 400 tokens makes the reference manager compact"


def test_recorded_shows_what_the_audit_shows(tmp_path):
    conversations = fleet(17, 36)
    assert any(c.planted for c in conversations)
    path = _write(tmp_path / "recording.jsonl", "otlp", conversations)
    auditor = Auditor()
    for request in read_paths([str(path)]).requests:
        auditor.add(request)
    audited = {
        key: sorted((f.property, f.kind, f.request) for f in audit.findings)
        for key, audit in auditor.conversations.items()
    }
    results = replay(list(Recording([str(path)])), [RECORDED], Options())
    replayed = {
        r.key: sorted((f.property, f.kind, f.request) for f in r.findings)
        for r in results["recorded"]
    }
    assert replayed == audited
    assert any(replayed.values())


# -- references kept -------------------------------------------------------------------------


def _request(messages: list[dict[str, Any]], at: int) -> Request:
    return Request(messages=messages, time_ns=at, where=f"test:{at}", model="gpt-4o", api="openai")


FACTS = [
    {"role": "system", "content": "You are a helpful operator."},
    {"role": "user", "content": "The staging database listens on port 6543."},
    {"role": "assistant", "content": "Noted."},
    {"role": "user", "content": "Its settings live in config/staging.yaml, key max_connections."},
    {"role": "assistant", "content": "Noted too."},
    {"role": "user", "content": "Which port, and where are the settings?"},
]
ANSWER = {
    "role": "assistant",
    "content": "Port 6543; the settings are in config/staging.yaml under max_connections.",
}


def _known() -> Conversation:
    """A conversation whose last answer uses three references from earlier messages: the
    port (message 1), the path and the key (message 3)."""
    conversation = Conversation("known", "test")
    conversation.add(_request(FACTS, 1))
    conversation.add(_request([*FACTS, ANSWER, {"role": "user", "content": "thanks"}], 2))
    return conversation


def test_references_are_the_answers_identifiers_numbers_paths_and_quotes_seen_before():
    earlier = [m["content"] for m in FACTS]
    assert references(ANSWER["content"], earlier) == {
        "6543",
        "config/staging.yaml",
        "max_connections",
    }
    assert references('use "connection refused" and 42', ['it said "connection refused"']) == {
        "connection refused"
    }
    assert references("see db.yaml", ["nothing of it here"]) == set()


@pytest.mark.parametrize(
    ("target", "kept"),
    [
        ("tests.replay_managers:everything", 3),  # all three there
        ("tests.replay_managers:last_four", 2),  # message 1 (the port) cut away
    ],
)
def test_references_kept_on_a_conversation_with_known_answers(target, kept):
    results = replay([_known()], [ManagerSpec("m", target)], Options())
    (replayed,) = results["m"]
    assert replayed.references_needed == 3
    assert replayed.references_kept == kept


_WORDS = st.sampled_from(
    ["alpha", "max_tokens", "port 6543", "src/app.py", "getMessages", "'quoted text'", "0.25"]
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_WORDS, min_size=1, max_size=6), min_size=2, max_size=8))
def test_a_manager_that_keeps_everything_keeps_every_reference(turns):
    messages: list[dict[str, Any]] = []
    conversation = Conversation("any", "test")
    for at, words in enumerate(turns):
        messages.append(
            {"role": "user" if at % 2 == 0 else "assistant", "content": " ".join(words)}
        )
        if messages[-1]["role"] == "user":
            conversation.add(_request(list(messages), at))
    results = replay([conversation], [EVERYTHING], Options())
    (replayed,) = results["everything"]
    assert replayed.references_kept == replayed.references_needed


# -- the command ------------------------------------------------------------------------------


def _ctxkit(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxkit", "replay", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def _schema_valid(report: dict[str, Any]) -> None:
    valid("replay-report", report)


FACT_TURNS = [
    ("The staging database listens on port 6543.", "Noted: port 6543."),
    ("Its settings are in config/staging.yaml.", "Noted: config/staging.yaml."),
    ("The pool size key is max_connections.", "Noted: max_connections."),
    ("We also run a cache on port 11211.", "Noted: the cache on 11211."),
    ("Which port does the staging database use?", "It listens on port 6543."),
    (
        "Where are its settings, and which key sets the pool?",
        "In config/staging.yaml, under max_connections.",
    ),
    ("thanks", "You are welcome."),
]


def _fact_lines() -> list[str]:
    """A conversation whose answers repeat facts said turns before: a window that forgets
    them shows it in references kept."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are the ops assistant."}]
    lines = []
    for turn, (said, answer) in enumerate(FACT_TURNS):
        messages.append({"role": "user", "content": said})
        body = {
            "model": "gpt-4o",
            "messages": list(messages),
            "metadata": {"conversation_id": "facts"},
        }
        lines.append(json.dumps({"timestamp": 1_770_000_000_000_000_000 + turn, "body": body}))
        messages.append({"role": "assistant", "content": answer})
    return lines


@pytest.fixture(scope="module")
def fleet_file(tmp_path_factory) -> Path:
    conversations = [c for c in fleet(19, 24) if c.shape in ("openai", "anthropic")]
    path = _write(tmp_path_factory.mktemp("replay") / "fleet.jsonl", "bodies", conversations)
    with path.open("a") as out:
        out.write("\n".join(_fact_lines()) + "\n")
    return path


def test_a_candidate_with_a_required_finding_fails_the_gate(tmp_path, fleet_file):
    report = tmp_path / "report.json"
    done = _ctxkit(
        str(fleet_file),
        "--manager",
        "window=tests.replay_managers:last_four",
        "--manager",
        "reference",
        "--report-json",
        str(report),
    )
    assert done.returncode == 1, done.stderr
    assert "FAIL window: " in done.stdout
    assert "FAIL reference" not in done.stdout
    data = json.loads(report.read_text())
    _schema_valid(data)
    assert [m["name"] for m in data["managers"]] == ["recorded", "window", "reference"]
    window = data["managers"][1]
    assert window["totals"]["required_findings"] > 0
    facts = {
        m["name"]: next(c for c in m["conversations"] if c["key"] == "facts")
        for m in data["managers"]
    }
    # each "Noted" answer repeats what the user just said, which every view holds; the answers
    # at requests 4 and 5 need facts said turns before, which the window has dropped
    assert facts["reference"]["references_kept"] == facts["recorded"]["references_kept"] == 1.0
    assert facts["window"]["references_kept"] < 1.0
    first = next(c for c in window["conversations"] if c["findings"])
    assert f"window: conversation {first['key']}, request {first['findings'][0]['request']}" in (
        done.stdout
    )


def test_thresholds_fail_the_gate_and_a_clean_candidate_passes(fleet_file):
    passing = _ctxkit(str(fleet_file), "--manager", "reference")
    assert passing.returncode == 0, passing.stdout + passing.stderr
    # the recorded agent compacted; the reference manager, with the model's whole window,
    # did not: it sent more than half the recorded tokens
    more = _ctxkit(str(fleet_file), "--manager", "reference", "--fail-if", "tokens>0.5*recorded")
    assert more.returncode == 1
    assert "FAIL reference: tokens>0.5*recorded" in more.stdout


def test_a_price_per_model_gives_the_cost_and_a_cost_gate_needs_one(tmp_path, fleet_file):
    report = tmp_path / "report.json"
    priced = _ctxkit(
        str(fleet_file),
        "--manager",
        "reference",
        "--price",
        "gpt-4o=2.5",
        "--price",
        "claude=3",
        "--report-json",
        str(report),
        "--fail-if",
        "cost>100",
    )
    assert priced.returncode == 0, priced.stdout + priced.stderr
    data = json.loads(report.read_text())
    _schema_valid(data)
    for manager in data["managers"]:
        billed, cost = manager["totals"]["billed_tokens"], manager["totals"]["cost"]
        # every model here is priced 2.5 or 3 dollars a million tokens
        assert 2.5 * billed / 1e6 <= cost + 1e-6
        assert cost <= 3 * billed / 1e6 + 1e-6
    unpriced = _ctxkit(str(fleet_file), "--manager", "reference", "--fail-if", "cost>100")
    assert unpriced.returncode == 1
    assert "cost>100 cannot be judged: no cost figure (give --price" in unpriced.stdout


def test_shards_merge_into_the_whole_replay(tmp_path, fleet_file):
    whole = tmp_path / "whole.json"
    assert (
        _ctxkit(str(fleet_file), "--manager", "reference", "--report-json", str(whole)).returncode
        == 0
    )
    parts = []
    for index in (1, 2):
        part = tmp_path / f"part{index}.json"
        done = _ctxkit(
            str(fleet_file),
            "--manager",
            "reference",
            "--shard",
            f"{index}/2",
            "--report-json",
            str(part),
        )
        assert done.returncode == 0, done.stderr
        parts.append(str(part))
    merged = tmp_path / "merged.json"
    assert _ctxkit("--merge", *parts, "--report-json", str(merged)).returncode == 0
    want, got = json.loads(whole.read_text()), json.loads(merged.read_text())
    _schema_valid(got)
    for a, b in zip(want["managers"], got["managers"], strict=True):
        assert a["totals"] == b["totals"]
        assert sorted(c["key"] for c in a["conversations"]) == sorted(
            c["key"] for c in b["conversations"]
        )


def test_two_jobs_give_the_same_report_as_one(tmp_path, fleet_file):
    reports = []
    for jobs in ("1", "2"):
        path = tmp_path / f"jobs{jobs}.json"
        done = _ctxkit(
            str(fleet_file), "--manager", "reference", "--jobs", jobs, "--report-json", str(path)
        )
        assert done.returncode == 0, done.stderr
        reports.append(json.loads(path.read_text()))
    assert reports[0] == reports[1]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--manager", "no_such_module:Manager"], "--manager no_such_module:Manager"),
        (["--manager", "reference:nope"], "no such reference preset"),
        (["--manager", "reference", "--fail-if", "speed>3"], "no metric 'speed'"),
        (["--manager", "reference", "--shard", "3/2"], "--shard '3/2'"),
        (["--manager", "reference", "--budget", "0"], "--budget 0"),
    ],
)
def test_bad_usage_is_exit_2_with_the_reason(fleet_file, args, said):
    done = _ctxkit(str(fleet_file), *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_recording_is_exit_2(tmp_path):
    done = _ctxkit(str(tmp_path / "missing.jsonl"), "--manager", "reference")
    assert done.returncode == 2
    assert "no such file or directory" in done.stderr


# -- the page ---------------------------------------------------------------------------------


def test_the_page_draws_every_manager_and_the_view_where_a_candidate_broke(tmp_path, fleet_file):
    """A real run's page in Debian's headless Chromium: a row and a line per manager, the
    shares as bars, the view the window would have sent where it first broke. With
    CTXKIT_DOCS_PICTURES set, its screenshot is the docs' picture (docs/replay.md)."""
    import os

    from selenium.webdriver.common.by import By

    from tests.test_survey import chromium

    page = tmp_path / "replay.html"
    done = _ctxkit(
        str(fleet_file),
        "--manager",
        "reference",
        "--manager",
        "reference:hierarchical",
        "--manager",
        "window=tests.replay_managers:last_four",
        "--budget",
        "300",
        "--html",
        str(page),
    )
    assert done.returncode == 1, done.stderr
    with chromium(1200, 1100) as browser:
        browser.get(page.as_uri())
        rows = browser.find_elements(By.CSS_SELECTOR, "table:first-of-type tbody tr")
        names = [r.find_element(By.CSS_SELECTOR, ".key").text for r in rows[:4]]
        assert names == ["recorded", "reference", "reference:hierarchical", "window"]
        first_chart = browser.find_element(By.CSS_SELECTOR, "h3.key + svg")
        assert len(first_chart.find_elements(By.TAG_NAME, "polyline")) == 5  # 4 + budget
        summary = browser.find_element(By.CSS_SELECTOR, "details summary")
        assert "window would have sent at request" in summary.text
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
        shot = tmp_path / "replay.png"
        browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        if os.environ.get("CTXKIT_DOCS_PICTURES"):
            (ROOT / "docs" / "assets" / "replay.png").write_bytes(shot.read_bytes())


def test_recorded_text_never_becomes_markup_on_the_page(tmp_path):
    from ctxkit.replay.report import write_html

    evil = "<script>alert(1)</script>"
    report = {
        "version": 1,
        "tool": "ctxkit replay",
        "shard": None,
        "conversations": 1,
        "notes": [evil],
        "managers": [
            {
                "name": evil,
                "target": "recorded",
                "config": {},
                "form": None,
                "totals": {
                    "requests": 1,
                    "tokens_sent": 5,
                    "billed_tokens": 5,
                    "prefix_kept": None,
                    "references_kept": None,
                    "compactions": 0,
                    "required_findings": 0,
                    "errors": 0,
                },
                "conversations": [
                    {
                        "key": evil,
                        "requests": 1,
                        "tokens": [5],
                        "budgets": [None],
                        "findings": [
                            {
                                "property": "ordering",
                                "level": "required",
                                "request": 0,
                                "message": evil,
                            }
                        ],
                    }
                ],
            }
        ],
    }
    page = tmp_path / "page.html"
    write_html(report, page, {(evil, evil): (0, [{"role": "user", "content": evil}])})
    text = page.read_text()
    assert "<script>" not in text
    assert text.count("&lt;script&gt;") >= 4


# -- reading the recording ----------------------------------------------------------------------


def _body_line(key: str, at: int, messages: list[dict[str, Any]]) -> str:
    body = {"model": "gpt-4o", "messages": messages, "metadata": {"conversation_id": key}}
    return json.dumps({"timestamp": 1_770_000_000_000_000_000 + at, "body": body})


def test_each_conversation_is_given_as_soon_as_its_last_request_is_read(tmp_path):
    """What a replay holds is the conversations in flight: the recording is read twice, and
    each conversation leaves at its last request, in that order."""
    system = {"role": "system", "content": "s"}
    turns = [{"role": "user", "content": f"q{n}"} for n in range(4)]
    order = ["a", "b", "a", "c", "a", "b", "c", "c"]
    lines, seen = [], {}
    for at, key in enumerate(order):
        seen[key] = seen.get(key, 0) + 1
        lines.append(_body_line(key, at, [system, *turns[: seen[key]]]))
    path = tmp_path / "bodies.jsonl"
    path.write_text("\n".join(lines) + "\n")
    recording = Recording([str(path)])
    assert (recording.requests, recording.conversations) == (8, 3)
    given = []
    for conversation in recording:
        given.append((conversation.key, len(conversation.calls)))
    assert given == [("a", 3), ("b", 2), ("c", 3)]
    halves = [Recording([str(path)], shard=(i, 2)) for i in (0, 1)]
    assert sorted(c.key for half in halves for c in half) == ["a", "b", "c"]


def test_a_recording_on_stdin_is_replayed_as_a_file_is(fleet_file):
    from_file = _ctxkit(str(fleet_file), "--manager", "reference")
    with fleet_file.open() as stdin:
        from_stdin = subprocess.run(
            [sys.executable, "-m", "ctxkit", "replay", "-", "--manager", "reference"],
            stdin=stdin,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
    assert from_stdin.returncode == from_file.returncode == 0, from_stdin.stderr
    assert from_stdin.stdout == from_file.stdout


def test_a_fifo_is_replayed_as_a_file_is_and_closed_stdin_is_exit_2(tmp_path, fleet_file):
    """A stream read once (a FIFO, a process substitution) is spooled, as stdin is, for the
    replay's two readings; stdin closed is the user's to fix, said in a sentence."""
    import os
    import threading

    from_file = _ctxkit(str(fleet_file), "--manager", "everything=tests.replay_managers:everything")
    fifo = tmp_path / "recording.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with fifo.open("wb") as out:
            out.write(fleet_file.read_bytes())

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    from_fifo = _ctxkit(str(fifo), "--manager", "everything=tests.replay_managers:everything")
    writer.join(10)
    assert from_fifo.returncode == from_file.returncode, from_fifo.stderr
    assert from_fifo.stdout == from_file.stdout
    closed = subprocess.run(
        [sys.executable, "-m", "ctxkit", "replay", "-"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        preexec_fn=lambda: os.close(0),
    )
    assert closed.returncode == 2, closed.stderr
    assert "stdin is closed" in closed.stderr
    assert "Traceback" not in closed.stderr


# -- the model's answers as recorded --------------------------------------------------------------


def _answered_spans(tmp_path: Path, with_output: bool) -> Path:
    """The facts conversation as GenAI spans (``gen_ai.input.messages``), each with the
    model's answer in ``gen_ai.output.messages`` when ``with_output``."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.otlp_files import trace_lines

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("replay-test")
    messages: list[dict[str, Any]] = []
    for turn, (said, answer) in enumerate(FACT_TURNS):
        messages.append({"role": "user", "parts": [{"type": "text", "content": said}]})
        span = tracer.start_span("chat gpt-4o", start_time=1_770_000_000_000_000_000 + turn)
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.request.model", "gpt-4o")
        span.set_attribute("gen_ai.conversation.id", "facts")
        span.set_attribute("gen_ai.input.messages", json.dumps(messages))
        reply = {"role": "assistant", "parts": [{"type": "text", "content": answer}]}
        if with_output:
            span.set_attribute("gen_ai.output.messages", json.dumps([reply]))
        span.end(end_time=1_770_000_000_000_000_000 + turn + 1)
        messages.append(reply)
    path = tmp_path / ("with.jsonl" if with_output else "without.jsonl")
    path.write_text("\n".join(trace_lines(exporter.get_finished_spans())) + "\n")
    provider.shutdown()
    return path


def test_the_answers_kept_in_the_recording_are_scored_the_last_one_too(tmp_path):
    """The model's answer at each call is read from ``gen_ai.output.messages`` where the
    recording keeps it: the last call's answer (``You are welcome.`` here has no reference,
    so the figures match the answers taken from the next request), and an answer recorded
    differently from the next request's copy is scored as recorded."""
    kept = replay(list(Recording([str(_answered_spans(tmp_path, True))])), [EVERYTHING], Options())
    taken = replay(
        list(Recording([str(_answered_spans(tmp_path, False))])), [EVERYTHING], Options()
    )
    (with_output,), (without,) = kept["everything"], taken["everything"]
    assert with_output.references_needed == without.references_needed == 7
    assert with_output.references_kept == 7
    (conversation,) = list(Recording([str(_answered_spans(tmp_path, True))]))
    last = conversation.calls[-1]
    assert conversation.output_of(last) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "You are welcome."}]}
    ]


@pytest.mark.parametrize(
    ("attributes", "said"),
    [
        ({"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "6543"}, "6543"),
        (
            {
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "6543",
            },
            "6543",
        ),
        ({"gen_ai.output.messages": "not json ["}, None),
    ],
)
def test_answers_are_read_in_each_instrumentations_form(attributes, said):
    from ctxkit.audit.genai import _outputs
    from ctxkit.replay.references import text_of

    found = _outputs(attributes)
    assert (text_of(found) if found else None) == said


def test_with_no_manager_the_reference_manager_is_the_candidate(tmp_path, fleet_file):
    report = tmp_path / "report.json"
    done = _ctxkit(str(fleet_file), "--report-json", str(report))
    assert done.returncode == 0, done.stderr
    names = [m["name"] for m in json.loads(report.read_text())["managers"]]
    assert names == ["recorded", "reference"]


def test_a_spooled_replay_reports_what_one_held_in_memory_reports(tmp_path, fleet_file):
    """Figures spooled to disk as each conversation ends (what the command does, so memory
    follows the conversations in flight) give the very report, sentences and page that the
    same figures held in memory give."""
    from ctxkit.replay import report as reports
    from ctxkit.replay.session import Outcome
    from ctxkit.replay.spool import Spool, write_json

    managers = [RECORDED, LAST_FOUR, EVERYTHING]
    made = {}
    for spooled in (False, True):
        results, _ = replay_all(Recording([str(fleet_file)]), managers, Options(), spooled=spooled)
        assert all(isinstance(r, Spool) == spooled for r in results.values())
        report = reports.as_json(Outcome(managers, results, len(results["recorded"])))
        path = tmp_path / f"spooled-{spooled}.json"
        write_json(report, path)
        page = tmp_path / f"spooled-{spooled}.html"
        reports.write_html(report, page)
        said = (reports.text_report(report), reports.failures(report, []))
        made[spooled] = (json.loads(path.read_text()), said, page.read_text())
    assert made[True] == made[False]
    held, _, _ = made[False]
    valid("replay-report", held)
    assert held["managers"][1]["totals"]["required_findings"] > 0  # there is a page to draw
