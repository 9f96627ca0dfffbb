"""The parent's side of the worker process: send an operation, wait at most ``timeout``.

The worker runs contained
(:mod:`ctxkit.conformance.targets.sandbox`): in a session of its own under a
supervisor that ends it and everything it started when it is closed, restarted, or when this
process dies; with its address space capped and its output kept to a head and a tail.
Requests and answers travel on two pipes of their own, each line framed by a random token per
worker (see :mod:`ctxkit.conformance.worker`).

A target that hangs is killed and reported as timed out (a call may be given a grace past its
timeout: a busy machine answers late, a hang not at all); one that dies (a crash,
``sys.exit``, a segfault) is reported with the end of what it printed; one that runs out of
memory, as exceeding the memory limit; one that writes into the protocol's pipes, as having
done so. All raise :class:`TargetUnusable`, a ``BaseException`` on purpose: Hypothesis must
not try to shrink a hang by running it again.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import signal
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, TextIO

from ctxkit.conformance.targets.protocol import EXIT_CHANNEL_LOST, FDS_VARIABLE, PROTOCOL_VERSION
from ctxkit.conformance.targets.sandbox import (
    DEFAULT_MEMORY_LIMIT,
    OUTPUT_KEEP,
    Contained,
    format_size,
)

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "PYTHON_WORKER",
    "Child",
    "Reply",
    "TargetUnusable",
    "during",
    "first_grace",
    "first_line",
    "how_it_ended",
]

PYTHON_WORKER = (sys.executable, "-m", "ctxkit.conformance.worker")
"""The implementation for Python targets."""

_CALLS = {
    "hello": "loading the target",
    "reset": "building the manager",
    "add": "add_message",
    "add_many": "concurrent add_message calls",
    "view": "get_messages_for_request",
    "get": "get_messages",
    "set": "set_messages",
    "clear": "clear",
    "turn": "add_message or get_messages_for_request",
}


def during(op: str) -> str:
    """The call a worker operation stands for, as a person reads it."""
    return _CALLS.get(op, op)


CLOSE_GRACE_S = 1.0
"""How long a worker may take to end on its own once its requests are closed: its last
manager's cleanups and ``atexit`` handlers. The worker leaves directly after them (nothing the
target left running is waited for), so this is rarely waited out; past it, the worker's
process group and everything it started are killed."""

ENDED_WAIT_S = 2.0
"""How long a worker whose channel closed may take to report how it ended (a crash is
reported at once; a target that closed the channel and runs on waits this out)."""


class TargetUnusable(BaseException):
    """The target hung, died, ran out of memory or broke the protocol; the run cannot go on.

    ``kind`` is ``"timeout"``, ``"crash"``, ``"memory"`` or ``"protocol"``; ``"ended"`` when
    the worker had already been ended by an earlier call (a replay Hypothesis makes after a
    stop): nothing the target did, so nothing is charged for it. ``status``: for a
    process that died, its exit status (negative: the signal that ended it), so a reproducer
    can be held to dying the same way.
    """

    def __init__(self, message: str, *, op: str, kind: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.op = op
        self.kind = kind
        self.status = status


@dataclass
class Reply:
    """One answer: a value, or what the target raised; plus events, the history's digest and,
    after an ``edit_after`` call, the history before the edit."""

    ok: bool
    value: Any = None
    kind: str = ""
    type: str = ""
    message: str = ""
    traceback: str = ""
    events: list[Any] = field(default_factory=list)
    digest: str | None = None
    before: Any = None
    during: str = ""
    """The call that raised, where an operation makes several (``turn``)."""

    @property
    def error(self) -> str:
        """What was raised, as a sentence quotes it: its type and first meaningful line."""
        line = first_line(self.message)
        return f"{self.type}: {line}" if line else self.type

    @classmethod
    def read(cls, data: dict[str, Any]) -> Reply:
        """An answer as the protocol writes it. Raises ValueError naming what is malformed."""
        ok = data.get("ok")
        if not isinstance(ok, bool):
            raise ValueError("an answer needs 'ok': true or false")
        error = data.get("error") or {}
        if not isinstance(error, dict):
            raise ValueError("'error' must be an object {type, message}")
        events = data.get("events") or []
        if not isinstance(events, list) or not all(
            isinstance(e, dict) and isinstance(e.get("name"), str) for e in events
        ):
            raise ValueError("'events' must be a list of {name, data} objects")
        found = data.get("digest")
        return cls(
            ok=ok,
            value=data.get("value"),
            kind=str(data.get("kind") or ""),
            type=str(error.get("type") or ("" if ok else "Error")),
            message=str(error.get("message") or ""),
            traceback=str(error.get("traceback") or ""),
            events=[[e["name"], e.get("data")] for e in events],
            digest=found if isinstance(found, str) else None,
            before=data.get("before"),
            during=str(error.get("during") or ""),
        )


@dataclass
class _Wait:
    """How long one call may take: ``limit`` seconds and, once past them, ``grace`` more."""

    limit: float
    grace: float = 0.0
    extended: bool = False
    deadline: float = field(init=False)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.limit

    def left(self) -> float:
        """Seconds left, 0 when out of time; the grace is added when the limit is reached."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0 and self.grace > 0 and not self.extended:
            self.extended = True
            self.deadline += self.grace
            remaining = self.deadline - time.monotonic()
        return max(remaining, 0.0)


