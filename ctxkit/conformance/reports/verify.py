"""Check a reproducer before it is printed: run it in a fresh process against the target and
see it fail for the reason the run gave, or, for calls that ended the target's process, end
the same way (the same signal or exit status).

The script runs contained like the target itself (:mod:`.sandbox`): its own session, the same
memory cap, output kept to head and tail, and nothing it starts outlives it. It runs as
``python script.py`` would, except that the process leaves as soon as the script is done:
a thread the target left running does not hold the check up until its timeout.

A run's reproducers all import the same target, and some targets take seconds to import
(litellm: 6 s of CPU, paid again by every script). :class:`Verifier` keeps one contained
process per run that imports what a script imports, and nothing else, and runs each script
in a process forked from it: fresh, but for modules already imported. Only a script that
fails the way the run said is taken from there; anything else (a pass, a timeout, memory,
another reason, a process with a thread to lose in a fork) is run again the first way, so
the fork can save time but never changes a verdict.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from ctxkit.conformance.reports.reproducer import PROJECT_VARIABLE
from ctxkit.conformance.targets.sandbox import (
    DEFAULT_MEMORY_LIMIT,
    OUTPUT_KEEP,
    Contained,
    out_of_memory_said,
    run_contained,
)
from ctxkit.conformance.targets.worker_client import first_line, how_it_ended

__all__ = ["Verifier", "verify"]

_RUN_AND_LEAVE = """\
import atexit, os, runpy, sys, traceback
path = sys.argv[1]
sys.argv = [path]
sys.path[0] = os.path.dirname(path)
try:
    runpy.run_path(path, run_name="__main__")
    status = 0
except SystemExit as exc:
    status = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    if not isinstance(exc.code, int | None):
        print(exc.code, file=sys.stderr)
except BaseException:
    traceback.print_exc()
    status = 1
try:
    atexit._run_exitfuncs()
finally:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
"""
"""``python script.py``, then an exit that waits for no thread the target left running."""


def verify(
    script: str,
    *,
    property_id: str,
    check: str,
    timeout: float,
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
    name: str | None = None,
    pythonpath: str | None = None,
    status: int | None = None,
) -> tuple[bool, str]:
    """(verified, what happened): run the script as ``python NAME`` from the current
    directory (where the target imports from; ``pythonpath`` is added to ``PYTHONPATH``; it is
    the script's ``PROJECT``, whatever ``CTXKIT_PROJECT_ROOT`` said), at most ``timeout``
    seconds. ``status``: for calls that ended the target's process, the exit
    status it ended with (negative: the signal), which the script must end with too."""
    with tempfile.TemporaryDirectory(prefix="ctxkit-verify-") as folder:
        path = Path(folder) / (name or f"test_{property_id}.py")
        path.write_text(script, encoding="utf-8")
        env = _environment(pythonpath)
        attempt = 0
        while attempt < FRESH_TRIES:  # again only while the script passes
            attempt += 1
            ended_with, output, ended = run_contained(
                [sys.executable, "-c", _RUN_AND_LEAVE, str(path)],
                timeout=timeout,
                memory_limit=memory_limit,
                env=env,
            )
            if ended_with != 0 or ended == "timeout":
                break
    last = _last_line(output)
    if ended == "timeout":
        return False, f"not verified: the script did not end within {timeout:.0f} s"
    if ended_with == 0:
        return False, (
            f"nondeterministic: the run saw it, but its script passed {FRESH_TRIES} fresh runs "
            f"(what may vary from run to run: {_VARIES.get(property_id, _VARIES[''])})"
        )
    verified, said = _judged(output, ended, ended_with, last, property_id, check, status)
    if verified and attempt > 1:
        said += f"; on fresh run {attempt} of {FRESH_TRIES}: it does not fail every time"
    return verified, said


def _environment(pythonpath: str | None) -> dict[str, str]:
    """A script's environment: it imports from the current directory and ``pythonpath``."""
    paths = [os.getcwd(), pythonpath or "", os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))
    env[PROJECT_VARIABLE] = os.getcwd()
    return env


FRESH_TRIES = 3
"""Fresh runs of a script that passes before it is called nondeterministic."""

_VARIES = {
    "concurrency": "the order in which concurrent calls interleave",
    "determinism": "time, randomness or a counter the target keeps",
    "": "time, randomness, concurrency, or state outside the calls (a global, a file, a cache)",
}


