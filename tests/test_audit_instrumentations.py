"""The audit on what real GenAI instrumentations record (tests/record_instrumented.py):
OpenTelemetry's official openai-v2 (content on spans, and on log events), OpenLLMetry's openai
and anthropic, OpenInference's openai (Chat and Responses) and google-genai, Logfire's
instrument_openai (Chat and Responses) and instrument_anthropic, each wrapping the real client
library against a loopback fake provider. Each agent sends its API's three requests in one
trace: the second clean but unusual (parallel calls, which Logfire and OpenInference record
as messages of their own; Gemini calls without ids), the third with a result whose call is
gone. The audit must judge each request by the API it went to and find exactly the planted
break, at request 2, and nothing else, from the file the telemetry was written to (``ctxkit
audit``) and from the same telemetry received live (``ctxkit watch``).

The agents run once, side by side, each exporting to a file and to one receiver."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ctxkit.audit import Auditor
from ctxkit.audit.apis import API_NAMES
from ctxkit.audit.files import read_paths
from tests.fake_provider import FakeProvider
from tests.record_instrumented import CONTENT_SETTINGS, EXPECTED, api_of
from tests.system import missing, require_binary
from tests.test_watch import Receiver, post, watching

ROOT = Path(__file__).resolve().parent.parent
INSTRUMENTATIONS = sorted(CONTENT_SETTINGS)


def expected_findings(instrumentation: str) -> list[tuple[str, int, str]]:
    return EXPECTED[api_of(instrumentation)]


def findings_of(report: dict) -> list[tuple[str, int, str]]:
    return [
        (f["property"], f["request"], f["rule"])
        for conversation in report["conversations"]
        for f in conversation["findings"]
    ]


def record_side_by_side(commands: dict[str, list[str]], timeout: float = 120) -> dict[str, str]:
    """Run each recorder in a process of its own (instrumentations patch a whole process),
    all at once; each one's standard error once all have succeeded."""
    runs = {
        name: subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, command in commands.items()
    }
    errors = {}
    for name, run in runs.items():
        _, errors[name] = run.communicate(timeout=timeout)
        assert run.returncode == 0, (name, errors[name])
    return errors


