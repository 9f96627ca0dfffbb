"""Check a reproducer before it is printed: run it in a fresh process against the target and
see it fail for the reason the run gave."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["verify"]

_OUTPUT_KEPT = 4_000


def verify(script: str, *, property_id: str, check: str, timeout: float) -> tuple[bool, str]:
    """(verified, what happened): run the script as ``python script.py`` from the current
    directory (where the target imports from), at most ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix="ctxkit-verify-") as folder:
        path = Path(folder) / f"reproduce_{property_id}.py"
        path.write_text(script, encoding="utf-8")
        paths = [os.getcwd(), os.environ.get("PYTHONPATH", "")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))
        process = subprocess.Popen(
            [sys.executable, str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        try:
            raw, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            process.communicate()
            return False, f"not verified: the script did not end within {timeout:.0f} s"
        finally:
            _kill_group(process.pid)
    output = raw.decode("utf-8", "replace")[-_OUTPUT_KEPT:]
    code = process.returncode
    last = _last_line(output)
    if code == 0:
        return False, (
            "not verified: the script passed when run again (the target answers the same "
            "calls differently, or depends on state outside the calls)"
        )
    expected = "did not return within" if check == "returns" else f"{property_id}: "
    if check in ("raises", "crashes") or expected in output:
        return True, f"verified: the script fails ({last})"
    return False, f"not verified: the script fails for another reason ({last})"


def _last_line(output: str) -> str:
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    line = lines[-1] if lines else "no output"
    return line if len(line) <= 200 else line[:197] + "..."


def _kill_group(pid: int) -> None:
    """The script and whatever it started in its session."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
