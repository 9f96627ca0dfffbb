"""Run a command contained: whatever it starts ends with it, its memory and output are capped.

A target under test may hang, spin, print gigabytes, eat memory, or start processes and
daemons of its own. :class:`Contained` starts a command so that none of that outlives it or
hurts the caller:

* A small **supervisor** process (this file run as a script, stdlib only) starts the command
  in a session of its own and makes itself a *child subreaper*
  (``prctl(PR_SET_CHILD_SUBREAPER)``), so every orphan the command leaves, double-forked
  daemons included, is re-parented to it. Ending the command ends the whole tree: the
  command's process group first, then every descendant found in ``/proc``, again until
  none is left.
* The supervisor holds a **lifeline**, a pipe whose other end only the caller holds: when
  the caller dies, however it dies (``SIGKILL`` included), the supervisor reads end of file
  and ends the tree. The command gets ``PR_SET_PDEATHSIG`` with ``SIGKILL`` from the
  supervisor, a single-threaded parent (the death signal fires when the parent *thread*
  ends, so it is never set from the caller's threads). The supervisor runs in a session of
  its own, so a signal to the caller's process group does not take it down before it cleans
  up.
* The command's address space is capped (``RLIMIT_AS``, :data:`DEFAULT_MEMORY_LIMIT` unless
  told otherwise), core dumps are off, its stdin is ``/dev/null``, and its stdout and stderr
  go to one pipe the caller drains all the time on a thread, so a chatty command never
  blocks on a full pipe. Only the first and last :data:`OUTPUT_KEEP` bytes are kept.
* When the command ends, how is classified: ``exited``, ``killed`` (a signal), or ``memory``
  when it ran out of memory (a ``MemoryError``, an allocator's abort message such as Rust's
  ``memory allocation of N bytes failed``, or death by a signal after its address space
  came within 10 % of the limit).

Linux only: :class:`SandboxUnavailable` says so elsewhere.

Example::

    with Contained([sys.executable, "script.py"], memory_limit=2 << 30) as process:
        if process.wait(timeout=30) is None:
            process.kill_tree()
        print(process.ended, process.output())

    outcome = run_contained([sys.executable, "script.py"], timeout=30)
    status, output, ended = outcome  # ended: "exited", "timeout", "memory" or "killed"
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "OUTPUT_KEEP",
    "Contained",
    "Outcome",
    "SandboxUnavailable",
    "descendants",
    "format_size",
    "out_of_memory_said",
    "parse_size",
    "require_linux",
    "run_contained",
]

DEFAULT_MEMORY_LIMIT = 4 << 30
"""The command's address space cap (``RLIMIT_AS``), 4 GiB: room for any reasonable context
manager and a Python interpreter's reservations, and far below what stalls a CI machine."""

OUTPUT_KEEP = 1 << 20
"""Bytes of output kept at each end (the first and the last MiB)."""

KILL_WAIT_S = 10.0
"""How long the supervisor may take to end the tree once asked."""

PEAK_SHARE = 0.9
"""A command killed by a signal whose address space reached this share of the limit is taken
to have run out of memory (a failed allocation it did not survive)."""

PEAK_POLL_S = (0.05, 0.5)
"""How often the supervisor reads the command's peak address space: every 50 ms at first
and while it is past half the cap, backing off to every half second while it stays small (a
worker that lives a minute wakes its supervisor about 130 times instead of 1,200). A death,
an orphan's, the caller's word or its death wake the supervisor at once whatever the
interval, and the memory a command touched is read at its death anyway (wait4's peak RSS)."""

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36

_OUT_OF_MEMORY = re.compile(
    rb"^MemoryError\b"  # Python's traceback, last line
    rb"|memory allocation of \d+ bytes failed"  # Rust's allocator
    rb"|std::bad_alloc"  # C++
    rb"|Cannot allocate memory"  # ENOMEM, as strerror words it
    rb"|out of memory"  # Go's runtime, Node's heap, many C programs
    rb"|Out of memory",
    re.MULTILINE,
)

Ended = Literal["exited", "killed", "memory"]


def out_of_memory_said(output: bytes) -> bool:
    """Whether the end of a command's output says it ran out of memory."""
    return _OUT_OF_MEMORY.search(output) is not None


class SandboxUnavailable(RuntimeError):
    """Containment needs Linux (prctl, /proc); raised elsewhere with the reason."""


class Outcome(NamedTuple):
    """What :func:`run_contained` saw: the exit status (negative: the signal that ended it),
    the output (head and tail), and how it ended."""

    status: int | None
    output: str
    ended: Literal["exited", "timeout", "memory", "killed"]