def _judged(
    output: str,
    ended: str,
    ended_with: int | None,
    last: str,
    property_id: str,
    check: str,
    status: int | None,
) -> tuple[bool, str]:
    """Whether a script that did not pass failed the way the run did, and the sentence."""
    if ended == "memory":
        return check == "crashes", f"the script exceeded the memory limit ({last})"
    if check == "crashes" and status is not None and ended_with is not None:
        how = how_it_ended(ended_with)
        if ended_with == status:
            return True, f"verified: the script ends the same way ({how})"
        return False, (
            f"not verified: the target's process ended with {how_it_ended(status)}, the "
            f"script with {how} ({last})"
        )
    expected = "did not return within" if check == "returns" else f"{property_id}: "
    if check in ("raises", "crashes") or expected in output:
        return True, f"verified: the script fails ({last})"
    return False, f"not verified: the script fails for another reason ({last})"


def _last_line(output: str) -> str:
    """What the script failed with: the exception line of its last traceback (type and first
    meaningful line, never a library's footer), else its last line of output."""
    lines = output.strip().splitlines()
    frames = [k for k, line in enumerate(lines) if line.startswith("  File ")]
    after = lines[frames[-1] + 1 :] if frames else []
    raised = next((line for line in after if line.strip() and not line.startswith(" ")), "")
    if raised:
        kind, _, message = raised.partition(": ")
        line = f"{kind}: {first_line(message)}" if message else kind
    else:
        shown = [line.strip() for line in lines if line.strip()]
        line = shown[-1] if shown else "no output"
    return line if len(line) <= 200 else line[:197] + "..."


_HOST = """\
import ast, json, os, select, signal, sys
folder, requests, answers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sys.path[0] = folder
RUN = sys.argv[4]
children, imported, buffer = {}, set(), b""

def say(message):
    os.write(answers, (json.dumps(message) + "\\n").encode())

def preload(path):
    try:
        body = ast.parse(open(path, encoding="utf-8").read()).body
    except (OSError, SyntaxError, ValueError):
        return  # the script fails the same way in its own process
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and ast.dump(node) not in imported:
            imported.add(ast.dump(node))
            try:
                exec(compile(ast.Module([node], []), path, "exec"), {"__name__": "__preload__"})
            except BaseException:
                pass  # the script meets the same error in its own process

def start(number, path):
    preload(path)
    if len(os.listdir("/proc/self/task")) > 1:
        return say({"id": number, "fork": False})  # a thread would be lost in the fork
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            os.close(requests)
            os.close(answers)
            out = os.open(path + ".out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(out, 1)
            os.dup2(out, 2)
            sys.argv = ["-c", path]
            exec(compile(RUN, "<run>", "exec"), {"__name__": "__run__"})
        finally:
            os._exit(70)
    children[pid] = number
    say({"id": number, "pid": pid})

while True:
    ready, _, _ = select.select([requests], [], [], 0.02 if children else None)
    if ready:
        chunk = os.read(requests, 65536)
        if not chunk:
            break
        buffer += chunk
        while b"\\n" in buffer:
            line, _, buffer = buffer.partition(b"\\n")
            message = json.loads(line)
            if "preload" in message:
                preload(message["preload"])
            elif "kill" in message:
                for pid, number in children.items():
                    if number == message["kill"]:
                        try:
                            os.killpg(pid, signal.SIGKILL)
                        except OSError:
                            pass
            else:
                start(message["id"], message["path"])
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if not pid:
            break
        if pid in children:  # not a process an import started
            say({"id": children.pop(pid), "status": os.waitstatus_to_exitcode(status)})
for pid in children:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
"""
"""The process that imports what a script imports and forks a process per script: requests
on one descriptor (a script to run or only to import from, or a number to kill), answers on
another."""


