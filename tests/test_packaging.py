"""The built wheel: what it ships (nothing under a generic top-level name; that a user's own
``conformance`` package cannot shadow the suite is shown on the newcomer's path,
tests/test_newcomer_path.py)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PIP = (sys.executable, "-m", "pip")


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
    (built,) = out.glob("ctxkit_llm-*.whl")
    return built


def test_the_wheel_ships_the_catalogue_and_no_generic_top_level_name(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.startswith("ctxkit_llm-")}
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
