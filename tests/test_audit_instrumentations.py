"""The audit on what real GenAI instrumentations record: OpenTelemetry's official openai-v2
(content on spans, and on log events), OpenLLMetry's openai and anthropic, OpenInference's
openai, each wrapping the real client library against a loopback fake provider. Each agent
sends three requests in one trace, the third with a tool result whose call is gone: the audit
must find exactly that, at request 2, and nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTRUMENTATIONS = [
    "openai-v2",
    "openai-v2-events",
    "openllmetry-openai",
    "openllmetry-anthropic",
    "openinference-openai",
]


def record(instrumentation: str, *where: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "record_instrumented.py"), instrumentation, *where],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def findings_of(report: dict) -> list[tuple[str, int, str]]:
    return [
        (f["property"], f["request"], f["rule"])
        for conversation in report["conversations"]
        for f in conversation["findings"]
    ]


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_a_recorded_split_pair_is_found_at_its_request(instrumentation: str, tmp_path: Path):
    recorded = tmp_path / "traces.jsonl"
    record(instrumentation, "--file", str(recorded))
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "ctxkit", "audit", str(recorded), "--report-json", str(report_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    (conversation,) = report["conversations"]
    assert conversation["requests"] == 3
    assert conversation["keyed_by"] == "trace"
    provider = "anthropic" if "anthropic" in instrumentation else "openai"
    assert findings_of(report) == [("tool_pair_integrity", 2, f"{provider}.result_has_call")]
    assert report["skipped"] == []  # the SDK's own spans are not requests without content
