"""The path a newcomer takes (issues 23 and 30): the README's two commands, copied from the
README itself so that this fails when the README drifts, then their own manager checked from
their project's folder and the written reproducers run by a plain ``pytest DIR``, which
collects them and fails.

The quick start runs in a fresh virtualenv with the pip it ships, ``pip`` and ``ctxkit`` found
on ``PATH`` as a user's activated environment has them; it sees this environment's packages
(tests take nothing from the network for it) but gets ctxkit by ``pip install .`` of a clean
copy of the checkout, so what runs is the installed package, not the worktree. The test
command's virtualenv is made as the README makes it, and its pip resolves the dev extra from
the package index (``--dry-run``; under CI, which has just run the same command from nothing,
the report of that install): what no installed package can stand in for. The project folder
holds a package named ``conformance`` of its own, as projects do: the suite lives in
``ctxkit.conformance``, so it is not shadowed.
"""

from __future__ import annotations

import json
import os
import shlex
import site
import subprocess
import venv
from pathlib import Path

import pytest

from tests.processes import ROOT, clean_copy
from tests.readme import quick_start_commands
from tests.system import missing

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


def _environment(**variables: str) -> dict[str, str]:
    # Nothing of the worktree on the path: the newcomer has only what pip installed.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CTXKIT_TARGET")}
    return env | variables


