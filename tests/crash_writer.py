"""The writer side of the crash test (tests/test_crash.py), run as ``python -m tests.crash_writer``.

It imports ctxkit and loads the tokenizer once, then for every ``go PATH FSYNC`` line on stdin
(PATH a history file, or ``URL#CONVERSATION`` for a PostgreSQL store) forks a writer (so a
round starts in milliseconds, not the half second a new interpreter takes).
The writer says ``pid N`` first, opens a manager on PATH, says ``open N TORN`` (messages loaded,
bytes of torn tail found), then adds ``message(i)`` for i = N, N+1, ... as fast as it can, saying
``ack i`` after each ``add_message`` returns. The parent kills the writer with SIGKILL whenever
it likes; this process then says ``exit STATUS``. Every line is one ``os.write`` of under
PIPE_BUF bytes, so lines from the two processes never interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sys
from typing import Any

from ctxkit.reference import ReferenceContextManager
from ctxkit.tokens import load_encoding


def message(i: int) -> dict[str, Any]:
    """The i-th message: prose of sizes from a few bytes to 64 KiB, and tool call pairs, so
    writes are small and large and a unit can be cut off between call and result."""
    rng = random.Random(i)
    size = int(10 ** rng.uniform(1, 4.8))
    text = f"{i}:" + "".join(rng.choice("abcdefgh \n") for _ in range(min(size, 200)))
    text = (text * (size // len(text) + 1))[:size]
    if i % 5 == 3:
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    if i % 5 == 4:
        return {"role": "tool", "tool_call_id": f"call_{i - 1}", "content": text}
    return {"role": "user" if i % 5 != 1 else "assistant", "content": text}


def say(line: str) -> None:
    os.write(1, (line + "\n").encode())


def where(path: str) -> dict[str, Any]:
    """The manager options of ``go``'s PATH: a history file, or ``URL#CONVERSATION``."""
    if path.startswith("postgresql://"):
        url, _, conversation = path.partition("#")
        return {"store": url, "conversation": conversation}
    return {"storage_path": path}


async def write_forever(path: str, fsync: str) -> None:
    manager = ReferenceContextManager(**where(path), fsync=fsync)
    start = len(await manager.get_messages())
    say(f"open {start} {manager.torn.length if manager.torn else 0}")
    i = start
    while True:
        await manager.add_message(message(i))
        say(f"ack {i}")
        i += 1


def main() -> None:
    load_encoding()  # once, here: every forked writer starts with it loaded
    with contextlib.suppress(ImportError):  # and psycopg, where the postgres extra is
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    for line in sys.stdin:
        _, path, fsync = line.split()
        pid = os.fork()
        if pid == 0:
            say(f"pid {os.getpid()}")
            try:
                asyncio.run(write_forever(path, fsync))
            except BaseException as exc:  # reported, then the writer ends
                say(f"error {type(exc).__name__}: {exc}")
            os._exit(3)
        _, status = os.waitpid(pid, 0)
        say(f"exit {status}")


if __name__ == "__main__":
    main()
