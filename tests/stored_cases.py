"""Stored conversations for the lifecycle and ``ctxkit contexts`` tests: real history files
written by real managers, and a second process that holds one open."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from ctxkit.reference import ReferenceContextManager
from ctxkit.reference.journal import encode_record
from tests.chat import CHAT

__all__ = ["CHAT", "ROOT", "T0", "Holder", "append", "append_record", "store"]

ROOT = Path(__file__).resolve().parents[1]

T0 = 1_800_000_000.0
"""The time the stored records say they were written (the managers' clock)."""


def store(
    directory: Path,
    name: str,
    messages: list[dict[str, Any]] = CHAT,
    *,
    at: float = T0,
    checkpoint: str | None = None,
) -> Path:
    """Write ``messages`` to ``directory/<name>.jsonl`` through a real manager whose clock
    says ``at``; returns the path. The manager is closed again."""
    path = directory / f"{name}.jsonl"

    async def write() -> None:
        async with ReferenceContextManager(
            storage_path=path, conversation_id=name, clock=lambda: at, fsync="never"
        ) as manager:
            for message in messages:
                await manager.add_message(message)
            if checkpoint is not None:
                await manager.checkpoint(checkpoint)

    asyncio.run(write())
    return path


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as file:
        file.write(data)


def append_record(path: Path, record: dict[str, Any]) -> None:
    append(path, encode_record(record))


HOLDER = textwrap.dedent(
    """
    import sys
    from ctxkit.reference import ReferenceContextManager

    manager = ReferenceContextManager(storage_path=sys.argv[1])
    print("ready", flush=True)
    sys.stdin.read()
    manager.close()
    """
)


class Holder:
    """Another process with a real manager open on ``path`` until :meth:`stop`."""

    def __init__(self, path: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(path)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.process.stdout.readline() if self.process.stdout else ""
        if line.strip() != "ready":
            _, err = self.process.communicate(timeout=30)
            raise RuntimeError(f"the holder did not start: {err!r}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.communicate(timeout=30)