def _run(
    command: list[str] | str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """A command list, or a line as a user pastes it into bash."""
    argv = ["bash", "-c", command] if isinstance(command, str) else command
    return subprocess.run(
        argv, cwd=cwd, env=env or _environment(), capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


def _virtualenv_over_this_one(home: Path) -> Path:
    """A fresh virtualenv with the pip it ships that also sees this environment's packages (a
    ``.pth`` naming its site-packages, after the virtualenv's own), so installing ctxkit there
    needs no network. The setuptools a Python 3.11 virtualenv ships (65) is too old to build
    ctxkit; pip's build isolation would fetch a newer one, which this environment's stands
    for here."""
    venv.EnvBuilder(with_pip=True).create(home)
    (own,) = home.glob("lib/python*/site-packages")
    (own / "this_environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    python = str(home / "bin" / "python")
    removed = _run([python, "-m", "pip", "uninstall", "--yes", "--quiet", "setuptools"], home)
    assert removed.returncode == 0, removed.stderr
    return home


@pytest.mark.long
def test_the_readme_quick_start_then_a_broken_manager_and_its_reproducers(tmp_path: Path):
    # One test: the steps follow each other, as the newcomer takes them. It takes about 40 s:
    # the quick start is the default profile's whole run, as the README promises. The user's
    # own manager is then checked from their project folder, whose `conformance` package would
    # break the run (the worker starts there) if it shadowed ctxkit's.
    quick_start, _ = quick_start_commands()
    home = _virtualenv_over_this_one(tmp_path / "venv")
    python = str(home / "bin" / "python")
    clone = clean_copy(tmp_path / "clone")
    activated = _environment(
        PATH=f"{home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        VIRTUAL_ENV=str(home),
        PIP_NO_INDEX="1",  # everything ctxkit needs is installed here already
        PIP_NO_BUILD_ISOLATION="0",  # pip's spelling of --no-build-isolation
    )
    first = _run(quick_start, cwd=clone, env=activated)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "PASS" in first.stdout, first.stdout
    assert "tool_pair_integrity" in first.stdout, "the README's verdict: one line per property"

    project = tmp_path / "project"
    (project / "conformance").mkdir(parents=True)
    (project / "conformance" / "__init__.py").write_text("raise ImportError('the user package')\n")
    (project / "conformance" / "worker.py").write_text("raise SystemExit('the user worker')\n")
    where = _run(
        [python, "-c", "import ctxkit.conformance.worker as w; print(w.__file__)"], cwd=project
    )
    assert str(home) in where.stdout, "the venv's own ctxkit, not the checkout nor the user's"

    (project / "mine.py").write_text(KEEP_LAST)
    checked = _run(
        [str(home / "bin" / "ctxkit"), "conformance", "mine:KeepLast", "--profile", "quick",
         "--reproducers", "repro"],
        cwd=project,
    )  # fmt: skip
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert not (project / ".hypothesis").exists(), "nothing left in the user's folder"
    written = sorted(p.name for p in (project / "repro").glob("test_*.py"))
    pairs = "test_tool_pair_integrity_mine_KeepLast.py"
    assert pairs in written, written
    # A plain `pytest DIR` (its console script: the folder is not on sys.path, as it is for
    # `python -m pytest`) and `python FILE` import mine.py all the same, and fail.
    pytest = _console_script(home, "pytest", "from pytest import console_main as main")
    plain = [pytest, "-q", "-p", "no:cacheprovider"]
    pasted = _run([*plain, "repro"], cwd=project)
    assert pasted.returncode == 1, pasted.stdout + pasted.stderr
    assert f"{len(written)} failed" in pasted.stdout, pasted.stdout
    assert "ModuleNotFoundError" not in pasted.stdout
    alone = _run([python, f"repro/{pairs}"], cwd=project)
    assert alone.returncode == 1, alone.stdout + alone.stderr
    assert "tool_pair_integrity: view[" in alone.stderr, alone.stderr
    # fixed, the same reproducer passes, from another folder too
    (project / "mine.py").write_text(KEEP_LAST.replace("self.history[-4:]", "self.history"))
    fixed = _run([*plain, str(project / "repro" / pairs)], cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


def _console_script(home: Path, name: str, entry: str) -> str:
    """A console script in the virtualenv as pip writes one (``bin/pytest``): run by path,
    its ``sys.path[0]`` is ``bin``, not the folder it is started in."""
    path = home / "bin" / name
    path.write_text(f"#!{home / 'bin' / 'python'}\nimport sys\n{entry}\nsys.exit(main())\n")
    path.chmod(0o755)
    return str(path)


INSTALL_REPORT = "CTXKIT_README_INSTALL_REPORT"
"""Names the report of the README's install command when CI ran it before the tests
(``.ci/run``, with the pip a new virtualenv ships, from nothing)."""

UNREACHABLE = (
    "NewConnectionError", "Temporary failure in name resolution", "Network is unreachable",
    "ConnectTimeoutError", "ProxyError", "No route to host",
)  # fmt: skip
"""What pip says when the package index cannot be reached (rather than a requirement that
cannot be met)."""


def test_the_readme_test_command_resolves_from_nothing_with_the_pip_a_virtualenv_ships(
    tmp_path: Path,
):
    # About 50 s of CPU, nearly all of it pip 23's resolver reading the index pages of the
    # dev extra's 240 packages: what the README promises a newcomer, so it is checked whole;
    # under CI, which has just run the same command from nothing, its report is read instead.
    _, test_command = quick_start_commands()
    steps = [step.strip() for step in test_command.split("&&")]
    assert len(steps) == 3, f"make a virtualenv, install into it, run the tests: {steps}"
    make, install, run_tests = (shlex.split(step) for step in steps)
    assert make[:3] == ["python3", "-m", "venv"], steps[0]
    home = make[3]
    assert install[:2] == [f"{home}/bin/pip", "install"], steps[1]
    assert run_tests == [f"{home}/bin/python", "-m", "pytest"], steps[2]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert f"{home}/bin/python -m pytest" in ci, "CI runs the README's test command"

    shared = os.environ.get(INSTALL_REPORT)
    if shared:  # CI has just run this very command from nothing: what its pip resolved
        ran = [shlex.split(line) for line in ci.splitlines() if f'"${INSTALL_REPORT}"' in line]
        flags = ["--quiet", "--progress-bar", "off", "--report", f"${INSTALL_REPORT}"]
        assert [[a for a in line if a not in flags] for line in ran] == [install], ran
        report = Path(shared)
    else:
        report = _resolve(install, steps[0], tmp_path)
    resolved = json.loads(report.read_text())
    ships = _run([make[0], "-c", "import ensurepip; print(ensurepip.version())"], ROOT)
    assert resolved["pip_version"] == ships.stdout.strip(), "the pip a new virtualenv ships"
    versions = {
        item["metadata"]["name"].lower(): item["metadata"]["version"]
        for item in resolved["install"]
    }
    assert "ctxkit-llm" in versions, sorted(versions)
    assert versions["pytest"].startswith("8."), "pytest-textual-snapshot needs pytest 8"
    assert "opentelemetry-util-genai" in versions, "a pre-release-only range, read by every pip"


def _resolve(install: list[str], make: str, tmp_path: Path) -> Path:
    """What the README's install command resolves in a virtualenv made as the README makes
    it, from a clean copy of the checkout (``--dry-run``: nothing is installed)."""
    checkout = clean_copy(tmp_path / "clone")
    made = _run(make, cwd=checkout)
    assert made.returncode == 0, made.stderr
    report = tmp_path / "resolved.json"
    resolved = _run(
        [*install, "--dry-run", "--quiet", "--progress-bar", "off", "--report", str(report)],
        cwd=checkout,
    )  # fmt: skip
    if resolved.returncode != 0 and any(sign in resolved.stderr for sign in UNREACHABLE):
        missing(f"the package index cannot be reached: {resolved.stderr.strip()[-300:]}")
    said = [line for line in resolved.stderr.splitlines() if not line.startswith("WARNING")]
    assert resolved.returncode == 0, "\n".join(said)[-3000:]
    return report
