"""Where a test keeps a conversation: a history file or a PostgreSQL database, behind one
face, so the persistence tests run on both stores (parametrized, not copied)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from ctxkit.reference import HistoryFileLocked, ReferenceContextManager
from ctxkit.reference.journal import encode_record, read_history_file

__all__ = ["STORES", "DatabasePlace", "FilePlace", "opened_after_crash", "place_for"]

STORES = ["file", "postgresql"]


class FilePlace:
    """A conversation in a history file: ``DIR/<name>.jsonl``."""

    kind = "file"

    def __init__(self, folder: Path, name: str = "c") -> None:
        self.name = name
        self.path = folder / f"{name}.jsonl"
        self.config: dict[str, Any] = {"storage_path": str(self.path)}
        """The manager options that name it (a mount() config's too)."""
        self.location = str(self.path)
        """How tests/crash_writer.py is told where it is."""

    def open(self, **config: Any) -> ReferenceContextManager:
        return ReferenceContextManager(**{"fsync": "never", **self.config, **config})

    def records(self) -> list[dict[str, Any]]:
        """Every record stored, oldest first (the header not among them)."""
        return read_history_file(self.path).records

    def other(self, name: str) -> FilePlace:
        return FilePlace(self.path.parent, name)

    def append_records(self, records: list[dict[str, Any]]) -> None:
        """Write records as a writer would, without a manager (to store what none would)."""
        with self.path.open("ab") as file:
            file.write(b"".join(encode_record(record) for record in records))


class DatabasePlace:
    """A conversation in a database, named uniquely (the tests share one cluster)."""

    kind = "postgresql"

    def __init__(self, url: str, name: str | None = None) -> None:
        self.url = url
        self.name = name or f"c-{uuid.uuid4().hex[:10]}"
        self.config = {"store": url, "conversation": self.name}
        self.location = f"{url}#{self.name}"

    def open(self, **config: Any) -> ReferenceContextManager:
        return ReferenceContextManager(**{"fsync": "never", **self.config, **config})

    def records(self) -> list[dict[str, Any]]:
        from ctxkit.reference.postgres import connection as db
        from ctxkit.reference.postgres.history import parse_rows, read_lines

        async def rows() -> list[tuple[int, str]]:
            pool = await db.pool(self.url)
            async with pool.connection() as connection:
                return await read_lines(connection, self.name)

        return parse_rows(self.name, db.call(rows())).records

    def other(self, name: str) -> DatabasePlace:
        return DatabasePlace(self.url, f"{self.name}-{name}")

    def append_records(self, records: list[dict[str, Any]]) -> None:
        """Write records as the next rows, as a writer would, without a manager."""
        from ctxkit.reference.postgres import connection as db

        async def insert() -> None:
            pool = await db.pool(self.url)
            async with pool.connection() as connection:
                cursor = await connection.execute(
                    "SELECT max(seq) FROM ctxkit_records WHERE conversation = %s", (self.name,)
                )
                end = (await cursor.fetchone())[0]
                for seq, record in enumerate(records, start=end + 1):
                    await connection.execute(
                        "INSERT INTO ctxkit_records VALUES (%s, %s, %s, %s, %s)",
                        (self.name, seq, record["op"], record["at"], _line(record)),
                    )

        db.call(insert())


def place_for(request: pytest.FixtureRequest, kind: str, folder: Path) -> FilePlace | DatabasePlace:
    """A new place of ``kind``: a file in ``folder``, or a conversation in the session's
    cluster (the ``postgres`` fixture)."""
    if kind == "file":
        return FilePlace(folder)
    return DatabasePlace(request.getfixturevalue("postgres").url)


def opened_after_crash(place: FilePlace | DatabasePlace, **config: Any) -> ReferenceContextManager:
    """A manager on ``place`` once a killed holder's lock is gone: at once for a file (the
    kernel drops an flock with its process), within moments for a database (the server ends
    the session when it sees the connection close)."""
    deadline = time.monotonic() + 15
    while True:
        try:
            return place.open(**config)
        except HistoryFileLocked:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _line(record: dict[str, Any]) -> str:
    return encode_record(record)[:-1].decode("ascii")