class Verifier:
    """Verifies the reproducers of one run (thread-safe): as :func:`verify` does, a script
    first in a process forked from one that has imported what the script imports."""

    def __init__(
        self, *, memory_limit: int | None = DEFAULT_MEMORY_LIMIT, pythonpath: str | None = None
    ) -> None:
        self.memory_limit = memory_limit
        self.pythonpath = pythonpath
        self._lock = threading.Lock()
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._host: Contained | None = None
        self._requests = self._answers = -1
        self._waiting: dict[int, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self._numbers = 0
        self._broken = False
        """The host could not start, died, or runs a thread: every script runs fresh."""

    def verify(
        self,
        script: str,
        *,
        property_id: str,
        check: str,
        timeout: float,
        name: str | None = None,
        status: int | None = None,
    ) -> tuple[bool, str]:
        """(verified, what happened), as :func:`verify` says it."""
        name = name or f"test_{property_id}.py"
        forked = self._forked(script, name, property_id, check, timeout, status)
        if forked is not None:
            return forked
        return verify(
            script,
            property_id=property_id,
            check=check,
            timeout=timeout,
            memory_limit=self.memory_limit,
            name=name,
            pythonpath=self.pythonpath,
            status=status,
        )

    def prepare(self, script: str) -> None:
        """Start importing what ``script`` imports (one of the run's reproducers, or any script
        that imports as they do), so the first script verified does not wait for it. Returns
        at once: the host starts on a thread of its own, never in the caller's way (nor in
        the way of an interrupt the caller's thread must see)."""
        threading.Thread(
            target=self._prepare, args=(script,), name="ctxkit-verify-prepare", daemon=True
        ).start()

    def _prepare(self, script: str) -> None:
        with self._lock:
            if self._start():
                assert self._folder is not None
                path = Path(self._folder.name) / "imports.py"
                path.write_text(script, encoding="utf-8")
                self._send({"preload": str(path)})

    def _forked(
        self, script: str, name: str, property_id: str, check: str, timeout: float,
        status: int | None,
    ) -> tuple[bool, str] | None:  # fmt: skip
        """The verdict of the script run in a fork, when it fails as the run said; else None."""
        with self._lock:
            if not self._start():
                return None
            self._numbers += 1
            number = self._numbers
            done, answer = self._waiting[number] = (threading.Event(), [])
            assert self._folder is not None
            path = Path(self._folder.name) / name
            path.write_text(script, encoding="utf-8")
            sent = self._send({"id": number, "path": str(path)})
        if sent and not done.wait(timeout):
            if not any("pid" in a for a in answer):
                self._broken = True  # still importing: later scripts must not wait on it
            self._send({"kill": number})
            done.wait(5.0)
        self._waiting.pop(number, None)
        ended_with = next((a["status"] for a in answer if "status" in a), None)
        if ended_with is None or ended_with == 0:
            return None  # did not end, ended with the host, or passed: run fresh
        output = _head_and_tail(Path(f"{path}.out"))
        if out_of_memory_said(output.encode()[-8192:]):
            return None
        ended = "killed" if ended_with < 0 else "exited"
        verified, said = _judged(
            output, ended, ended_with, _last_line(output), property_id, check, status
        )
        return (verified, said) if verified else None

    def _start(self) -> bool:
        """The host running (started at the first script); False if it cannot be."""
        if self._broken:
            return False
        if self._host is not None:
            return True
        try:
            self._folder = tempfile.TemporaryDirectory(prefix="ctxkit-verify-")
            requests, self._requests = os.pipe()
            self._answers, answers = os.pipe()
            try:
                self._host = Contained(
                    [sys.executable, "-c", _HOST, self._folder.name, str(requests),
                     str(answers), _RUN_AND_LEAVE],
                    memory_limit=self.memory_limit,
                    env=_environment(self.pythonpath),
                    pass_fds=(requests, answers),
                    output_keep=4096,
                )  # fmt: skip
            finally:
                os.close(requests)
                os.close(answers)
        except OSError:
            self._broken = True
            if self._answers >= 0:  # no reader will close it
                os.close(self._answers)
            return False
        threading.Thread(target=self._read, name="ctxkit-verify-host", daemon=True).start()
        return True

    def _send(self, message: dict[str, Any]) -> bool:
        try:
            os.write(self._requests, json.dumps(message).encode() + b"\n")
        except OSError:
            self._broken = True
            return False
        return True

    def _read(self) -> None:
        """Hand each answer to the script waiting for it; at the host's end, wake them all."""
        buffer = b""
        while True:
            try:
                chunk = os.read(self._answers, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buffer += chunk
            while b"\n" in buffer:
                line, _, buffer = buffer.partition(b"\n")
                message = json.loads(line)
                waiting = self._waiting.get(message["id"])
                if waiting is None:
                    continue
                waiting[1].append(message)
                if "status" in message or message.get("fork") is False:
                    self._broken |= message.get("fork") is False
                    waiting[0].set()
        self._broken = True
        os.close(self._answers)  # here, once nothing reads it: never under a read
        for done, _answer in list(self._waiting.values()):
            done.set()

    def close(self) -> None:
        """End the host and whatever it still runs (the reader then sees the end of its
        answers and closes them); remove the scripts."""
        with self._lock:
            self._broken = True
            if self._requests >= 0:
                with contextlib.suppress(OSError):
                    os.close(self._requests)
            self._requests = -1
            if self._host is not None:
                self._host.close()
            if self._folder is not None:
                self._folder.cleanup()


def _head_and_tail(path: Path, keep: int = OUTPUT_KEEP) -> str:
    """What a forked script printed: its first and last ``keep`` bytes."""
    try:
        with path.open("rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size <= 2 * keep:
                return file.read().decode("utf-8", "replace")
            head = file.read(keep)
            file.seek(size - keep)
            tail = file.read()
    except OSError:
        return ""
    return (head + b"\n[... output dropped ...]\n" + tail).decode("utf-8", "replace")