def require_linux() -> None:
    """Raise :class:`SandboxUnavailable` unless this is Linux."""
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(
            f"running a target contained needs Linux (prctl, /proc); this is {sys.platform}"
        )


# -- sizes ----------------------------------------------------------------------------------

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)


def parse_size(text: str) -> int | None:
    """``"2G"``, ``"512M"``, ``"1.5GiB"``, ``"65536"`` as bytes (binary units); ``"0"``,
    ``"none"`` and ``"off"`` as None (no limit). Raises ValueError with the accepted forms."""
    word = text.strip().lower()
    if word in ("none", "off", "unlimited"):
        return None
    found = _SIZE.fullmatch(word)
    if found is None:
        raise ValueError(
            f"not a size: {text!r}; use a number of bytes with an optional K, M, G or T "
            "(e.g. 512M, 2G), or 0 or none for no limit"
        )
    size = int(float(found.group(1)) * 1024 ** " kmgt".index(found.group(2) or " "))
    return size or None


def format_size(size: int) -> str:
    """``2147483648`` as ``"2 GiB"``, ``1536 << 20`` as ``"1.5 GiB"``."""
    for power, unit in ((4, "TiB"), (3, "GiB"), (2, "MiB"), (1, "KiB")):
        if size >= 1024**power:
            return f"{size / 1024**power:.4g} {unit}"
    return f"{size} bytes"


# -- the caller's side ----------------------------------------------------------------------


class Contained:
    """A command running contained (see the module's docstring).

    Parameters:
        argv: the command and its arguments.
        memory_limit: the command's address space cap in bytes (each process it starts gets
            the same cap); None for none.
        env: its environment (default: this process's).
        cwd: its working directory (default: this process's).
        pass_fds: descriptors it inherits under the same numbers (the caller keeps its own
            copies and closes them when it likes).
        output_keep: bytes of output kept at each end.

    ``pid`` is the command's process id; it leads its own process group and session.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        pass_fds: Sequence[int] = (),
        output_keep: int = OUTPUT_KEEP,
    ) -> None:
        require_linux()
        self.memory_limit = memory_limit
        self.returncode: int | None = None
        self._final: dict[str, Any] = {}
        self._status_buffer = b""
        lifeline_end, self._lifeline = os.pipe()
        self._status, status_end = os.pipe()
        output_end, output_start = os.pipe()
        try:
            self._supervisor = subprocess.Popen(
                [sys.executable, "-I", "-S", __file__, str(lifeline_end), str(status_end)],
                stdin=subprocess.DEVNULL,
                stdout=output_start,
                stderr=output_start,
                pass_fds=(lifeline_end, status_end, *pass_fds),
                start_new_session=True,
            )
        except BaseException:
            for fd in (self._lifeline, self._status, output_end):
                os.close(fd)
            raise
        finally:
            for fd in (lifeline_end, status_end, output_start):
                os.close(fd)
        self._capture = _Capture(output_end, output_keep)
        spec = {
            "argv": list(argv),
            "env": dict(os.environ if env is None else env),
            "cwd": None if cwd is None else os.fspath(cwd),
            "pass_fds": list(pass_fds),
            "memory_limit": memory_limit,
        }
        try:
            os.write(self._lifeline, json.dumps(spec).encode() + b"\n")
            hello = self._read_status(timeout=30.0)
        except OSError:
            hello = None
        if hello is None or "pid" not in hello:
            self.close()
            reason = hello["error"] if hello else "the supervisor did not start"
            printed = self.output_tail(500).strip()
            raise OSError(reason + (f"; it printed: {printed}" if printed else ""))
        self.pid: int = hello["pid"]

    # -- state ------------------------------------------------------------------------------

    def wait(self, timeout: float | None = None) -> int | None:
        """The command's exit status once it and everything it started have ended (negative:
        the signal that ended it); None if it still runs after ``timeout`` seconds."""
        if self.returncode is not None:
            return self.returncode
        final = self._read_status(timeout)
        if final is None and self._supervisor.poll() is None:
            return None
        if final is None:  # the supervisor itself died: end what can still be found
            _signal_group(self.pid, signal.SIGKILL)
            final = {"returncode": -signal.SIGKILL, "killed": True}
        self._supervisor.wait()
        self._final = final
        self.returncode = final["returncode"]
        self._capture.finish(timeout=2.0)
        return self.returncode

    def poll(self) -> int | None:
        """The exit status if the command has ended, else None; does not block."""
        return self.wait(0)

    @property
    def ended(self) -> Ended | None:
        """How the command ended (None while it runs): ``"memory"`` if it ran out of memory,
        ``"killed"`` if a signal ended it (:meth:`kill_tree` included), else ``"exited"``."""
        if self.returncode is None:
            return None
        if self._final.get("killed"):
            return "killed"
        if self.returncode != 0 and self._out_of_memory():
            return "memory"
        return "killed" if self.returncode < 0 else "exited"

    def _out_of_memory(self) -> bool:
        if out_of_memory_said(self._capture.tail(8192)):
            return True
        peak = self._final.get("peak", 0)
        return bool(
            self.returncode < 0 and self.memory_limit and peak >= PEAK_SHARE * self.memory_limit
        )

    # -- output ---------------------------------------------------------------------------

    def output(self) -> str:
        """What the command and its children printed: the first and last ``output_keep``
        bytes, with a line saying how much was dropped between them."""
        return self._capture.text()

    def output_tail(self, limit: int = 2000) -> str:
        """The last ``limit`` bytes printed, as text."""
        return self._capture.tail(limit).decode("utf-8", "replace")

    @property
    def output_size(self) -> int:
        """Bytes printed so far, kept or not."""
        return self._capture.total

    # -- ending -----------------------------------------------------------------------------

    def kill_tree(self) -> None:
        """Kill the command and everything it started (``SIGKILL``), and wait for the end."""
        if self.returncode is not None:
            return
        with contextlib.suppress(OSError):
            os.write(self._lifeline, b"k")
        if self.wait(KILL_WAIT_S) is None:  # a supervisor that does not answer: last resort
            _signal_group(self.pid, signal.SIGKILL)
            _signal_group(self._supervisor.pid, signal.SIGKILL)
            self.wait(KILL_WAIT_S)

    def close(self) -> None:
        """Kill the tree if it still runs and release the pipes."""
        if self.returncode is None and hasattr(self, "pid"):
            self.kill_tree()
        elif self.returncode is None:  # failed start
            _signal_group(self._supervisor.pid, signal.SIGKILL)
            self._supervisor.wait()
        for fd in (self._lifeline, self._status):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._lifeline = self._status = -1
        self._capture.finish(timeout=2.0)

    def __enter__(self) -> Contained:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read_status(self, timeout: float | None) -> dict[str, Any] | None:
        """The supervisor's next report, or None on timeout or if it is gone."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._status_buffer:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._status], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(self._status, 65536)
            if not chunk:
                return None
            self._status_buffer += chunk
        line, _, self._status_buffer = self._status_buffer.partition(b"\n")
        return json.loads(line)


