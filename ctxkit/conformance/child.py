"""The parent's side of the worker process: send an operation, wait at most ``timeout``.

A target that hangs is killed and reported as timed out; one that dies (a crash, ``sys.exit``,
a segfault) is reported with the end of what it printed. Both raise :class:`TargetUnusable`, a
``BaseException`` on purpose: Hypothesis must not try to shrink a hang by running it again.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Child", "Reply", "TargetUnusable"]


CLOSE_GRACE_S = 2.0
"""How long a worker may take to end on its own once its input is closed."""


class TargetUnusable(BaseException):
    """The target hung or died; the run cannot go on."""

    def __init__(self, message: str, *, op: str, kind: str) -> None:
        super().__init__(message)
        self.message = message
        self.op = op
        self.kind = kind  # "timeout" or "crash"


@dataclass
class Reply:
    """One answer: a value, or what the target raised; plus events and the history digest."""

    ok: bool
    value: Any = None
    kind: str = ""
    type: str = ""
    message: str = ""
    traceback: str = ""
    events: list[Any] = field(default_factory=list)
    digest: str | None = None

    @property
    def error(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type


class Child:
    """A running worker process holding one target."""

    def __init__(self, *, timeout: float) -> None:
        self.timeout = timeout
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the child
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "ctxkit.conformance.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
        )
        self._buffer = b""

    def call(self, op: str, timeout: float | None = None, **args: Any) -> Reply:
        """Run one operation in the worker. Raises :class:`TargetUnusable` on hang or death."""
        assert self._process.stdin is not None
        line = json.dumps({"op": op, "args": args}, ensure_ascii=False) + "\n"
        try:
            self._process.stdin.write(line.encode("utf-8", "surrogatepass"))
            self._process.stdin.flush()
        except BrokenPipeError:
            self._died(op)
        answer = self._read_line(op, self.timeout if timeout is None else timeout)
        data = json.loads(answer)
        if data.get("kind") == "exit":
            self.close()
            raise TargetUnusable(
                f"the target called sys.exit during {op} ({data.get('message') or 'no code'})",
                op=op,
                kind="crash",
            )
        return Reply(**{k: v for k, v in data.items() if k in Reply.__dataclass_fields__})

    def _read_line(self, op: str, timeout: float) -> bytes:
        assert self._process.stdout is not None
        stream = self._process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.close()
                raise TargetUnusable(
                    f"timed out: {op} did not return within {timeout:g} s", op=op, kind="timeout"
                )
            ready, _, _ = select.select([stream], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(stream, 1 << 20)
            if not chunk:
                self._died(op)
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _died(self, op: str) -> None:
        code = self._process.wait(timeout=5)
        raise TargetUnusable(
            f"the target's process died during {op} (exit code {code}); it printed:\n"
            f"{self.stderr_tail()}",
            op=op,
            kind="crash",
        )

    def stderr_tail(self, limit: int = 2000) -> str:
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - limit))
        return self._stderr.read().decode("utf-8", "replace").strip() or "(nothing)"

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def close(self) -> None:
        """End the worker: first by closing its input, so the target can clean up (close
        files, run ``atexit``), and by killing it if it has not ended a moment later."""
        if self._process.poll() is None:
            try:
                if self._process.stdin is not None:
                    self._process.stdin.close()
                self._process.wait(timeout=CLOSE_GRACE_S)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait(timeout=5)
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # a dead worker's pipe, unflushed
                    stream.close()

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        self._stderr.close()
