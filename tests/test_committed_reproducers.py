"""Reproducers can be committed with the project (issue 45, item 5): a user runs ``ctxkit
conformance mypkg.mod:Thing --reproducers tests/repro`` from their project's folder and commits
``tests/repro``; a colleague's clone is at another absolute path, and ``pytest tests/repro``
from its root, ``pytest .`` from inside ``tests/repro`` and ``python tests/repro/FILE`` from
anywhere all find the target and fail the way the run did. The same for a JavaScript target
named by its file (``./manager.mjs:Export``), which the script finds from any folder too.

One project with a Python and a JavaScript manager, checked once by each route; the project
is then moved to another absolute path (nothing is left where the run was), and every test
runs what the move took along.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.processes import PLUGIN_PYTEST, ROOT, ctxkit
from tests.test_newcomer_path import KEEP_LAST  # the newcomer's own manager

PYTHON_TARGET = "mypkg.mod:KeepLast"
JS_TARGET = "./manager.mjs:SplitsPairsOpenAI"
"""The JavaScript twin of tests.zoo.pairs:SplitsPairsOpenAI, copied into the project."""
QUICK = ("--profile", "quick", "--max-examples", "8", "--seed", "5", "--shapes", "openai")
WRITTEN = Path("tests") / "repro"
PAIRS = {
    "python": "test_tool_pair_integrity_mypkg_mod_KeepLast.py",
    "js": "test_tool_pair_integrity_manager_mjs_SplitsPairsOpenAI.py",
}

# pytest as a console script runs it: the folder it is started in is not on sys.path (-P)
PYTEST = (sys.executable, "-P", *PLUGIN_PYTEST[1:], "-p", "no:randomly")


@dataclass(frozen=True)
class Moved:
    made_in: str
    """The absolute path the project was checked in, gone since."""
    root: Path
    """Where the project is now."""
    failed: dict[str, dict[str, str]]
    """By route, each failed property's exception line, as the run's verification saw it."""
    reports: dict[str, dict[str, Any]]
    """By route, the JSON report."""


def _exception(verification: str) -> str:
    """``AssertionError: ...`` out of ``verified: the script fails (AssertionError: ...)``."""
    found = re.fullmatch(r"verified: the script fails \((.*)\)", verification, re.DOTALL)
    assert found, verification
    return found[1]


@pytest.fixture(scope="module")
def moved(tmp_path_factory: pytest.TempPathFactory) -> Moved:
    made = tmp_path_factory.mktemp("made") / "project"
    (made / "mypkg").mkdir(parents=True)
    (made / "mypkg" / "__init__.py").write_text("")
    (made / "mypkg" / "mod.py").write_text(KEEP_LAST)
    shutil.copy(ROOT / "tests" / "zoo_js" / "managers.mjs", made / "manager.mjs")
    routes = {"python": PYTHON_TARGET}
    if shutil.which("node"):
        routes["js"] = JS_TARGET
    reports = {route: made.parent / f"report-{route}.json" for route in routes}

    def check(route: str) -> subprocess.CompletedProcess[str]:
        return ctxkit(
            "conformance", routes[route], *QUICK, "--reproducers", str(WRITTEN),
            "--report-json", str(reports[route]), cwd=made, timeout=300,
        )  # fmt: skip

    with ThreadPoolExecutor(len(routes)) as pool:
        done = dict(zip(routes, pool.map(check, routes), strict=True))
    read: dict[str, dict[str, Any]] = {}
    failed: dict[str, dict[str, str]] = {}
    for route, run in done.items():
        assert run.returncode == 1, run.stdout + run.stderr
        read[route] = json.loads(reports[route].read_text())
        failed[route] = {
            p["id"]: _exception(p["verification"])
            for p in read[route]["properties"]
            if p["status"] == "failed"
        }
        assert "tool_pair_integrity" in failed[route], failed[route]
    root = tmp_path_factory.mktemp("clone") / "checkout"
    shutil.move(made, root)  # another absolute path, and nothing left at the first
    return Moved(str(made), root, failed, read)


def _run(command: list[str] | tuple[str, ...], cwd: Path, **variables: str) -> str:
    """``command`` from ``cwd`` with ctxkit importable (what a user's environment has) and
    nothing of the project on the path; its exit status must say it failed. Its output."""
    env = {k: v for k, v in os.environ.items() if k != "CTXKIT_PROJECT_ROOT"}
    done = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=180, check=False,
        env=env | {"PYTHONPATH": str(ROOT)} | variables,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    return output


def _scripts(moved: Moved) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((moved.root / WRITTEN).glob("test_*.py"))}


def _failing_the_same_way(moved: Moved, output: str, routes: list[str] | None = None) -> None:
    assert "ModuleNotFoundError" not in output, output
    assert "no such file" not in output, output
    for route in routes or list(moved.failed):
        for property_id, line in moved.failed[route].items():
            assert line in output, f"{route} {property_id}: {line}\n{output}"


def test_the_written_scripts_name_no_absolute_path_of_the_project(moved):
    scripts = _scripts(moved)
    assert {PAIRS[route] for route in moved.failed} <= set(scripts), sorted(scripts)
    for name, script in scripts.items():
        assert moved.made_in not in script, name
        assert str(ROOT) not in script, name
    for report in moved.reports.values():  # nor does the report's text of the same scripts
        for result in report["properties"]:
            assert moved.made_in not in (result["reproducer"] or "")


def test_pytest_dir_from_the_project_root_of_another_checkout(moved):
    output = _run([*PYTEST, str(WRITTEN)], cwd=moved.root)
    written = sum(len(failed) for failed in moved.failed.values())
    assert f"{written} failed" in output, output
    _failing_the_same_way(moved, output)


def test_pytest_from_inside_the_reproducers_folder(moved):
    output = _run([*PYTEST, "."], cwd=moved.root / WRITTEN)
    _failing_the_same_way(moved, output)


@pytest.mark.parametrize("route", ["python", "js"])
def test_python_file_from_an_unrelated_folder(moved, route, tmp_path):
    if route not in moved.failed:
        pytest.skip("node is not on PATH")
    output = _run([sys.executable, str(moved.root / WRITTEN / PAIRS[route])], cwd=tmp_path)
    assert "ModuleNotFoundError" not in output, output
    assert "no such file" not in output, output
    assert moved.failed[route]["tool_pair_integrity"] in output, output


@pytest.mark.parametrize("route", ["python", "js"])
def test_the_report_text_finds_the_project_from_the_variable_or_the_current_folder(
    moved, route, tmp_path
):
    """The JSON report's script has no file the run knows of: saved by hand anywhere, it takes
    the project from CTXKIT_PROJECT_ROOT, else from the folder it is run in."""
    if route not in moved.failed:
        pytest.skip("node is not on PATH")
    (result,) = [p for p in moved.reports[route]["properties"] if p["id"] == "tool_pair_integrity"]
    saved = moved.root / "saved" / f"test_saved_{route}.py"
    saved.parent.mkdir(exist_ok=True)
    saved.write_text(result["reproducer"])
    line = moved.failed[route]["tool_pair_integrity"]
    from_root = _run([sys.executable, str(saved.relative_to(moved.root))], cwd=moved.root)
    assert line in from_root, from_root
    named = _run([sys.executable, str(saved)], cwd=tmp_path, CTXKIT_PROJECT_ROOT=str(moved.root))
    assert line in named, named
    lost = _run([sys.executable, str(saved)], cwd=tmp_path)  # neither: it cannot know
    assert line not in lost
    assert "ModuleNotFoundError: No module named 'mypkg'" in lost or "no such file" in lost, lost
