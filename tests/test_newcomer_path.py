"""The path a newcomer takes (issue 23): a fresh virtualenv, the README's first command, then
their own manager checked from their project's folder and the written reproducers run by a
plain ``pytest DIR``, which collects them and fails.

The virtualenv sees the machine's packages (tests take nothing from the network) but gets
ctxkit by ``pip install`` of this checkout, so what runs is the installed package, not the
worktree. The project folder holds a package named ``conformance`` of its own, as projects
do: the suite lives in ``ctxkit.conformance``, so it is not shadowed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

from tests.processes import ROOT

KEEP_LAST = '''\
import copy


class KeepLast:
    """Keeps the last four messages, whatever they are: a call can lose its result."""

    def __init__(self, max_tokens=8000, hooks=None):
        self.history = []

    async def add_message(self, message):
        self.history.append(copy.deepcopy(message))

    async def get_messages(self):
        return copy.deepcopy(self.history)

    async def set_messages(self, messages):
        self.history = copy.deepcopy(list(messages))

    async def clear(self):
        self.history = []

    async def get_messages_for_request(self, token_budget=None, provider=None):
        return copy.deepcopy(self.history[-4:])
'''


def _clean_copy(dest: Path) -> Path:
    """The checkout's files as a fresh clone has them, with the working tree's edits: pip
    builds in the source folder (``build/``), which another test may be building in."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_symlink() or source.is_file():  # links as links (the packaged spec/)
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name, follow_symlinks=False)
    return dest


def _run(command: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    # Nothing of the worktree on the path: the newcomer has only what pip installed.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CTXKIT_TARGET")}
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_the_readme_quick_start_then_a_broken_manager_and_its_reproducers(tmp_path: Path):
    # One test: the steps follow each other, as the newcomer takes them. It takes about 40 s:
    # the quick start is the default profile's whole run, as the README promises.
    home = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(home)
    python = str(home / "bin" / "python")
    install = _run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
         "--no-build-isolation", "--quiet", str(_clean_copy(tmp_path / "clone"))],
        cwd=tmp_path,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    project = tmp_path / "project"
    (project / "conformance").mkdir(parents=True)
    (project / "conformance" / "__init__.py").write_text("raise ImportError('the user package')\n")
    (project / "conformance" / "worker.py").write_text("raise SystemExit('the user worker')\n")
    where = _run(
        [python, "-c", "import ctxkit.conformance.worker as w; print(w.__file__)"], cwd=project
    )
    assert str(home) in where.stdout, "the venv's own ctxkit, not the checkout nor the user's"

    first = _run([str(home / "bin" / "ctxkit"), "conformance"], cwd=project)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "PASS" in first.stdout
    assert not (project / ".hypothesis").exists(), "nothing left in the user's folder"

    (project / "mine.py").write_text(KEEP_LAST)
    checked = _run(
        [str(home / "bin" / "ctxkit"), "conformance", "mine:KeepLast", "--profile", "quick",
         "--reproducers", "repro"],
        cwd=project,
    )  # fmt: skip
    assert checked.returncode == 1, checked.stdout + checked.stderr
    written = sorted(p.name for p in (project / "repro").glob("test_*.py"))
    assert "test_tool_pair_integrity_mine_KeepLast.py" in written, written
    pasted = _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "repro"], cwd=project)
    assert pasted.returncode == 1, pasted.stdout + pasted.stderr
    assert f"{len(written)} failed" in pasted.stdout, pasted.stdout
