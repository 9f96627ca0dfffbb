"""Hostile and noisy targets: managers that attack the process that runs them, not the contract.

Not members of ``ZOO``: each is checked end to end through ``python -m ctxkit conformance`` by
tests/test_conformance_hostile.py, where what matters is the verdict's reason and that nothing
of the target outlives the run.

- PrintsJsonLines: correct, and prints JSON-looking lines to stdout and fd 1 on every call.
- SplitsPairsAndPrints: splits pairs (as SplitsPairsOpenAI) and prints the same lines.
- WritesIntoProtocol: correct, but writes garbage into every pipe it can find among its fds.
- WritesIntoRequests: correct, but reopens the pipes it reads from and writes garbage into them.
- SpawnsChildren: correct, but starts ``sleep`` processes and a double-forked daemon.
- ReturnsFortyTwo: get_messages_for_request returns ``42``.
- ClosesStdin: closes fd 0, and splits pairs (so the run must go on to that verdict).
- PrintsForever: get_messages_for_request prints without end and never returns.
- EatsMemory: get_messages_for_request keeps growing a list of large strings.
- AbortsOnAllocation: get_messages_for_request aborts as a failed native allocation does.
- Spins: get_messages_for_request spins the CPU for ever.
- HangsWhenBuilt: the constructor never returns.
- Stubborn: correct, but ignores SIGTERM and leaves a non-daemon thread running.
- CrashesOnSecondView: correct until its second view, which ends the process with SIGSEGV.
- tests/zoo/slow_import.py: a correct manager whose import sleeps (``CTXKIT_TEST_IMPORT_S``).

Processes started by SpawnsChildren carry ``CTXKIT_TEST_MARKER=<marker>`` in their
environment (the marker comes from the ``marker`` config key, or from the environment): tests
find what is left over by it in ``/proc/<pid>/environ``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from typing import Any

from tests.processes import MARKER_VARIABLE
from tests.zoo.base import GoodManager
from tests.zoo.pairs import SplitsPairsOpenAI


def _say_json(what: str) -> None:
    """Lines a careless parser would take for protocol answers, by print and by raw fd 1."""
    line = json.dumps({"ok": True, "value": [], "note": what})
    print(line, flush=True)
    os.write(1, (line + "\n").encode())


class PrintsJsonLines(GoodManager):
    """Correct; prints JSON-looking lines (``{"ok": true, "value": []}``) to stdout on every
    call. Its prints must not be taken for answers: it passes."""

    async def add_message(self, message: dict) -> None:
        _say_json("add_message")
        await super().add_message(message)

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict]:
        _say_json("get_messages_for_request")
        return await super().get_messages_for_request(token_budget, provider)


class SplitsPairsAndPrints(PrintsJsonLines, SplitsPairsOpenAI):
    """Fault (tool_pair_integrity), as SplitsPairsOpenAI, and prints like PrintsJsonLines: its
    prints must not hide the fault."""


class WritesIntoProtocol(GoodManager):
    """Correct, but on its first view it writes a line of garbage into every pipe among its
    open file descriptors (the way a stray logger or a confused library might). The checker
    must say the target wrote into the protocol channel."""

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict]:
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.write(fd, b"GARBAGE from the target\n")
            except OSError:
                pass
        return await super().get_messages_for_request(token_budget, provider)


class WritesIntoRequests(GoodManager):
    """Correct, but on its first view it reopens, through ``/proc/self/fd``, every pipe it can
    only read from, and writes a line of garbage into it (so into the parent's requests). The
    checker must say the target wrote into the protocol channel."""

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict]:
        for name in os.listdir("/proc/self/fd"):
            try:
                fd = int(name)
                reading = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
                if reading and stat.S_ISFIFO(os.fstat(fd).st_mode):
                    reopened = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY)
                    os.write(reopened, b"GARBAGE from the target\n")
                    os.close(reopened)
            except OSError:
                pass
        return await super().get_messages_for_request(token_budget, provider)


def _marked_environment(marker: str) -> dict[str, str]:
    return dict(os.environ, **{MARKER_VARIABLE: marker})


def _record(path: str, pid: int) -> None:
    if path:
        with open(path, "a") as record:
            record.write(f"{pid}\n")


def _double_fork_sleeper(marker: str, record: str) -> None:
    """A daemon the classic way: fork, new session, fork again, the middle one exits."""
    middle = os.fork()
    if middle:
        os.waitpid(middle, 0)
        return
    try:
        os.setsid()
        daemon = os.fork()
        if daemon == 0:
            os.execve("/bin/sleep", ["sleep", "600"], _marked_environment(marker))
        _record(record, daemon)
    finally:
        os._exit(0)


class SpawnsChildren(GoodManager):
    """Correct, but its constructor starts a double-forked daemon, and every third
    add_message a ``sleep 600`` child (every other one in a session of its own) that it never
    waits for. None of them may outlive the run. Config: ``marker`` (default: the
    environment's), ``record``: a file to append each started process id to."""

    def __init__(self, *, marker: str = "", record: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.marker = marker or os.environ.get(MARKER_VARIABLE, "hostile")
        self.record = record
        self.adds = 0
        _double_fork_sleeper(self.marker, record)

    async def add_message(self, message: dict) -> None:
        self.adds += 1
        if self.adds % 3 == 1:
            child = subprocess.Popen(  # noqa: ASYNC220 - never waited for: that is the point
                ["sleep", "600"],
                env=_marked_environment(self.marker),
                stdin=subprocess.DEVNULL,
                start_new_session=self.adds % 2 == 0,
            )
            _record(self.record, child.pid)
        await super().add_message(message)


class ReturnsFortyTwo(GoodManager):
    """Fault (lifecycle): get_messages_for_request returns ``42``, not a list."""

    async def get_messages_for_request(  # type: ignore[override]
        self, token_budget: int | None = None, provider: Any = None
    ) -> Any:
        return 42


class ClosesStdin(SplitsPairsOpenAI):
    """Closes fd 0 when built and on every add_message, and splits pairs (as
    SplitsPairsOpenAI): closing stdin must cost nothing, so the verdict is the split."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._close_stdin()

    async def add_message(self, message: dict) -> None:
        self._close_stdin()
        await super().add_message(message)

    @staticmethod
    def _close_stdin() -> None:
        with contextlib.suppress(OSError):
            os.close(0)


class PrintsForever(GoodManager):
    """Fault (hang): once the history holds 3+ messages, get_messages_for_request prints
    64 KiB lines to stdout for ever. It must be stopped at the timeout, and what it printed
    kept to a bounded head and tail."""

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict]:
        if len(self._messages) >= 3:
            line = "noise " * 10_922 + "\n"
            while True:
                sys.stdout.write(line)
        return await super().get_messages_for_request(token_budget, provider)


class EatsMemory(GoodManager):
    """Fault (memory): each get_messages_for_request appends 64 MiB strings to a list until
    something gives. Must be reported as exceeding the memory limit, not as a hang."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._hoard: list[bytes] = []

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict]:
        while True:
            self._hoard.append(b"m" * (64 << 20))


class AbortsOnAllocation(GoodManager):
    """Fault (memory): get_messages_for_request dies the way a Rust or C extension does when
    an allocation fails: the allocator's message on stderr, then abort()."""

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict]:
        os.write(2, b"memory allocation of 68719476736 bytes failed\n")
        os.abort()


class Spins(GoodManager):
    """Fault (hang): get_messages_for_request spins the CPU for ever, never awaiting."""

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict]:
        while True:
            pass


