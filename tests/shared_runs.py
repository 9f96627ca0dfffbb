"""Expensive runs shared by every test that looks at them, across the xdist workers of one
test run: the first worker that needs a run makes it, holding a lock on its file, and the
others read its pickle instead of making it again.

The folder is made by the controlling process (``tests/conftest.py``) and named to the
workers in :data:`FOLDER_VARIABLE`; without it (a plain ``pytest -n 0`` in a worker-less
process, or a script) runs are shared within the process only.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

FOLDER_VARIABLE = "CTXKIT_TEST_SHARED_RUNS"

T = TypeVar("T")


def shared(function: Callable[..., T]) -> Callable[..., T]:
    """Like ``functools.cache`` (the arguments must be hashable and have a stable ``repr``),
    and across the workers of the run; the result must pickle."""
    memo: dict[Any, T] = {}

    @functools.wraps(function)
    def run(*args: Any) -> T:
        if args in memo:
            return memo[args]
        folder = os.environ.get(FOLDER_VARIABLE)
        if not folder:
            memo[args] = function(*args)
            return memo[args]
        name = repr((function.__module__, function.__qualname__, args)).encode()
        path = Path(folder) / (hashlib.sha256(name).hexdigest()[:32] + ".pickle")
        with open(path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the worker dies
            if path.exists():
                memo[args] = pickle.loads(path.read_bytes())
            else:
                memo[args] = function(*args)
                written = path.with_suffix(".part")
                written.write_bytes(pickle.dumps(memo[args]))
                written.replace(path)
        return memo[args]

    return run
