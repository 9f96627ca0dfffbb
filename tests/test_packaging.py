"""The built wheel: what it ships, and that a user's own ``conformance`` package cannot shadow the
suite (the suite lives in ``ctxkit.conformance``; nothing installs under a generic name)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PIP = (sys.executable, "-m", "pip")
SHORT_RUN = ("--max-examples", "5", "--seed", "1")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built offline with the installed setuptools."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [*PIP, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("ctxkit-*.whl")
    return built


def test_the_wheel_ships_the_catalogue_and_no_generic_top_level_name(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.startswith("ctxkit-")}
    assert tops == {"ctxkit"}
    assert "ctxkit/conformance/spec/properties.json" in names
    assert "ctxkit/conformance/spec/comes_from.json" in names
    for shipped in ("PROTOCOL.md", "protocol.schema.json", "harnesses/node/harness.mjs"):
        assert f"ctxkit/conformance/spec/{shipped}" in names
    assert "ctxkit/conformance/worker.py" in names
    for shape in ("openai", "anthropic", "responses", "gemini", "bedrock", "genai"):
        assert f"ctxkit/shapes/spec/{shape}.json" in names
    assert "ctxkit/tui/inspector.tcss" in names
    assert "ctxkit/survey/templates/matrix.html.j2" in names  # the survey's page


def test_a_users_own_conformance_package_does_not_shadow_the_suite(wheel: Path, tmp_path: Path):
    site = tmp_path / "site"
    subprocess.run(
        [*PIP, "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    project = tmp_path / "project"
    (project / "conformance").mkdir(parents=True)
    (project / "conformance" / "__init__.py").write_text("raise ImportError('the user package')\n")
    (project / "conformance" / "worker.py").write_text("raise SystemExit('the user worker')\n")
    (project / "mine.py").write_text("from ctxkit.reference import mount\n")
    env = dict(os.environ, PYTHONPATH=str(site))
    done = subprocess.run(
        [sys.executable, "-m", "ctxkit", "conformance", "mine", "--profile", "quick", *SHORT_RUN],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout
    worker = subprocess.run(
        [sys.executable, "-c", "import ctxkit.conformance.worker as w; print(w.__file__)"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(site) in worker