def audit_report(paths: list[Path], tmp_path: Path, exit_code: int) -> dict:
    """``ctxkit audit PATHS --report-json``: the report, once the run exited as expected."""
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "ctxkit", "audit", *map(str, paths),
         "--report-json", str(report_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == exit_code, done.stdout + done.stderr
    return json.loads(report_path.read_text())


@dataclass
class Recorded:
    files: dict[str, Path]
    live: dict
    """The receiver's report once every agent was recorded."""
    log: str
    record: Path
    """What the receiver wrote with --record."""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    folder = tmp_path_factory.mktemp("instrumented")
    files = {name: folder / f"{name}.jsonl" for name in INSTRUMENTATIONS}
    record = folder / "watched.jsonl"
    with watching(folder, "--settle", "1", "--record", str(record)) as receiver:
        script = str(ROOT / "tests" / "record_instrumented.py")
        record_side_by_side(
            {
                name: [
                    sys.executable,
                    script,
                    name,
                    "--file",
                    str(files[name]),
                    "--endpoint",
                    receiver.url,
                ]
                for name in INSTRUMENTATIONS
            }
        )
        _wait_until_audited(receiver, 3 * len(INSTRUMENTATIONS))
        live = receiver.stop()
        yield Recorded(files, live, receiver.log.read_text(), record)


def _wait_until_audited(receiver: Receiver, requests: int) -> None:
    deadline = time.monotonic() + 30
    while receiver.metric("ctxkit_audit_requests_total") < requests:
        assert time.monotonic() < deadline, "the receiver did not audit every request"
        time.sleep(0.2)


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_a_recorded_split_pair_is_found_at_its_request(
    recorded: Recorded, instrumentation: str, tmp_path: Path
):
    report = audit_report([recorded.files[instrumentation]], tmp_path, 1)
    (conversation,) = report["conversations"]
    assert conversation["requests"] == 3
    assert conversation["keyed_by"] == "trace"
    assert findings_of(report) == expected_findings(instrumentation)
    assert report["skipped"] == []  # the SDK's own spans are not requests without content
    apis = {f["api"] for c in report["conversations"] for f in c["findings"]}
    assert apis == {API_NAMES[api_of(instrumentation)]}


def test_the_same_telemetry_received_live_gives_the_same_findings(recorded: Recorded):
    assert len(recorded.live["conversations"]) == len(INSTRUMENTATIONS)
    assert sorted(findings_of(recorded.live)) == sorted(
        finding for name in INSTRUMENTATIONS for finding in expected_findings(name)
    )
    assert recorded.live["exit_code"] == 1
    assert "message[2] is a tool result" in recorded.log
    assert "list files" not in recorded.log  # content is never printed


# -- the Vercel AI SDK 5, 6 and 7 (tests/js/record_ai_sdk.mjs) ------------------------------


@pytest.fixture(scope="module")
def ai_sdk_recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both of @ai-sdk/otel's integrations, recorded side by side against one fake provider."""
    node = require_binary("node")
    if not (ROOT / "tests" / "js" / "node_modules" / "@ai-sdk" / "otel").is_dir():
        missing("tests/js has no node_modules: run `npm ci --prefix tests/js`")
    folder = tmp_path_factory.mktemp("ai-sdk")
    files = {mode: folder / f"{mode}.jsonl" for mode in ("legacy", "otel", "ai5", "ai6")}
    with FakeProvider() as fake:
        script = str(ROOT / "tests" / "js" / "record_ai_sdk.mjs")
        record_side_by_side(
            {
                mode: [node, script, mode, "--base-url", fake.url, "--out", str(path)]
                for mode, path in files.items()
            }
        )
        assert len(fake.requests) == 3 * len(files)  # three model calls each
    return files


@pytest.mark.parametrize(
    ("mode", "told"),
    [
        ("legacy", "told by ai.model.provider openai.chat"),
        ("otel", "told by gen_ai.provider.name openai and gen_ai.operation.name chat"),
        ("ai5", "told by ai.model.provider openai.chat"),
        ("ai6", "told by ai.model.provider openai.chat"),
    ],
)
def test_ai_sdk_model_calls_are_the_requests_and_the_split_pair_is_found(
    ai_sdk_recordings: dict[str, Path], mode: str, told: str, tmp_path: Path
):
    """AI SDK 7 through @ai-sdk/otel (legacy ai.* spans, GenAI spans), AI SDK 5 and 6 with
    their own telemetry. The invoke_agent span (otel) and the outer ai.generateText span carry
    the run's messages too: only the model calls are requests, so the break is at request 2."""
    report = audit_report([ai_sdk_recordings[mode]], tmp_path, 1)
    (conversation,) = report["conversations"]
    assert conversation["requests"] == 3
    assert findings_of(report) == [("tool_pair_integrity", 2, "openai.result_has_call")]
    (finding,) = conversation["findings"]
    assert finding["api_told"] == told


# -- pydantic-ai's own instrumentation (tests/record_pydantic_ai.py), every version ---------


@pytest.fixture(scope="module")
def pydantic_ai_recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    from tests.record_pydantic_ai import VERSIONS

    folder = tmp_path_factory.mktemp("pydantic-ai")
    files = {version: folder / f"v{version}.jsonl" for version in VERSIONS}
    script = str(ROOT / "tests" / "record_pydantic_ai.py")
    errors = record_side_by_side(
        {
            str(version): [sys.executable, script, "--version", str(version), "--file", str(path)]
            for version, path in files.items()
        }
    )
    assert all("3 request bodies" in text for text in errors.values()), errors
    return files


def test_pydantic_ai_every_version_three_model_calls_one_conversation_no_finding(
    pydantic_ai_recordings: dict[int, Path], tmp_path: Path
):
    """Each run's agent span carries the run's messages too (pydantic_ai.all_messages): only
    the three model calls are requests, joined by pydantic-ai's own conversation id, and the
    clean call and result (which v6 records as a tool message, earlier versions inside the
    user's turn) draw nothing."""
    report = audit_report(list(pydantic_ai_recordings.values()), tmp_path, 0)
    assert sorted((c["key"], c["keyed_by"], c["requests"]) for c in report["conversations"]) == [
        (f"conv-pydantic-ai-v{version}", "gen_ai.conversation.id", 3)
        for version in sorted(pydantic_ai_recordings)
    ]
    assert findings_of(report) == []


def test_what_watch_recorded_audits_as_it_did_live(recorded: Recorded, tmp_path: Path):
    """``ctxkit watch --record`` writes every export it took as the Collector's file exporter
    does: the file audits to the same findings, and each model call is in it once."""
    report = audit_report([recorded.record], tmp_path, 1)
    assert sorted(findings_of(report)) == sorted(findings_of(recorded.live))
    assert report["requests"] == recorded.live["requests"] == 3 * len(INSTRUMENTATIONS)


# -- frameworks (the OpenAI Agents SDK, LangChain), Bedrock, LiteLLM -----------------------

FRAMEWORKS = {
    "openinference-openai-agents": (
        ["record_openai_agents.py", "openinference-openai-agents"],
        ("tool_pair_integrity", 2, "responses.output_has_call"),
    ),
    **{
        f"{name}{chain}": (
            ["record_langchain.py", name, *(["--chain"] if chain else [])],
            ("tool_pair_integrity", 2, "openai.result_has_call"),
        )
        for name in ("openinference-langchain", "openllmetry-langchain")
        for chain in ("", "-chain")
    },
    **{
        name: (["record_more.py", name], ("tool_pair_integrity", 2, "bedrock.result_has_call"))
        for name in ("openllmetry-bedrock", "openinference-bedrock")
    },
    **{
        name: ([script, name], ("tool_pair_integrity", 2, "openai.result_has_call"))
        for script, name in (
            ("record_more.py", "litellm-otel"),
            ("record_more.py", "openinference-litellm"),
        )
    },
    # A response recorded with neither id nor name (OpenLLMetry) pairs by its place.
    "openllmetry-google-genai": (
        ["record_more.py", "openllmetry-google-genai"],
        ("tool_pair_integrity", 2, "gemini.response_has_call"),
    ),
}
"""Recordings of frameworks (whose agent, workflow and chain spans carry the messages too), Bedrock
Converse, LiteLLM (its callback and OpenInference's) and OpenLLMetry's google-genai: the script
and its arguments, and the one finding the audit must make. (tests/record_more.py's otel-google-
genai needs opentelemetry-util-genai 1.x, with which the official openai-v2 2.4b0 no longer
imports: not installed beside it.)"""


@pytest.fixture(scope="module")
def framework_recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("frameworks")
    files = {name: folder / f"{name}.jsonl" for name in FRAMEWORKS}
    record_side_by_side(
        {
            name: [sys.executable, str(ROOT / "tests" / script), *args, "--file", str(files[name])]
            for name, ((script, *args), _) in FRAMEWORKS.items()
        },
        timeout=180,
    )
    return files


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_a_framework_s_model_calls_are_the_requests(
    framework_recordings: dict[str, Path], name: str, tmp_path: Path
):
    report = audit_report([framework_recordings[name]], tmp_path, 1)
    (conversation,) = report["conversations"]
    assert conversation["requests"] == 3  # not the chain, workflow or agent spans
    assert findings_of(report) == [FRAMEWORKS[name][1]]


# -- the committed recordings (tests/recordings/, rebuilt by tests/record_all.py) -----------

RECORDINGS = ROOT / "tests" / "recordings"


def committed_findings(name: str) -> list[tuple[str, int, str]]:
    """What the audit must find in a committed recording, and nothing else."""
    if name.startswith("pydantic-ai-"):
        return []  # pydantic-ai drops the split pair's result before sending
    if name.startswith("ai-sdk-"):
        return [("tool_pair_integrity", 2, "openai.result_has_call")]
    if name == "otel-google-genai":  # it records ids it made up (ls_0) for calls with none
        return [("tool_pair_integrity", 2, "gemini.response_has_call")]
    if name in FRAMEWORKS:
        return [FRAMEWORKS[name][1]]
    return expected_findings(name)


def test_every_recorder_has_its_recording_committed():
    from tests.record_all import recordings

    assert sorted(p.stem for p in RECORDINGS.glob("*.jsonl")) == sorted(recordings())


@pytest.mark.parametrize("name", sorted(p.stem for p in RECORDINGS.glob("*.jsonl")))
def test_a_committed_recording_is_audited_exactly(name: str):
    """Each instrumentation's recording as it was made (some by libraries the tests'
    environment cannot hold beside the others): three model calls in one conversation, the
    planted break at request 2 under the API the request went to, nothing else."""
    read = read_paths([str(RECORDINGS / f"{name}.jsonl")])
    assert read.problems == []
    auditor = Auditor()
    found = [f for request in read.requests for f in auditor.add(request)[1]]
    assert [(c.requests, c.keyed_by != "alone") for c in auditor.conversations.values()] == [
        (3, True)
    ]
    assert [(f.property, f.request, f.rule) for f in found] == committed_findings(name)


def test_the_committed_recordings_received_live_count_each_break_once(tmp_path: Path):
    """Every committed recording sent to one ``ctxkit watch`` over OTLP/HTTP (JSON, as the
    file holds it; logs to /v1/logs): each conversation's findings are the file's, and the
    violations counted on /metrics are the planted breaks, each once."""
    names = sorted(p.stem for p in RECORDINGS.glob("*.jsonl"))
    with watching(tmp_path, "--settle", "1") as receiver:
        for name in names:
            for line in (RECORDINGS / f"{name}.jsonl").read_text().splitlines():
                signal = "logs" if '"resourceLogs"' in line[:40] else "traces"
                code, _, _ = post(f"{receiver.url}/v1/{signal}", line.encode(), "application/json")
                assert code == 200, (name, code)
        _wait_until_audited(receiver, 3 * len(names))
        expected = sorted(f for name in names for f in committed_findings(name))
        with urllib.request.urlopen(receiver.metrics_url, timeout=10) as response:
            text = response.read().decode()
        counted = re.findall(r"^ctxkit_audit_violations_total\{[^}]*\} (\S+)$", text, re.M)
        assert sum(float(v) for v in counted) == len(expected)
        live = receiver.stop()
    assert sorted(findings_of(live)) == expected
    assert live["requests"] == 3 * len(names)