def run_contained(
    argv: Sequence[str],
    *,
    timeout: float,
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> Outcome:
    """Run a command contained until it ends or ``timeout`` seconds pass; nothing it started
    outlives the call. Returns ``(status, output, ended)``, ``ended`` one of ``"exited"``,
    ``"timeout"``, ``"memory"``, ``"killed"``."""
    with Contained(argv, memory_limit=memory_limit, env=env, cwd=cwd) as process:
        if process.wait(timeout) is None:
            process.kill_tree()
            return Outcome(process.returncode, process.output(), "timeout")
        return Outcome(process.returncode, process.output(), process.ended or "exited")


class _Capture:
    """Drains a pipe on a thread, keeping its first and last ``keep`` bytes."""

    def __init__(self, fd: int, keep: int) -> None:
        self.keep = keep
        self.total = 0
        self._head = bytearray()
        self._tail = bytearray()
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._drain, args=(fd,), name="ctxkit-sandbox-output", daemon=True
        )
        self._thread.start()

    def _drain(self, fd: int) -> None:
        try:
            while chunk := os.read(fd, 1 << 20):
                with self._lock:
                    self.total += len(chunk)
                    room = self.keep - len(self._head)
                    if room > 0:
                        self._head += chunk[:room]
                        chunk = chunk[room:]
                    self._tail += chunk
                    if len(self._tail) > 2 * self.keep:
                        del self._tail[: -self.keep]
        except OSError:
            pass
        finally:
            os.close(fd)

    def finish(self, timeout: float) -> None:
        """Wait until everything written so far is read (the writers have all ended)."""
        self._thread.join(timeout)

    def tail(self, limit: int) -> bytes:
        with self._lock:
            kept = bytes(self._tail[-limit:])
            if len(kept) < limit:
                kept = bytes(self._head[-(limit - len(kept)) :]) + kept
        return kept

    def text(self) -> str:
        with self._lock:
            head, tail = bytes(self._head), bytes(self._tail[-self.keep :])
            dropped = self.total - len(head) - len(tail)
        middle = (
            f"\n[... {format_size(dropped)} of output dropped: the first and last "
            f"{format_size(self.keep)} are kept ...]\n"
            if dropped
            else ""
        )
        return head.decode("utf-8", "replace") + middle + tail.decode("utf-8", "replace")