class HangsWhenBuilt(GoodManager):
    """Fault (hang): the constructor never returns. Only the import may take longer than
    ``--timeout``, so this must time out at ``--timeout``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        time.sleep(3600)


class Stubborn(GoodManager):
    """Correct, but what it leaves behind would hold up an ordinary exit: it ignores SIGTERM
    and starts a non-daemon thread that never ends. A run must take no longer for it than for
    a correct target: the worker leaves once the protocol is done, whatever is left running."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if not any(t.name == "stubborn" for t in threading.enumerate()):  # one a process
            threading.Thread(target=_forever, name="stubborn", daemon=False).start()


def _forever() -> None:
    while True:
        time.sleep(3600)


class CrashesOnSecondView(GoodManager):
    """Fault (crash): the second get_messages_for_request of a manager ends its process with
    SIGSEGV, as a broken native extension does. A deterministic crash is a finding: its steps,
    and a reproducer that dies of the same signal."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.views = 0

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict]:
        self.views += 1
        if self.views == 2:
            os.kill(os.getpid(), signal.SIGSEGV)
        return await super().get_messages_for_request(token_budget, provider)


class StubbornSplitsPairs(Stubborn, SplitsPairsOpenAI):
    """Fault (tool_pair_integrity), as SplitsPairsOpenAI, and as stubborn as Stubborn: its
    finding is shrunk and its reproducer verified as quickly as SplitsPairsOpenAI's."""
