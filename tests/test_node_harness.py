"""The Node harness (conformance/harnesses/node/harness.mjs): JavaScript twins of the zoo's
core members are judged exactly as their Python twins, property by property and for the same
reason, with verified reproducers; the harness's digest matches the protocol's vectors; bad
targets get clear errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ctxkit.conformance.reports.results import Report
from ctxkit.conformance.runner import RunOptions, run
from ctxkit.conformance.targets.routes import RouteError, route_for
from ctxkit.conformance.targets.worker_client import Child
from tests.processes import ctxkit
from tests.system import require_binary

ROOT = Path(__file__).resolve().parent.parent
JS = "tests/zoo_js/managers.mjs"
SHORT = {"profile": "quick", "seed": 7, "max_examples": 8, "shrink_seconds": 3.0}
TWINS = [
    ("GoodManager", "tests.zoo.base:GoodManager"),
    ("SplitsPairsOpenAI", "tests.zoo.pairs:SplitsPairsOpenAI"),
    ("DestructiveCompaction", "tests.zoo.history:DestructiveCompaction"),
    ("ReordersView", "tests.zoo.views:ReordersView"),
]


@pytest.fixture(autouse=True)
def node() -> str:
    return require_binary("node")


def judged(report: Report) -> dict[str, tuple[str, str]]:
    """Each property's status and what kind of fault its message names, positions and call ids
    left out: shrinking is bounded in time, so on a loaded machine the twins' counterexamples
    may stop at different sizes (``view[4] is history[0]`` against ``view[3] is history[0]``),
    or in another shape of the chat family (``call_1`` against ``toolu_1``)."""
    return {p.id: (p.status, _fault(p.message)) for p in report.properties}


def _fault(message: str) -> str:
    numbered = re.sub(r"\d+", "N", message.split(":")[0])
    said = re.sub(r"\b[a-z]+_N\b", "ID", numbered)
    # the same fault, said in the Anthropic shape of the chat family
    return said.replace("tool_result block", "tool result").replace(
        "no tool_use block", "no assistant message"
    )


def outcome(target: str) -> dict[str, tuple[str, str]]:
    return judged(run(RunOptions(target=target, **SHORT)))


@pytest.mark.parametrize(("export", "python"), TWINS, ids=[t[0] for t in TWINS])
def test_a_javascript_twin_is_judged_as_its_python_twin(export, python):
    report = run(RunOptions(target=f"{JS}:{export}", **SHORT))
    assert judged(report) == outcome(python)
    for result in report.properties:
        if result.status == "failed":
            assert "open_manager(TARGET, CONFIG)" in result.reproducer
            assert result.verified, result.verification


def test_the_harness_digest_matches_the_protocol_vectors():
    cases = json.loads((ROOT / "conformance" / "digest_cases.json").read_text())["cases"]
    command = route_for(f"{JS}:GoodManager").command
    for case in cases:
        with Child(command, timeout=10) as child:
            assert child.hello(f"{JS}:GoodManager", {}, case["ignore"]).ok
            assert child.call("reset").ok
            answer = child.call("set", messages=case["history"])
            assert answer.ok, answer.error
            assert answer.digest == case["digest"], case["name"]


def test_edit_after_edits_in_the_harness_and_returns_the_history_before():
    with Child(route_for(JS).command, timeout=10) as child:
        assert child.hello(JS).value["target"] == f"{JS}:default"  # the default export
        assert child.call("reset").ok
        message = {"role": "user", "content": "hi"}
        answer = child.call("add", message=message, edit_after=True)
        assert answer.before == [message]
        assert child.call("get").value == [message]  # the manager kept its own copy


@pytest.mark.parametrize(
    ("export", "status", "fragment"),
    [
        ("Exits", "error", "the target called process.exit(7) during add_message"),
        ("NoClear", "failed", "lacks clear"),
    ],
)
def test_a_target_that_exits_or_breaks_the_contract_gets_a_verdict(export, status, fragment):
    report = run(RunOptions(target=f"{JS}:{export}", **SHORT))
    found = [p for p in report.properties if p.status == status]
    assert found
    assert fragment in found[0].message


def test_printing_json_to_stdout_changes_nothing():
    report = run(RunOptions(target=f"{JS}:Noisy", **SHORT))
    assert report.verdict == "pass"


@pytest.mark.parametrize(
    ("target", "fragment"),
    [
        (f"{JS}:Nope", "has no export Nope; it exports: DestructiveCompaction"),
        (f"{JS}:notAClass", "notAClass is a number, not a class or a factory function"),
        ("tests/zoo_js/no_such_file.mjs", "no such file"),
    ],
)
def test_a_bad_javascript_target_exits_2_with_a_sentence(target, fragment):
    done = ctxkit("conformance", target)
    assert done.returncode == 2, done.stderr
    assert fragment in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_node_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr("ctxkit.conformance.targets.routes.shutil.which", lambda _name: None)
    with pytest.raises(RouteError, match=r"`node` is not on PATH\. Install Node\.js 18 or newer"):
        route_for("manager.mjs")
