"""Reproducers are paste-ready tests (issue 23, item 3): written as ``test_<property>_<target>.py``
so a plain ``pytest DIR`` collects them, the manager built by import as a user's own test builds
it, no step the failure does not need, and the largest budget that still fails.

One ``ctxkit conformance --reproducers DIR`` run, as a newcomer makes it from their project's
folder; everything else runs what it wrote from another folder.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxkit.conformance.reports.reproducer import placed
from tests.processes import ROOT, ctxkit

TARGET = "tests.zoo.pairs:SplitsPairsOpenAI"
NAME = "test_tool_pair_integrity_tests_zoo_pairs_SplitsPairsOpenAI.py"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The folder of reproducers and the JSON report of one run over a pair-splitting member."""
    folder = tmp_path_factory.mktemp("repro")
    report = folder.parent / "report.json"
    done = ctxkit(
        "conformance", TARGET, "--profile", "quick", "--seed", "3", "--shapes", "openai",
        "--reproducers", str(folder), "--report-json", str(report), timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    return {"folder": folder, "report": json.loads(report.read_text()), "stderr": done.stderr}


def elsewhere(tmp_path: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """``command`` from a folder of its own, with the checkout on PYTHONPATH (what the
    script's comment asks for)."""
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=120,
        check=False,
    )


def run_script(tmp_path: Path, source: str, name: str = "variant.py") -> str:
    """Run ``source`` with python from another folder; its output, and whether the property
    still fails (its sentence is in the output)."""
    path = tmp_path / name
    path.write_text(source)
    done = elsewhere(tmp_path, sys.executable, str(path))
    return done.stdout + done.stderr


def still_fails(output: str) -> bool:
    return "AssertionError: tool_pair_integrity: view[" in output


def test_pytest_collects_the_written_reproducers_and_they_fail(written, tmp_path):
    assert sorted(p.name for p in written["folder"].iterdir()) == [NAME]
    assert f"ctxkit: wrote {written['folder'] / NAME}" in written["stderr"]
    done = elsewhere(tmp_path, sys.executable, "-m", "pytest", str(written["folder"]),
                     "-p", "no:cacheprovider", "-p", "no:randomly")  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout
    assert "no tests ran" not in done.stdout
    assert "tool_pair_integrity: view[" in done.stdout


def test_the_manager_is_imported_and_built_as_a_test_of_ones_own_builds_it(written):
    script = (written["folder"] / NAME).read_text()
    assert "from tests.zoo.pairs import SplitsPairsOpenAI  # noqa: E402\n" in script
    assert "manager = SplitsPairsOpenAI(**CONFIG, hooks=hooks)\n" in script
    assert "open_manager" not in script
    assert "TARGET" not in script
    # tests.zoo imports from the checkout only (the run's folder): the script puts it first,
    # found from its own file, where --reproducers wrote it
    assert "sys.path.insert(0, PROJECT)  # tests.zoo.pairs imports from there\n" in script
    up = os.path.relpath(ROOT, written["folder"].resolve())
    assert f'PROJECT = os.path.normpath(os.path.join(HERE, "{up}"))\n' in script
    ast.parse(script)
    (pairs,) = [p for p in written["report"]["properties"] if p["status"] == "failed"]
    assert pairs["verified"], pairs["verification"]
    # the report's text of it knows no file: it takes the run's folder from the environment
    assert 'PROJECT = os.environ.get("CTXKIT_PROJECT_ROOT") or os.getcwd()\n' in pairs["reproducer"]
    assert placed(pairs["reproducer"], written["folder"], str(ROOT)) == script


def _units(script: str) -> tuple[ast.Module, ast.AsyncFunctionDef, list[list[int]]]:
    """The script's tree, its ``reproduce()``, and its calls as the units a history is made
    of: a view, a message, or a tool round (the calling message and its results together,
    since a history never holds one without the other). Indices into ``reproduce()``'s body;
    the lines that build the manager and the failed check are not calls."""
    tree = ast.parse(script)
    (reproduce,) = [n for n in tree.body if isinstance(n, ast.AsyncFunctionDef)]
    units: list[list[int]] = []
    for index, node in enumerate(reproduce.body):
        source = ast.unparse(node)
        if "manager." not in source or "manager =" in source:
            continue
        added = _added(node)
        if added is not None and added.get("role") == "tool" and units:
            units[-1].append(index)  # a result goes with the message that called it
        else:
            units.append([index])
    return tree, reproduce, units


def _added(node: ast.stmt) -> dict[str, Any] | None:
    """The message an ``await manager.add_message({...})`` line adds, else None."""
    call = getattr(getattr(node, "value", None), "value", None)
    if isinstance(call, ast.Call) and ast.unparse(call.func) == "manager.add_message":
        return ast.literal_eval(call.args[0])
    return None


def test_no_written_step_can_go(written, tmp_path):
    """Remove any one call (a tool round as a whole) and the failure is gone: the minimizer
    left none the failure does not need."""
    script = (written["folder"] / NAME).read_text()
    assert still_fails(run_script(tmp_path, script))
    tree, reproduce, units = _units(script)
    assert len(units) >= 2, script
    body = list(reproduce.body)
    for unit in units:
        reproduce.body = [node for index, node in enumerate(body) if index not in unit]
        output = run_script(tmp_path, ast.unparse(tree))
        gone = "\n".join(ast.unparse(body[index]) for index in unit)
        assert not still_fails(output), f"these calls could go:\n{gone}"
    reproduce.body = body


BUDGETS = re.compile(
    r"token_budget=(?P<budget>\d+)\)"
    r'|Provider\(\{"context_window": (?P<window>\d+), "max_output_tokens": (?P<output>\d+)\}\)'
)
"""A request's budget as a reproducer states it: ``token_budget=N``, or a provider's context
window less its output tokens."""


def test_the_budget_is_the_largest_that_still_fails(written, tmp_path):
    script = (written["folder"] / NAME).read_text()
    found = list(BUDGETS.finditer(script))
    assert found, script
    last = found[-1]
    if last["budget"] is not None:
        budget = int(last["budget"])
        more = f"token_budget={budget + 1})"
    else:
        budget = int(last["window"]) - int(last["output"])
        more = last[0].replace(
            f'"context_window": {last["window"]}', f'"context_window": {int(last["window"]) + 1}'
        )
    assert budget > 100, "a realistic budget, not the corner a search happened on"
    assert still_fails(run_script(tmp_path, script))
    bigger = script[: last.start()] + more + script[last.end() :]
    assert not still_fails(run_script(tmp_path, bigger))
