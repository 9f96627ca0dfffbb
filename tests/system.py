"""System programs, libraries and privileges the tests need (promtool, prometheus, tmux,
chromium, node; an adapter's library; root to mount a filesystem): skipped on a developer's
machine that lacks them, a failure under CI, where a silent skip would hide an untested
feature."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

DEBIAN_PACKAGES = {
    "prometheus": "prometheus",
    "promtool": "prometheus",
    "tmux": "tmux",
    "chromium": "chromium",
    "chromedriver": "chromium-driver",
    "node": "nodejs",
    "perl": "perl",
}
"""The Debian package that installs each program, for the message."""


def require_binary(name: str) -> str:
    """The path of program ``name``; skip the test if it is missing, or fail when ``CI=true``."""
    path = shutil.which(name)
    if path is not None:
        return path
    package = DEBIAN_PACKAGES.get(name, name)
    missing(f"{name} is not on PATH (Debian: apt-get install {package})")


def require_library(module: str, extra: str) -> None:
    """Skip the calling test module if ``module`` is not installed (fail when ``CI=true``),
    found without importing it: a module-level ``importorskip`` imports the library in every
    xdist worker at collection, where only the worker that runs the module needs it."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        found = False
    if found:
        return
    reason = f"{module} is not installed (pip install 'ctxkit-llm[{extra}]')"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI=true, so it must be available (.ci/run)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def missing(reason: str) -> NoReturn:
    """Skip the test for ``reason``, or fail it when ``CI=true``."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI=true, so it must be available (.ci/run)", pytrace=False)
    pytest.skip(reason)


ROOT = Path(__file__).resolve().parent.parent


def environment_python(extra: str, label: str, variable: str) -> str:
    """The interpreter of the virtualenv ``.venvs/EXTRA`` (or ``$VARIABLE``) that .ci/run makes
    for a library that cannot live beside the dev extras (``pip install -e '.[EXTRA]'``);
    skip the test if it is missing, or fail when ``CI=true``."""
    path = os.environ.get(variable) or str(ROOT / ".venvs" / extra / "bin" / "python")
    if not Path(path).exists():
        missing(
            f"no {label} environment at {path}: python3 -m venv .venvs/{extra} && "
            f".venvs/{extra}/bin/pip install -e '.[{extra}]'"
        )
    return path
