"""The autogen-core adapters, checked from an environment of their own (autogen-core pins
protobuf 5, which amplifier-core's gRPC code cannot load): messages cross to AutoGen's types
and back unchanged; the token-limited context's split pair is found through that environment's
worker, with a verified reproducer and an upstream report in AutoGen's own types that fails
there; `ctxkit survey --python` finds the adapters installed there. The environment is
.venvs/autogen (made by .ci/run), or CTXKIT_AUTOGEN_PYTHON."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings

from ctxkit.conformance.strategies import conversations
from ctxkit.survey.matrix import row_from_report
from ctxkit.survey.subjects import report_text, subjects_in
from tests.adapter_runs import checked
from tests.processes import json_lines
from tests.system import missing

ROOT = Path(__file__).resolve().parent.parent


def _python() -> str:
    path = os.environ.get("CTXKIT_AUTOGEN_PYTHON") or str(ROOT / ".venvs/autogen/bin/python")
    if not Path(path).exists():
        reason = f"no AutoGen environment at {path}: python3 -m venv .venvs/autogen && "
        missing(reason + ".venvs/autogen/bin/pip install -e '.[autogen]'")
    return path


@pytest.fixture(scope="module")
def python() -> str:
    return _python()


@pytest.fixture(scope="module")
def roundtrip(python):
    with json_lines([python, str(ROOT / "tests" / "autogen_roundtrip.py")]) as ask:
        yield ask


@settings(max_examples=40, deadline=None)
@given(conversations(shapes=("openai",)) | conversations(shapes=("anthropic",)) | conversations())
def test_a_history_crosses_to_autogen_and_back_unchanged(roundtrip, history):
    assert roundtrip(history) == history


def test_the_survey_finds_the_adapters_installed_in_the_other_environment(python):
    found = {s.target: s for s in subjects_in(python, skip={"autogen:buffered"})}
    assert set(found) >= {"autogen:head_and_tail", "autogen:token_limited"}
    assert "autogen:buffered" not in found  # already surveyed: not twice
    subject = found["autogen:token_limited"]
    assert subject.python == python
    assert subject.version.startswith("0.")
    assert subject.findings["tool_pair_integrity"].kind == "bug"


def test_removing_from_the_middle_splits_a_pair_and_the_upstream_report_fails_in_autogen(
    python, tmp_path
):
    report = checked("autogen:token_limited", f"{python} -m ctxkit.conformance.worker")
    (pairs,) = [p for p in report.properties if p.id == "tool_pair_integrity"]
    assert pairs.status == "failed"
    assert pairs.verified, pairs.verification
    row = row_from_report("autogen:token_limited", report.to_json())
    subject = subjects_in(python, skip=set())
    (token_limited,) = [s for s in subject if s.target == "autogen:token_limited"]
    text = report_text(
        token_limited,
        "ctxkit.adapters.autogen:bug_report",
        "tool_pair_integrity",
        row.cells["tool_pair_integrity"],
    )
    script = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert "ctxkit" not in script  # autogen-core's own types only
    (tmp_path / "upstream.py").write_text(script)
    done = subprocess.run([python, "upstream.py"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1
    assert "AssertionError: call ids without their other half in the view" in done.stderr
