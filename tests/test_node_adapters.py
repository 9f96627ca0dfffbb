"""JavaScript adapters through the Node harness (@langchain/core's trimMessages, the AI SDK's
pruneMessages): messages cross to each library and back faithfully in both shapes; the
adapter's own part passes; LangChain.js's split pair is found with a verified reproducer; a
missing library says what to run. The libraries come from tests/js (installed by `npm ci` in
.ci/run; no network at test time)."""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings

from ctxkit.adapters import JS_ADAPTERS
from ctxkit.adapters.langchain_js import bug_report_first, bug_report_last
from ctxkit.conformance.judge.comes_from import equivalent
from ctxkit.conformance.replay import open_manager
from ctxkit.conformance.reports.results import Report
from ctxkit.conformance.runner import RunOptions, run
from ctxkit.conformance.search.conversations import conversations
from ctxkit.survey.matrix import row_from_report
from tests.adapter_runs import assert_judged
from tests.processes import ctxkit, json_lines
from tests.system import missing, require_binary

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "js"
SHORT = {"profile": "quick", "seed": 1, "max_examples": 8, "shrink_seconds": 3.0}
ADAPTER_PART = {"non_destructive", "isolation", "robustness", "concurrency"}


@pytest.fixture(scope="module", autouse=True)
def installed() -> None:
    require_binary("node")
    if not all((FIXTURES / "node_modules" / p).is_dir() for p in ("@langchain/core", "ai")):
        missing("tests/js has no node_modules: run `npm ci --prefix tests/js`")


@pytest.fixture(scope="module", params=["langchain", "ai"])
def roundtrip(request):
    with json_lines(["node", "roundtrip.mjs", request.param], cwd=FIXTURES) as ask:
        yield ask


@settings(max_examples=40, deadline=None)
@given(conversations(shapes=("openai",)) | conversations(shapes=("anthropic",)) | conversations())
def test_a_history_crosses_to_the_library_and_back_unchanged(roundtrip, history):
    back = roundtrip(history)
    assert len(back) == len(history)
    for got, want in zip(back, history, strict=True):
        assert equivalent(got, want), (got, want)


_REPORTS: dict[str, Report] = {}


def checked(monkeypatch: pytest.MonkeyPatch, target: str) -> Report:
    """One short run per adapter, from tests/js (where the library is), shared by the tests."""
    if target not in _REPORTS:
        monkeypatch.chdir(FIXTURES)
        monkeypatch.setenv("PYTHONPATH", str(ROOT))  # reproducers import this ctxkit
        _REPORTS[target] = run(RunOptions(target=target, **SHORT))
    return _REPORTS[target]


@pytest.mark.parametrize("adapter", [a.name for a in JS_ADAPTERS])
def test_the_adapters_own_part_passes_and_every_failure_is_verified_and_classified(
    monkeypatch, adapter
):
    findings = next(a for a in JS_ADAPTERS if a.name == adapter).findings
    assert_judged(checked(monkeypatch, adapter), ADAPTER_PART, findings)


def test_pruning_tool_calls_keeps_each_call_with_its_results_and_the_text_around_them(
    monkeypatch,
):
    history = [
        {"role": "user", "content": "look"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "assistant", "content": "Found a.py."},
        {"role": "user", "content": "and?"},
        {"role": "assistant", "content": "Done."},
    ]
    monkeypatch.chdir(FIXTURES)

    async def scenario() -> list[dict]:
        manager, _events = await open_manager("js:ai:pruneMessages")
        try:
            await manager.set_messages(history)
            return await manager.get_messages_for_request(token_budget=10)
        finally:
            manager.close()

    view = asyncio.run(scenario())
    # the call and its result go together; the assistant's text stays, without tool_calls
    assert view == [history[0], {"role": "assistant", "content": "Checking."}, *history[3:]]


def test_keeping_the_oldest_messages_splits_a_tool_pair_in_langchain_js_too(monkeypatch):
    report = checked(monkeypatch, "js:@langchain/core:trimMessages:first")
    (pairs,) = [p for p in report.properties if p.id == "tool_pair_integrity"]
    assert pairs.status == "failed"
    assert re.search(r"no (tool_)?result for it follows at once", pairs.message)  # either shape
    assert pairs.verified


def test_a_missing_library_says_what_to_install(tmp_path):
    done = ctxkit("conformance", "js:@langchain/core:trimMessages", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "run `npm install @langchain/core` in this directory" in done.stderr


def _run_report(text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The report's script, run by Node where tests/js has @langchain/core."""
    script = text.split("```js\n", 1)[1].split("```", 1)[0]
    assert "ctxkit" not in script  # @langchain/core's own types and function only
    path = FIXTURES / f"reproduce-{tmp_path.name}.mjs"
    path.write_text(script)
    try:
        return subprocess.run(["node", path.name], capture_output=True, text=True, cwd=FIXTURES)
    finally:
        path.unlink()


def test_the_upstream_report_of_the_split_pair_fails_in_langchain_js(monkeypatch, tmp_path):
    report = checked(monkeypatch, "js:@langchain/core:trimMessages:first")
    row = row_from_report("js:@langchain/core:trimMessages:first", report.to_json())
    text = bug_report_first("tool_pair_integrity", row.cells["tool_pair_integrity"])
    done = _run_report(text, tmp_path)
    assert done.returncode == 1, done.stdout
    assert "tool ids without their other half" in done.stderr


def test_the_upstream_report_of_undefined_fails_in_langchain_js(tmp_path):
    trace = [
        {"op": "add", "value": {"role": "system", "content": "You are terse."}},
        {"op": "request", "value": {"token_budget": 5}},
    ]
    text = bug_report_last("lifecycle", SimpleNamespace(trace=trace))
    done = _run_report(text, tmp_path)
    assert done.returncode == 1, done.stdout
    assert "the view holds undefined" in done.stderr
