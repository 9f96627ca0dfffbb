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
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ctxkit.audit.apis import API_NAMES
from tests.record_instrumented import CONTENT_SETTINGS, EXPECTED, api_of
from tests.test_watch import Receiver, watching

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


@dataclass
class Recorded:
    files: dict[str, Path]
    live: dict
    """The receiver's report once every agent was recorded."""
    log: str


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    folder = tmp_path_factory.mktemp("instrumented")
    files = {name: folder / f"{name}.jsonl" for name in INSTRUMENTATIONS}
    with watching(folder, "--settle", "1") as receiver:
        agents = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "tests" / "record_instrumented.py"),
                    name,
                    "--file",
                    str(files[name]),
                    "--endpoint",
                    receiver.url,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in INSTRUMENTATIONS
        ]
        for name, agent in zip(INSTRUMENTATIONS, agents, strict=True):
            _, errors = agent.communicate(timeout=120)
            assert agent.returncode == 0, (name, errors)
        _wait_until_audited(receiver, 3 * len(INSTRUMENTATIONS))
        live = receiver.stop()
        yield Recorded(files, live, receiver.log.read_text())


def _wait_until_audited(receiver: Receiver, requests: int) -> None:
    deadline = time.monotonic() + 30
    while receiver.metric("ctxkit_audit_requests_total") < requests:
        assert time.monotonic() < deadline, "the receiver did not audit every request"
        time.sleep(0.2)


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_a_recorded_split_pair_is_found_at_its_request(
    recorded: Recorded, instrumentation: str, tmp_path: Path
):
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable, "-m", "ctxkit", "audit", str(recorded.files[instrumentation]),
            "--report-json", str(report_path),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
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
