"""Check a reproducer before it is printed: run it in a fresh process against the target and
see it fail for the reason the run gave.

The script runs contained like the target itself (:mod:`.sandbox`): its own session, the same
memory cap, output kept to head and tail, and nothing it starts outlives it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from ctxkit.conformance.sandbox import DEFAULT_MEMORY_LIMIT, run_contained

__all__ = ["verify"]


def verify(
    script: str,
    *,
    property_id: str,
    check: str,
    timeout: float,
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
) -> tuple[bool, str]:
    """(verified, what happened): run the script as ``python script.py`` from the current
    directory (where the target imports from), at most ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix="ctxkit-verify-") as folder:
        path = Path(folder) / f"reproduce_{property_id}.py"
        path.write_text(script, encoding="utf-8")
        paths = [os.getcwd(), os.environ.get("PYTHONPATH", "")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))
        status, output, ended = run_contained(
            [sys.executable, str(path)], timeout=timeout, memory_limit=memory_limit, env=env
        )
    last = _last_line(output)
    if ended == "timeout":
        return False, f"not verified: the script did not end within {timeout:.0f} s"
    if status == 0:
        return False, (
            "not verified: the script passed when run again (the target answers the same "
            "calls differently, or depends on state outside the calls)"
        )
    if ended == "memory":
        return check == "crashes", f"the script exceeded the memory limit ({last})"
    expected = "did not return within" if check == "returns" else f"{property_id}: "
    if check in ("raises", "crashes") or expected in output:
        return True, f"verified: the script fails ({last})"
    return False, f"not verified: the script fails for another reason ({last})"


def _last_line(output: str) -> str:
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    line = lines[-1] if lines else "no output"
    return line if len(line) <= 200 else line[:197] + "..."
