"""Reproducers verified in processes forked from one that imported the target once: the same
verdicts as a fresh process each, the import paid once, and every doubt sent back to a fresh
process."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from ctxkit.conformance.reports.verify import Verifier

TARGET = """\
import os, pathlib
pathlib.Path(os.environ["IMPORTS_LOG"]).open("a").write(f"{os.getpid()}\\n")
{extra}
def view(history):
    return history[1:]
"""


def _script(body: str, module: str = "slow_target") -> str:
    lines = "".join(f"    {line}\n" for line in body.splitlines())
    return (
        f"import os, sys\nfrom {module} import view\n\n\ndef test_it():\n{lines}\n\n"
        'if __name__ == "__main__":\n    test_it()\n'
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a target module that notes each process that imports it."""
    log = tmp_path / "imports.log"
    monkeypatch.setenv("IMPORTS_LOG", str(log))
    (tmp_path / "slow_target.py").write_text(TARGET.replace("{extra}", ""))
    threaded = (
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()"
    )
    (tmp_path / "threaded_target.py").write_text(TARGET.replace("{extra}", threaded))
    return tmp_path


def _imports(project: Path) -> int:
    log = project / "imports.log"
    return len(log.read_text().split()) if log.exists() else 0


FAILS = 'assert view([1, 2]) == [1, 2], "tool_pair_integrity: view[0] lost its call"'


def test_scripts_that_fail_are_verified_and_the_target_is_imported_once(project: Path):
    verifier = Verifier(pythonpath=str(project))
    try:
        for number in range(3):
            verified, said = verifier.verify(
                _script(FAILS), property_id="tool_pair_integrity", check="holds",
                timeout=60, name=f"test_{number}.py",
            )  # fmt: skip
            assert verified, said
            assert said.startswith("verified: the script fails (AssertionError: tool_pair")
    finally:
        verifier.close()
    assert _imports(project) == 1  # the host's: each script ran in a fork of it


def test_a_script_that_passes_is_run_fresh_before_it_is_called_nondeterministic(project: Path):
    verifier = Verifier(pythonpath=str(project))
    try:
        verified, said = verifier.verify(
            _script("assert view([1, 2]) == [2]"), property_id="ordering", check="holds",
            timeout=60,
        )  # fmt: skip
    finally:
        verifier.close()
    assert not verified
    assert said.startswith("nondeterministic: the run saw it, but its script passed 3 fresh")
    assert _imports(project) == 1 + 3  # the host, then three fresh processes


def test_a_crash_ends_the_same_way_in_a_fork(project: Path):
    verifier = Verifier(pythonpath=str(project))
    try:
        verified, said = verifier.verify(
            _script("os._exit(3)"), property_id="lifecycle", check="crashes", timeout=60,
            status=3,
        )  # fmt: skip
        assert verified, said
        assert "ends the same way" in said
        verified, said = verifier.verify(
            _script("os._exit(4)"), property_id="lifecycle", check="crashes", timeout=60,
            status=3, name="test_other.py",
        )  # fmt: skip
        assert not verified  # judged again in a fresh process, which says the same
        assert said.endswith("the script with exit code 4 (no output)"), said
    finally:
        verifier.close()


def test_a_target_that_starts_a_thread_on_import_is_never_forked(project: Path):
    """A fork keeps only the thread that forks: a process with more is not forked from, and
    every script runs fresh, verified all the same."""
    verifier = Verifier(pythonpath=str(project))
    try:
        for number in range(2):
            verified, said = verifier.verify(
                _script(FAILS, "threaded_target"), property_id="tool_pair_integrity",
                check="holds", timeout=60, name=f"test_{number}.py",
            )  # fmt: skip
            assert verified, said
    finally:
        verifier.close()
    assert _imports(project) == 1 + 2


def test_a_host_that_died_sends_every_script_to_a_fresh_process(project: Path):
    verifier = Verifier(pythonpath=str(project))
    try:
        verified, said = verifier.verify(
            _script(FAILS), property_id="tool_pair_integrity", check="holds", timeout=60
        )
        assert verified, said
        host = verifier._host
        assert host is not None
        os.kill(host.pid, signal.SIGKILL)
        verified, said = verifier.verify(
            _script(FAILS), property_id="tool_pair_integrity", check="holds", timeout=60,
            name="test_after.py",
        )  # fmt: skip
        assert verified, said
    finally:
        verifier.close()
    assert host.returncode is not None
    assert _imports(project) == 1 + 1


def test_prepare_imports_the_target_before_any_script_is_verified(project: Path):
    verifier = Verifier(pythonpath=str(project))
    try:
        verifier.prepare(_script("pass"))
        for _ in range(200):  # the host imports beside the caller, which does not wait
            if _imports(project):
                break
            time.sleep(0.05)
        assert _imports(project) == 1
        verified, said = verifier.verify(
            _script(FAILS), property_id="tool_pair_integrity", check="holds", timeout=60
        )
        assert verified, said
    finally:
        verifier.close()
    assert _imports(project) == 1
