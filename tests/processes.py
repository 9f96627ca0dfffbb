"""Finding processes by a marker in their environment, so tests can prove nothing of a target
outlived a run and can kill whatever did, even when the test fails.

Everything started from an environment that holds ``CTXKIT_TEST_MARKER=<marker>`` carries it
in ``/proc/<pid>/environ`` (the environment it was started with), whatever it does later.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MARKER_VARIABLE = "CTXKIT_TEST_MARKER"

PLUGIN_PYTEST = (
    sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
    *("-p", "no:langsmith_plugin", "-p", "no:anyio", "-p", "no:amplifier_module"),
    *("-p", "no:platformdirs", "-p", "no:textual-snapshot", "-p", "no:syrupy"),
    *("-p", "no:logfire", "-p", "no:pytest_logfire"),  # half of each start-up: 1.1 -> 0.55 s
)  # fmt: skip
"""A pytest of its own for tests of ctxkit's plugin, without the machine's other installed
plugins, which the plugin does not meet and which cost each start-up most of a second
(reproducers a user pastes run under a plain pytest instead)."""


def new_marker() -> str:
    return f"ctxkit-test-{uuid.uuid4().hex}"


def marked_environment(marker: str) -> dict[str, str]:
    """This process's environment with the marker, and the worktree importable."""
    return dict(os.environ, PYTHONPATH=str(ROOT), **{MARKER_VARIABLE: marker})


def alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def marked(marker: str) -> list[int]:
    """Live processes (zombies left out) whose environment carries the marker."""
    needle = f"{MARKER_VARIABLE}={marker}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            environment = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        if needle in environment.split(b"\0") and alive(int(name)):
            found.append(int(name))
    return found


def left_after(marker: str, seconds: float) -> list[int]:
    """The marked processes still alive after waiting up to ``seconds`` for them to go."""
    deadline = time.monotonic() + seconds
    while (left := marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def kill_marked(marker: str) -> None:
    for pid in marked(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def interruptible() -> None:
    """In a child, before it starts (``preexec_fn``): Ctrl-C as a terminal delivers it. A
    shell script's background job ignores SIGINT, and so do the processes it starts: tests
    run that way would see a command ignore Ctrl-C that a user's terminal interrupts."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_conformance(*args: str, marker: str) -> subprocess.Popen[str]:
    """``python -m ctxkit conformance ARGS`` with the marker in its environment."""
    return subprocess.Popen(
        [sys.executable, "-m", "ctxkit", "conformance", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=marked_environment(marker),
        preexec_fn=interruptible,
    )


def ctxkit(*args: str, cwd: Path = ROOT, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m ctxkit ARGS`` as a user runs it, this checkout first on the import path."""
    return subprocess.run(
        [sys.executable, "-m", "ctxkit", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=timeout,
        check=False,
    )


@contextlib.contextmanager
def json_lines(command: list[str], cwd: Path = ROOT) -> Iterator[Callable[[Any], Any]]:
    """A long-lived process that answers each JSON line with one: yields ``ask(value)``; the
    process ends with the block (the round-trip helpers of the adapter tests)."""
    process = subprocess.Popen(
        command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )

    def ask(value: Any) -> Any:
        process.stdin.write(json.dumps(value) + "\n")
        process.stdin.flush()
        return json.loads(process.stdout.readline())

    try:
        yield ask
    finally:
        process.stdin.close()
        process.wait(timeout=10)


def clean_copy(dest: Path) -> Path:
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
