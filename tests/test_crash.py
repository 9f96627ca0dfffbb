"""Crash test: a writer process killed with SIGKILL at random moments, 100 times on a history
file, 30 times on PostgreSQL (the session's cluster, tests/postgres.py).

After every kill the conversation is opened again and must hold every message the writer
acknowledged, in order, followed by nothing but messages it was about to add; a file must
load (a torn last line set aside, never fatal), a database holds only whole rows. Both fsync
policies take turns: SIGKILL spares what is in the operating system (or committed without
waiting for the server's disk), so ``never`` must pass this test as well as ``always``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.crash_writer import message
from tests.stores import STORES, DatabasePlace, FilePlace, opened_after_crash, place_for

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = {"file": 100, "postgresql": 30}
ROUNDS_PER_FILE = 10
"""A new file (conversation) every ten rounds keeps each check's reading short; within one,
every round after the first starts by recovering from the last one's kill."""
LATEST_KILL = {"file": 0.4, "postgresql": 0.5}
"""Seconds after the start a kill may come at the latest: well into the appending (a writer
on a database takes longer to get there: it connects first)."""
ACKED_BEFORE_KILL = 12
"""Every third kill comes once the writer has acknowledged this many adds, so the test appends
as much on a loaded machine as on an idle one (a kill by the clock alone acknowledged 264 adds
in 30 rounds on PostgreSQL under load, against 300 asked)."""


class Writer:
    """The forking writer process (tests/crash_writer.py) and its line protocol."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.crash_writer"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def line(self, timeout: float = 30) -> str:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        line = self.process.stdout.readline()
        assert line, "the writer process ended"
        assert time.monotonic() < deadline, "the writer process took too long"
        return line.split("\n")[0]

    def start(self, path: Path | str, fsync: str) -> int:
        assert self.process.stdin is not None
        self.process.stdin.write(f"go {path} {fsync}\n")
        self.process.stdin.flush()
        kind, pid = self.line().split()
        assert kind == "pid"
        return int(pid)

    def until_acked(self, count: int) -> list[str]:
        """The writer's lines until it has acknowledged ``count`` adds."""
        lines: list[str] = []
        acked = 0
        while acked < count:
            lines.append(self.line())
            assert not lines[-1].startswith("exit "), lines[-3:]
            acked += lines[-1].startswith("ack ")
        return lines

    def until_exit(self) -> tuple[list[str], int]:
        lines = []
        while not (line := self.line()).startswith("exit "):
            lines.append(line)
        return lines, int(line.split()[1])

    def close(self) -> None:
        self.process.kill()  # and with it any writer it is waiting for, via SIGKILL below
        self.process.wait(timeout=30)


def check_file(place: FilePlace | DatabasePlace) -> int:
    """Open the conversation as a new process would; returns how many messages it holds,
    after checking each is the message the writer added at that place."""

    async def read() -> list[dict]:
        manager = opened_after_crash(place)
        try:
            return await manager.get_messages()
        finally:
            manager.close()

    messages = asyncio.run(read())
    for i, stored in enumerate(messages):
        assert stored == message(i), f"message {i} of {place.name} is not the one added there"
    return len(messages)


@pytest.mark.parametrize("kind", STORES)
def test_every_acknowledged_message_survives_sigkill(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str
):
    rng = random.Random(20261121)
    base = place_for(request, kind, tmp_path)
    rounds, latest = ROUNDS[kind], LATEST_KILL[kind]
    writer = Writer()
    torn = opened_at = acked_total = 0
    pid = None
    try:
        for round_ in range(rounds):
            place = base.other(f"history-{round_ // ROUNDS_PER_FILE}")
            fsync = ("never", "always")[round_ % 2]
            pid = writer.start(place.location, fsync)
            before: list[str] = []
            if round_ % 3 == 2:  # well into the appending, by count
                before = writer.until_acked(ACKED_BEFORE_KILL)
            else:  # from "at once" (inside the open and its recovery) into the appending
                time.sleep(
                    rng.choice([0.0, rng.uniform(0, latest / 8), rng.uniform(latest / 8, latest)])
                )
            os.kill(pid, signal.SIGKILL)
            lines, status = writer.until_exit()
            lines = before + lines
            assert os.WIFSIGNALED(status), lines[-3:]
            assert os.WTERMSIG(status) == signal.SIGKILL, lines[-3:]
            assert not [line for line in lines if line.startswith("error")], lines[-3:]
            acked = [int(line.split()[1]) for line in lines if line.startswith("ack ")]
            opens = [line.split() for line in lines if line.startswith("open ")]
            if opens:
                opened_at += 1
                torn += int(opens[0][2]) > 0
                start = int(opens[0][1])
                assert acked == list(range(start, start + len(acked)))
            held = check_file(place)
            if acked:
                assert held >= acked[-1] + 1, (
                    f"round {round_} ({fsync}): message {acked[-1]} was acknowledged, "
                    f"the file holds {held}"
                )
                acked_total += len(acked)
    finally:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        writer.close()
    # The kills must have landed at different moments, not all before or all after opening
    # (a third at least got to append: on a loaded machine a writer takes longer to start,
    # and about half get there when the suite runs beside it).
    assert rounds // 3 <= opened_at < rounds, f"{opened_at} of {rounds} writers got to append"
    assert acked_total >= rounds // 3 * ACKED_BEFORE_KILL
    print(f"{rounds} kills, {acked_total} acknowledged adds, {torn} torn tails recovered")
