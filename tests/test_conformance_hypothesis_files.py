"""A conformance run leaves no ``.hypothesis/`` where the user stands: Hypothesis's caches go
to ctxkit's cache directory, for the run only (issue 23, item 7)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir, storage_directory

from ctxkit.conformance.runner import hypothesis_cache_dir, hypothesis_files_in_cache

ROOT = Path(__file__).resolve().parent.parent


def _home() -> Path:
    return storage_directory(intent_to_write=False).home_directory


def test_a_cli_run_leaves_no_hypothesis_folder_in_the_current_directory(tmp_path: Path) -> None:
    cwd, cache = tmp_path / "project", tmp_path / "cache"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_STORAGE_DIRECTORY"}
    env |= {"PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run(
        [sys.executable, "-m", "ctxkit", "conformance", "--profile", "quick", "--seed", "5"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in cwd.iterdir()) == []
    # A search collects no constants from local modules, so Hypothesis may write nothing at
    # all; test_the_home_is_moved_for_the_run_only checks where it would.


def test_the_cache_dir_follows_xdg_and_ignores_a_relative_value(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert hypothesis_cache_dir() == tmp_path / "ctxkit" / "hypothesis"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert hypothesis_cache_dir() == Path.home() / ".cache" / "ctxkit" / "hypothesis"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert hypothesis_cache_dir() == Path.home() / ".cache" / "ctxkit" / "hypothesis"


def test_the_home_is_moved_for_the_run_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A pytest session's own Hypothesis database stays where it was after a suite run."""
    monkeypatch.delenv("HYPOTHESIS_STORAGE_DIRECTORY", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    before = _home()
    try:
        set_hypothesis_home_dir(tmp_path / "theirs")
        with hypothesis_files_in_cache():
            assert _home() == tmp_path / "cache" / "ctxkit" / "hypothesis"
        assert _home() == tmp_path / "theirs"
    finally:
        set_hypothesis_home_dir(before)


def test_a_home_chosen_by_the_environment_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HYPOTHESIS_STORAGE_DIRECTORY", str(tmp_path / "chosen"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    before = _home()
    with hypothesis_files_in_cache():
        assert _home() == before
