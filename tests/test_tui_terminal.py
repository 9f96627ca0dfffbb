"""``ctxkit inspect`` in a real terminal: tmux runs it, ``capture-pane`` reads the screen.

Two runs: the embedded ``--demo``, and ``--follow`` on the file a separate ``ctxkit demo
--events`` process is writing. Each asserts what a person beside the agent must see: the
context percentage, and a compaction in the log.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.system import require_binary

PERCENT = re.compile(r"\b\d{1,3}\.\d%")
COMPACTION_ROW = re.compile(r"\d\d:\d\d:\d\d\s+[\d,]+ → [\d,]+")
"""A compaction log row: time, tokens before → after."""
TIMEOUT_S = 40.0
DEMO = ("--duration", "60", "--rate", "20")
"""The writer: fast enough to compact within seconds, killed when the test is done."""


class Terminal:
    """One tmux server of its own (a private socket), one 100x30 window."""

    def __init__(self, tmux: str, socket: Path) -> None:
        self.tmux = tmux
        self.socket = socket

    def run(self, *args: str) -> str:
        done = subprocess.run(
            [self.tmux, "-S", str(self.socket), *args],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
        assert done.returncode == 0, f"tmux {args[0]}: {done.stderr}"
        return done.stdout

    def start(self, command: list[str], cwd: Path) -> None:
        env = {"TERM": "xterm-256color", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        line = " ".join(shlex.quote(part) for part in command)
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        self.run(
            "new-session", "-d", "-x", "100", "-y", "30", "-c", str(cwd),
            f"env {exports} {line}; sleep 30",
        )  # fmt: skip

    def screen(self) -> str:
        return self.run("capture-pane", "-p")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", *keys)

    def wait_for(self, what: str, seen: Callable[[str], bool]) -> str:
        deadline = time.monotonic() + TIMEOUT_S
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if seen(text):
                return text
            time.sleep(0.25)
        raise AssertionError(f"{what} did not appear on the screen; it shows:\n{text}")


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    tmux = require_binary("tmux")
    # A short socket path: unix sockets are limited to about 100 bytes.
    socket = Path("/tmp") / f"ctxkit-test-{os.getpid()}-{time.monotonic_ns()}"
    term = Terminal(tmux, socket)
    try:
        yield term
    finally:
        subprocess.run([tmux, "-S", str(socket), "kill-server"], capture_output=True, check=False)
        socket.unlink(missing_ok=True)


def inspect_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ctxkit", "inspect", *args]


def assert_live(terminal: Terminal) -> None:
    """The percentage is on screen; a compaction shows in the log pane; q quits."""
    screen = terminal.wait_for("the context percentage", lambda s: PERCENT.search(s) is not None)
    assert "tokens" in screen
    terminal.keys("2")  # the Compactions pane
    terminal.wait_for("a compaction entry", lambda s: COMPACTION_ROW.search(s) is not None)
    terminal.keys("q")
    terminal.wait_for("the app to quit", lambda s: PERCENT.search(s) is None)


def test_demo_in_a_real_terminal(terminal: Terminal, tmp_path: Path) -> None:
    terminal.start(inspect_command("--demo", "--rate", "20"), tmp_path)
    assert_live(terminal)


def test_follow_a_stream_another_process_writes(terminal: Terminal, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    # The inspector starts first: it must wait for the file, then keep up with it.
    terminal.start(inspect_command("--follow", str(events)), tmp_path)
    terminal.wait_for("the wait for the file", lambda s: "waiting for" in s)
    writer = subprocess.Popen(
        [sys.executable, "-m", "ctxkit", "demo", "--events", str(events), *DEMO],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert_live(terminal)
    finally:
        writer.kill()
        writer.wait(10)