def _signal_group(group: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


# -- the process tree, as /proc shows it ----------------------------------------------------


def descendants(root: int) -> dict[int, str]:
    """Every process below ``root`` (children, theirs, ...) and its state letter (``"Z"`` for
    a zombie), read from ``/proc``."""
    children: dict[int, list[tuple[int, str]]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                data = stat.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()  # the name may hold spaces and ")"
        children.setdefault(int(fields[1]), []).append((int(name), fields[0].decode()))
    found: dict[int, str] = {}
    stack = [root]
    while stack:
        for pid, state in children.get(stack.pop(), ()):
            if pid not in found:
                found[pid] = state
                stack.append(pid)
    return found


def _vm_peak(pid: int) -> int:
    """The largest address space the process has had, in bytes (0 if unknown)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmPeak:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


# -- the supervisor: this file run as a script ----------------------------------------------


class _Supervisor:
    """Starts the command, reaps whatever is re-parented to it, ends the tree, reports."""

    def __init__(self, lifeline: int, status: int) -> None:
        import ctypes

        self.lifeline = lifeline
        self.status = status
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.returncode: int | None = None
        self.peak = 0
        self.stop = False

    def run(self) -> None:
        spec = json.loads(self._read_spec())
        if self.libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            self._report({"error": "prctl(PR_SET_CHILD_SUBREAPER) failed"})
            return
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # end the tree first
            signal.signal(signum, self._on_term)  # (the command starts with the defaults)
        try:
            command = subprocess.Popen(
                spec["argv"],
                stdin=subprocess.DEVNULL,
                env=spec["env"],
                cwd=spec["cwd"],
                pass_fds=spec["pass_fds"],
                start_new_session=True,
                preexec_fn=self._confine(spec["memory_limit"]),  # safe: one thread here
            )
        except (OSError, subprocess.SubprocessError) as exc:
            self._report({"error": f"cannot start {spec['argv'][0]!r}: {exc}"})
            return
        for fd in spec["pass_fds"]:
            os.close(fd)
        self._report({"pid": command.pid})
        killed = self._watch(command.pid, wake_read, spec["memory_limit"])
        self._end_tree(command.pid)
        if self.returncode is None:  # not reaped in time: it is as good as killed
            self.returncode = -signal.SIGKILL
        self._report({"returncode": self.returncode, "peak": self.peak, "killed": killed})

    def _read_spec(self) -> bytes:
        data = b""
        while not data.endswith(b"\n"):
            chunk = os.read(self.lifeline, 1 << 16)
            if not chunk:
                sys.exit(0)  # the caller died before it said what to run
            data += chunk
        return data

    def _confine(self, memory_limit: int | None) -> Any:
        import resource

        supervisor = os.getpid()
        prctl = self.libc.prctl

        def confine() -> None:  # in the command's process, between fork and exec
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != supervisor:
                os._exit(1)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if memory_limit:
                _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
                cap = memory_limit if hard == resource.RLIM_INFINITY else min(memory_limit, hard)
                resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

        return confine

    def _on_term(self, *_: object) -> None:
        self.stop = True

    def _watch(self, pid: int, wake: int, memory_limit: int | None) -> bool:
        """Until the command ends (False) or the caller asks for the end or dies (True)."""
        first, slowest = PEAK_POLL_S
        pause = first
        while not self.stop:
            self._reap(pid)
            if self.returncode is not None:
                return False
            if memory_limit:  # without a cap there is no peak to watch: only events wake it
                self.peak = max(self.peak, _vm_peak(pid))
                pause = first if self.peak >= memory_limit // 2 else min(pause * 1.25, slowest)
            timeout = pause if memory_limit else None
            ready, _, _ = select.select([self.lifeline, wake], [], [], timeout)
            if wake in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake, 4096)
            if self.lifeline in ready:
                data = os.read(self.lifeline, 4096)
                if not data or b"k" in data:
                    return True
        return True

    def _reap(self, pid: int) -> None:
        while True:
            try:
                found, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if found == 0:
                return
            if found == pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                self.peak = max(self.peak, usage.ru_maxrss * 1024)

    def _end_tree(self, pid: int) -> None:
        """SIGKILL the command's group, then every descendant, until none is left."""
        _signal_group(pid, signal.SIGKILL)
        deadline = time.monotonic() + KILL_WAIT_S
        me = os.getpid()
        while time.monotonic() < deadline:
            self._reap(pid)
            left = descendants(me)
            if not left:
                return
            for other, state in left.items():
                if state != "Z":
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(other, signal.SIGKILL)
            time.sleep(0.005)

    def _report(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):  # else the caller is gone
            os.write(self.status, json.dumps(message).encode() + b"\n")


if __name__ == "__main__":
    _Supervisor(int(sys.argv[1]), int(sys.argv[2])).run()
