"""The autogen-core adapters, checked from an environment of their own (autogen-core pins
protobuf 5, which amplifier-core's gRPC code cannot load): messages cross to AutoGen's types
and back unchanged; each option reaches the real context exactly as written (None included)
or is refused naming the known ones; the token-limited context's split pair is found through
that environment's worker, with a verified reproducer and an upstream report in AutoGen's own
types that fails there; `ctxkit survey --python` finds the adapters installed there. The
environment is .venvs/autogen (made by .ci/run), or CTXKIT_AUTOGEN_PYTHON."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings

from ctxkit.conformance.search.conversations import conversations
from ctxkit.survey.matrix import row_from_report
from ctxkit.survey.subjects import report_text, subjects_in
from tests.adapter_runs import checked
from tests.processes import json_lines
from tests.system import environment_python

ROOT = Path(__file__).resolve().parent.parent


def _python() -> str:
    return environment_python("autogen", "AutoGen", "CTXKIT_AUTOGEN_PYTHON")


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


_BUILT = """
import asyncio, json, sys
import autogen_core.model_context as contexts
from ctxkit.adapters import autogen

built = []
for name in ("BufferedChatCompletionContext", "HeadAndTailChatCompletionContext"):
    def spy(*args, _real=getattr(contexts, name), **kwargs):
        built.append(_real(*args, **kwargs))
        return built[-1]
    setattr(contexts, name, spy)

answers = []
for adapter, options in json.load(sys.stdin):
    try:
        manager = getattr(autogen, adapter)(**options)
        asyncio.run(manager.add_message({"role": "user", "content": "hi"}))
        asyncio.run(manager.get_messages_for_request(token_budget=1000))
    except Exception as exc:
        answers.append({"error": f"{type(exc).__name__}: {exc}"})
        continue
    kept = {k[1:]: v for k, v in vars(built[-1]).items() if k.endswith("_size")}
    answers.append({"sizes": kept, "types": {k: type(v).__name__ for k, v in kept.items()}})
print(json.dumps(answers))
"""

OPTION_CASES = [
    ("Buffered", {"buffer_size": 8}, {"sizes": {"buffer_size": 8}}),
    ("Buffered", {}, {"sizes": {"buffer_size": 20}}),
    (
        "Buffered",
        {"buffer_size": None},
        "TypeError: '<=' not supported between instances of 'NoneType'",
    ),
    ("HeadAndTail", {"head_size": 1}, {"sizes": {"head_size": 1, "tail_size": 17}}),
    ("HeadAndTail", {"tail_size": 5}, {"sizes": {"head_size": 3, "tail_size": 5}}),
    (
        "HeadAndTail",
        {"head_size": None},
        "TypeError: '<=' not supported between instances of 'NoneType'",
    ),
    (
        "HeadAndTail",
        {"tail_size": None},
        "TypeError: '<=' not supported between instances of 'NoneType'",
    ),
    (
        "Buffered",
        {"head_size": 3},
        "TypeError: autogen:buffered (BufferedChatCompletionContext) has no option 'head_size'; "
        "its options are buffer_size",
    ),
    (
        "HeadAndTail",
        {"buffer_size": 3},
        "TypeError: autogen:head_and_tail (HeadAndTailChatCompletionContext) has no option "
        "'buffer_size'; its options are head_size, tail_size",
    ),
    (
        "TokenLimited",
        {"token_limit": 5},
        "TypeError: autogen:token_limited (TokenLimitedChatCompletionContext): 'token_limit' "
        "cannot be set: it is each request's budget",
    ),
    (
        "TokenLimited",
        {"tool_schema": []},
        "TypeError: autogen:token_limited (TokenLimitedChatCompletionContext) has no option "
        "'tool_schema'; it has no options",
    ),
]


@pytest.fixture(scope="module")
def built(python) -> list[dict]:
    """What each of OPTION_CASES built in the AutoGen environment: the sizes the real context
    holds, or the error that refused the options."""
    done = subprocess.run(
        [python, "-c", _BUILT],
        input=json.dumps([[adapter, options] for adapter, options, _ in OPTION_CASES]),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    "case", range(len(OPTION_CASES)), ids=[f"{a}-{o}" for a, o, _ in OPTION_CASES]
)
def test_each_option_reaches_the_autogen_context_exactly_as_written_or_is_refused(built, case):
    want = OPTION_CASES[case][2]
    got = built[case]
    if isinstance(want, str):  # refused, by the library (None reached it) or by the adapter
        assert got.get("error", "").startswith(want), got
    else:
        assert got["sizes"] == want["sizes"], got
        assert set(got["types"].values()) == {"int"}
