"""Check a reproducer before it is printed: run it in a fresh process against the target and
see it fail for the reason the run gave, or, for calls that ended the target's process, end
the same way (the same signal or exit status).

The script runs contained like the target itself (:mod:`.sandbox`): its own session, the same
memory cap, output kept to head and tail, and nothing it starts outlives it. It runs as
``python script.py`` would, except that the process leaves as soon as the script is done:
a thread the target left running does not hold the check up until its timeout.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from ctxkit.conformance.reports.reproducer import PROJECT_VARIABLE
from ctxkit.conformance.targets.sandbox import DEFAULT_MEMORY_LIMIT, run_contained
from ctxkit.conformance.targets.worker_client import first_line, how_it_ended

__all__ = ["verify"]

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
        paths = [os.getcwd(), pythonpath or "", os.environ.get("PYTHONPATH", "")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))
        env[PROJECT_VARIABLE] = os.getcwd()
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
