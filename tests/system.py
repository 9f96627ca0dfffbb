"""System programs and privileges the tests need (promtool, prometheus, tmux, chromium, node;
root to mount a filesystem): skipped on a developer's machine that lacks them, a failure under
CI, where a silent skip would hide an untested feature."""

from __future__ import annotations

import os
import shutil
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


def missing(reason: str) -> NoReturn:
    """Skip the test for ``reason``, or fail it when ``CI=true``."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI=true, so it must be available (.ci/run)", pytrace=False)
    pytest.skip(reason)