_FOOTERS = ("(Background on this error at:",)
"""How libraries end an exception's message with a pointer rather than what went wrong
(SQLAlchemy's link to its error catalogue)."""


def first_grace(limit: float, left: float) -> float:
    """The grace a run's first call past its ``limit`` gets: twice as long again, when the
    ``left`` seconds to the deadline hold it (``Session.call`` in the search, and a replay's
    candidates)."""
    return 2 * limit if left >= 3 * limit else 0.0


def first_line(message: str) -> str:
    """The first line of an exception's message that says what went wrong: not blank, not a
    library's footer; the rest (SQL, parameters, links) is in the report's traceback."""
    for line in message.splitlines():
        line = line.strip()
        if line and not line.startswith(_FOOTERS):
            return line if len(line) <= 300 else line[:297] + "..."
    return ""


class Child:
    """A running implementation of the protocol, holding one target.

    ``command``: the program and its arguments (default: the Python worker). ``timeout`` is
    the default seconds per operation; ``memory_limit`` caps the target's address space in
    bytes (None: no cap); ``transcript``, if given, gets every request and answer as a JSON
    line ``{"request": ...}`` or ``{"answer": ...}``. Call :meth:`hello` first.
    """

    def __init__(
        self,
        command: Sequence[str] = PYTHON_WORKER,
        *,
        timeout: float,
        memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
        transcript: TextIO | None = None,
    ) -> None:
        self.command = tuple(command)
        self.transcript = transcript
        self.timeout = timeout
        self.memory_limit = memory_limit
        self.implementation: dict[str, Any] = {}
        self._start()

    def _start(self) -> None:
        self._token = secrets.token_hex(16).encode()
        self._buffer = bytearray()
        self._scanned = 0
        self._closed = False
        self._greeted = False
        self.moved = 0
        """Bytes of requests and answers exchanged so far: the work a call does, counted
        the same on a busy machine as on an idle one."""
        theirs_requests, self._requests = os.pipe()
        self._answers, theirs_answers = os.pipe()
        try:
            env = dict(os.environ, PYTHONUNBUFFERED="1")
            env[FDS_VARIABLE] = f"{theirs_requests},{theirs_answers}"
            self._process = Contained(
                self.command,
                memory_limit=self.memory_limit,
                env=env,
                pass_fds=(theirs_requests, theirs_answers),
            )
        except BaseException:
            os.close(self._requests)
            os.close(self._answers)
            raise
        finally:
            os.close(theirs_requests)
            os.close(theirs_answers)
        os.set_blocking(self._requests, False)
        self._printed = 0

    # -- one operation ----------------------------------------------------------------------

    def hello(
        self,
        target: str | None,
        config: dict[str, Any] | None = None,
        ignore: Iterable[str] = (),
        timeout: float | None = None,
        form: str | None = None,
        digests: bool = True,
    ) -> Reply:
        """Load the target: the protocol's first request. A ``load`` kind of failure is the
        user's (a bad target); the value names the implementation and the resolved target.
        ``form`` (``--form``) and ``digests=False`` (answers without the history's digest)
        are sent only when given, so implementations that know nothing of them see the hello
        they always saw."""
        args = {
            "protocol": PROTOCOL_VERSION,
            "token": self._token.decode(),
            "target": target,
            "config": dict(config or {}),
            "ignore": sorted(ignore),
        }
        if form is not None:
            args["form"] = form
        if not digests:
            args["digests"] = False
        reply = self._exchange("hello", args, timeout, framed=False)
        if reply.ok:
            value = reply.value if isinstance(reply.value, dict) else {}
            if value.get("protocol") != PROTOCOL_VERSION:
                self._garbage("hello", f"an answer for protocol {value.get('protocol')!r}")
            self.implementation = dict(value.get("implementation") or {})
        self._greeted = True
        return reply

    def call(self, op: str, timeout: float | None = None, grace: float = 0.0, **args: Any) -> Reply:
        """Make one request (after :meth:`hello`). Raises :class:`TargetUnusable` when the
        target hangs (gives no answer within ``timeout`` and then ``grace`` seconds more),
        dies, runs out of memory or writes into the protocol channel."""
        if not self._greeted:
            raise RuntimeError(f"{op}: hello() must come first")
        return self._exchange(op, args, timeout, grace=grace)

    def _exchange(
        self,
        op: str,
        args: dict[str, Any],
        timeout: float | None,
        framed: bool = True,
        grace: float = 0.0,
    ) -> Reply:
        if self._closed:  # an earlier call stopped it; the runner starts a fresh one
            raise TargetUnusable(
                f"no worker for {during(op)}: an earlier call ended it", op=op, kind="ended"
            )
        wait = _Wait(self.timeout if timeout is None else timeout, grace)
        self._printed = self._process.output_size
        request = json.dumps({"op": op, "args": args}, ensure_ascii=False)
        line = request.encode("utf-8", "surrogatepass") + b"\n"
        self._note("request", request)
        self.moved += len(line)
        self._send(self._token + b" " + line if framed else line, op, wait)
        data = self._receive(op, wait)
        if self.transcript is not None:  # written again only for the transcript
            self._note("answer", json.dumps(data, ensure_ascii=False))
        try:
            reply = Reply.read(data)
        except ValueError as exc:
            self._garbage(op, f"a malformed answer ({exc})")
        if reply.kind == "exit":
            self._kill()
            how = (
                "raised KeyboardInterrupt"
                if reply.type == "KeyboardInterrupt"
                else f"called sys.exit({reply.message})"
                if reply.type == "SystemExit"
                else f"called {reply.message}"
                if reply.type == "TargetExit"  # the Node harness's name for process.exit
                else f"tried to exit ({reply.error})"
            )
            raise TargetUnusable(
                f"the target {how} during {reply.during or during(op)}", op=op, kind="crash"
            )
        if reply.kind == "memory":
            self._kill()
            raise TargetUnusable(self._out_of_memory(op), op=op, kind="memory")
        if reply.kind == "protocol" and reply.type == "Garbage":
            self._garbage(op, reply.message)
        if reply.kind == "protocol":
            self._kill()
            raise TargetUnusable(
                f"the implementation could not read the {op!r} request: {reply.error}",
                op=op,
                kind="protocol",
            )
        return reply

    def _note(self, direction: str, text: str) -> None:
        if self.transcript is not None:
            self.transcript.write(f'{{"{direction}": {text}}}\n')
            self.transcript.flush()

    def _send(self, data: bytes, op: str, wait: _Wait) -> None:
        pending = memoryview(data)
        while pending:
            remaining = wait.left()
            if remaining <= 0:
                self._timed_out(op, wait)
            _, ready, _ = select.select([], [self._requests], [], remaining)
            if not ready:
                continue
            try:
                pending = pending[os.write(self._requests, pending) :]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                self._ended(op)

    def _receive(self, op: str, wait: _Wait) -> dict[str, Any]:
        """The next answer line, checked for the token; anything else is the target's."""
        prefix = self._token + b" "
        while True:
            shown = min(len(self._buffer), len(prefix))
            if self._buffer[:shown] != prefix[:shown]:
                self._garbage(op, self._first_bytes(self._buffer))
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                break
            self._scanned = len(self._buffer)
            remaining = wait.left()
            if remaining <= 0:
                self._timed_out(op, wait)
            ready, _, _ = select.select([self._answers], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._answers, 1 << 20)
            if not chunk:
                self._ended(op)
            self._buffer += chunk
        line = bytes(self._buffer[len(prefix) : end])
        self.moved += len(line)
        del self._buffer[: end + 1]
        self._scanned = 0
        try:
            data = json.loads(line)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            self._garbage(op, self._first_bytes(line))
        return data

    def _first_bytes(self, data: bytes | bytearray) -> str:
        """The start of what the target wrote, up to where an answer of ours begins."""
        found = data.find(self._token)
        return repr(bytes(data[: found if found > 0 else 60][:60]))

    # -- what ends a run --------------------------------------------------------------------

    def _garbage(self, op: str, shown: str) -> NoReturn:
        self._kill()
        raise TargetUnusable(
            f"the target wrote into the protocol channel: {shown} (during {during(op)})",
            op=op,
            kind="protocol",
        )

    def _timed_out(self, op: str, wait: _Wait) -> NoReturn:
        self._kill()
        message = f"timed out: {during(op)} did not return within {wait.limit:g} s"
        if wait.extended:
            message += f", nor within {wait.limit + wait.grace:g} s when given longer"
        printed = self._process.output_size - self._printed
        if printed > OUTPUT_KEEP:
            message += f" (it printed {format_size(printed)} meanwhile)"
        raise TargetUnusable(message, op=op, kind="timeout")

    def _ended(self, op: str) -> NoReturn:
        """The channel closed: the worker died, or the target closed the descriptors."""
        code = self._process.wait(ENDED_WAIT_S)
        ended = self._process.ended
        self._kill()
        if code is None or code == EXIT_CHANNEL_LOST:
            raise TargetUnusable(
                f"the target closed the protocol channel during {during(op)}",
                op=op,
                kind="protocol",
            )
        if ended == "memory":
            raise TargetUnusable(self._out_of_memory(op), op=op, kind="memory")
        raise TargetUnusable(
            f"the target's process died during {during(op)} ({how_it_ended(code)}); it printed:\n"
            f"{self.stderr_tail()}",
            op=op,
            kind="crash",
            status=code,
        )

    def _out_of_memory(self, op: str) -> str:
        if self.memory_limit is None:
            return f"the target ran out of memory during {during(op)}"
        limit = format_size(self.memory_limit)
        return f"the target exceeded the memory limit ({limit}) during {during(op)}"

    # -- state ------------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return self._process.pid

    @property
    def alive(self) -> bool:
        return not self._closed and self._process.poll() is None

    def output(self) -> str:
        """What the target printed (stdout and stderr): the first and last MiB."""
        return self._process.output()

    def stderr_tail(self, limit: int = 2000) -> str:
        """The end of what the target printed, or ``(nothing)``."""
        return self._process.output_tail(limit).strip() or "(nothing)"

    # -- ending -----------------------------------------------------------------------------

    def close(self) -> None:
        """End the worker: first by closing its requests, so the target can clean up (close
        files, run ``atexit``), then, if it has not ended a moment later, by killing it and
        everything it started. Whatever it started and left running is ended either way."""
        if self._closed:
            return
        os.close(self._requests)
        if self._process.wait(CLOSE_GRACE_S) is None:
            self._process.kill_tree()
        self._release()

    def restart(self) -> None:
        """End the worker as :meth:`close` does and start a fresh one (:meth:`hello` it
        again)."""
        self.close()
        self._start()

    def _kill(self) -> None:
        """End the worker and its tree at once (after a hang, a death, garbage)."""
        if self._closed:
            return
        os.close(self._requests)
        self._process.kill_tree()
        self._release()

    def _release(self) -> None:
        self._process.close()
        os.close(self._answers)
        self._closed = True

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def how_it_ended(code: int) -> str:
    """An exit status as a person reads it: ``exit code 3``, ``killed by SIGSEGV``."""
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"
