"""A conversation's history in PostgreSQL: the history file's records, one row each.

Two tables, created on first use::

    ctxkit_conversations (conversation text PRIMARY KEY, created float8, archived float8)
    ctxkit_records (conversation text, seq int8, op text, at float8, line text,
                    PRIMARY KEY (conversation, seq))

``ctxkit_records`` is append-only: row ``seq`` 1 is the header and every later row one change
(add, set, clear, checkpoint, restore, audit, state, task), its ``line`` exactly the line a
history file holds (:func:`~ctxkit.reference.journal.encode_record`: JSON with its CRC-32 and
the message's token counts), so opening never counts again, a row changed by hand is found,
and a conversation moves between a file and the database byte for byte.

One writer at a time: a manager holds a session advisory lock on its conversation for as long
as it is open, on a connection of its own that every change goes over. A second manager, on
this host or another, gets :class:`~ctxkit.reference.journal.HistoryFileLocked` naming the
holder (its process and host, from ``pg_stat_activity``), or waits ``lock_wait`` seconds for
it. Each change also names its ``seq``, the next after what the writer read, so two writers
can never interleave a conversation even if a lock were lost: the second's row is refused.

Each change is one committed row before the call returns (``fsync="never"`` commits without
waiting for the server's disk). A write that fails changes nothing the manager holds; a lost
connection is said (:class:`~ctxkit.reference.postgres.connection.StoreUnavailable`) and the
next change connects again, takes the lock again and checks that nobody wrote meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import Any

from ctxkit.reference.journal import (
    LOCK_POLL,
    HistoryFileCorrupt,
    HistoryFileError,
    HistoryFileLocked,
    Loaded,
    encode_record,
    new_header,
    parse_history,
)
from ctxkit.reference.postgres import connection as db

__all__ = ["SCHEMA", "DatabaseHistory", "conversation_label", "lock_key", "unlock_and_close"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS ctxkit_conversations (
    conversation text PRIMARY KEY,
    created double precision NOT NULL,
    archived double precision
);
CREATE TABLE IF NOT EXISTS ctxkit_records (
    conversation text NOT NULL,
    seq bigint NOT NULL,
    op text NOT NULL,
    at double precision NOT NULL,
    line text NOT NULL,
    PRIMARY KEY (conversation, seq)
);
"""
_SCHEMA_LOCK = 0x6374786B6974  # "ctxkit": creating the tables is one process at a time
_LOCK_KEY = "SELECT hashtextextended('ctxkit conversation ' || %s, 0)"

_ready: set[str] = set()
"""Databases whose tables this process has made sure of."""


def conversation_label(url: str, conversation: str) -> str:
    """How messages name a conversation in a database: ``URL#conversation``."""
    return f"{db.display_url(url)}#{conversation}"


async def ensure_schema(connection: Any, url: str) -> None:
    """Create the tables if they are missing (once per database per process)."""
    if url in _ready:
        return
    async with connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        await connection.execute(SCHEMA)
    _ready.add(url)


async def lock_key(connection: Any, conversation: str) -> int:
    """The advisory lock's key of ``conversation`` (a 64-bit hash of its name)."""
    row = await (await connection.execute(_LOCK_KEY, (conversation,))).fetchone()
    return int(row[0])


async def lock_holders(connection: Any, key: int | None = None) -> dict[int, str]:
    """Who holds each advisory lock of this database (only ``key``'s when given), by key:
    ``ctxkit pid N on HOST (from ADDRESS, since TIME)``."""
    one = "" if key is None else " AND ((l.classid::bigint << 32) | l.objid::bigint) = %s"
    cursor = await connection.execute(
        """
        SELECT ((l.classid::bigint << 32) | l.objid::bigint), a.application_name,
               host(a.client_addr), a.backend_start, a.pid
        FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        """
        + one,
        () if key is None else (key,),
    )
    holders = {}
    for held, name, address, since, backend in await cursor.fetchall():  # (a shift wraps)
        who = name or f"server process {backend}"
        where = f"from {address}, " if address else ""
        holders[held] = f"{who} ({where}since {since:%Y-%m-%d %H:%M:%S %Z})"
    return holders


async def lock_holder(connection: Any, key: int) -> str | None:
    """Who holds the lock ``key`` (see :func:`lock_holders`), or None."""
    return (await lock_holders(connection, key)).get(key)


async def read_lines(connection: Any, conversation: str) -> list[tuple[int, str]]:
    """Every row of ``conversation``: ``(seq, line)`` in order."""
    cursor = await connection.execute(
        "SELECT seq, line FROM ctxkit_records WHERE conversation = %s ORDER BY seq",
        (conversation,),
    )
    return await cursor.fetchall()


async def unlock_and_close(connection: Any, key: int) -> None:
    """Unlock, then close: the server ends a closed session a moment later, and whoever opens
    the conversation right after this returned must find it free."""
    if not connection.closed:
        with contextlib.suppress(Exception):  # a broken connection: its session ends anyway
            await connection.execute("SELECT pg_advisory_unlock(%s)", (key,))
    with contextlib.suppress(Exception):
        await connection.close()


def _line(record: Mapping[str, Any]) -> str:
    """The row's ``line``: the history file's line for ``record``, without its newline."""
    return encode_record(record)[:-1].decode("ascii")


def parse_rows(label: str, rows: list[tuple[int, str]]) -> Loaded:
    """The rows of one conversation read as its history file would be (checksums, ops,
    header), every seq in its place; raises :class:`HistoryFileCorrupt` naming the row."""
    for expected, (seq, _) in enumerate(rows, start=1):
        if seq != expected:
            raise HistoryFileCorrupt(label, expected, -1, f"is missing (the next row is seq {seq})")
    data = "".join(line + "\n" for _, line in rows).encode("ascii", "surrogateescape")
    loaded = parse_history(label, data)  # type: ignore[arg-type]  # named by its label
    if loaded.torn is not None:  # a row is written whole: a bad last one is damage too
        raise HistoryFileCorrupt(label, loaded.torn.line, -1, loaded.torn.reason)
    return loaded


class DatabaseHistory:
    """The open, locked conversation of one manager in a database: read once, then appended
    to, as :class:`~ctxkit.reference.journal.HistoryFile` is (the same methods)."""

    checksums = True
    torn = None

    def __init__(
        self,
        url: str,
        conversation: str,
        *,
        conversation_id: str | None = None,
        encoding: str,
        fsync: str = "always",
        lock_wait: float = 0.0,
    ) -> None:
        self.url = url
        self.conversation = conversation
        self.fsync = fsync
        self.lock_wait = lock_wait
        self.path = conversation_label(url, conversation)
        """What messages call it (the file store's ``path``)."""
        self._connection: Any = None
        self._key = 0
        self._closed = False
        self.end = 0
        """Rows written: the seq of the last."""
        self.loaded = db.call(self._open(conversation_id or conversation, encoding))

    @property
    def closed(self) -> bool:
        return self._closed

    async def _open(self, conversation_id: str, encoding: str) -> Loaded:
        connection = await self._connect()
        try:
            rows = await read_lines(connection, self.conversation)
            loaded = parse_rows(self.path, rows)
            self.end = len(rows)
            if loaded.header is None:
                header = new_header(conversation_id, encoding)
                async with connection.transaction():
                    await connection.execute(
                        "INSERT INTO ctxkit_conversations (conversation, created) VALUES (%s, %s)"
                        " ON CONFLICT DO NOTHING",
                        (self.conversation, header["created"]),
                    )
                    await self._insert(connection, 1, "header", header["created"], _line(header))
                self.end = 1
                loaded.header = header
            else:  # opened again: no longer archived (ctxkit contexts expire)
                await connection.execute(
                    "UPDATE ctxkit_conversations SET archived = NULL "
                    "WHERE conversation = %s AND archived IS NOT NULL",
                    (self.conversation,),
                )
        except BaseException as exc:
            await connection.close()
            if isinstance(exc, db._psycopg().OperationalError):
                raise db.unreachable(self.url, exc) from None
            raise
        self._connection = connection
        return loaded

    async def _connect(self) -> Any:
        """A new connection holding the conversation's lock (waiting ``lock_wait`` for it)."""
        connection = await db.connect(self.url, fsync=self.fsync)
        try:
            await ensure_schema(connection, self.url)
            self._key = await lock_key(connection, self.conversation)
            deadline = time.monotonic() + self.lock_wait
            while True:
                cursor = await connection.execute("SELECT pg_try_advisory_lock(%s)", (self._key,))
                if (await cursor.fetchone())[0]:
                    break
                if time.monotonic() >= deadline:
                    holder = await lock_holder(connection, self._key)
                    by = f" by {holder}" if holder else ""
                    waited = f" (waited {self.lock_wait:g} s)" if self.lock_wait else ""
                    raise HistoryFileLocked(
                        f"{self.path} is open{by}{waited}: one manager at a time may write a "
                        "conversation. Close the other manager (manager.close()), give this "
                        "one lock_wait=SECONDS to wait for it, or another conversation."
                    )
                await asyncio.sleep(LOCK_POLL)  # the file store's pace
        except BaseException as exc:
            await connection.close()
            if isinstance(exc, db._psycopg().OperationalError):
                raise db.unreachable(self.url, exc) from None
            raise
        return connection

    async def _insert(self, connection: Any, seq: int, op: str, at: float, line: str) -> None:
        await connection.execute(
            "INSERT INTO ctxkit_records (conversation, seq, op, at, line) "
            "VALUES (%s, %s, %s, %s, %s)",
            (self.conversation, seq, op, at, line),
        )

    def append(self, record: Mapping[str, Any]) -> int:
        """Write one record as the next row, committed; returns the rows written. All or
        nothing: on any failure the row is not there and :class:`HistoryFileError` says why."""
        line = _line(record)  # a record that is not JSON raises TypeError before any I/O
        if self._closed:
            raise HistoryFileError(f"{self.path}: the conversation is closed")
        op, at = str(record.get("op")), float(record.get("at", 0))
        try:
            self.end = db.call(self._append(op, at, line))
        except db.StoreTimeout as exc:
            # No answer in time: whether the row was committed is not known. The connection
            # goes, so the next change connects again and checks where the rows end.
            with contextlib.suppress(Exception):
                db.call(self._drop(), timeout=5)
            raise db.StoreTimeout(
                f"{self.path}: {exc}; the change was not made here (if the server committed it "
                "after all, the next change finds it and refuses: open the conversation again)"
            ) from None
        return self.end

    async def _append(self, op: str, at: float, line: str) -> int:
        psycopg = db._psycopg()
        if self._connection is None or self._connection.closed:
            await self._reconnect()
        seq = self.end + 1
        try:
            await self._insert(self._connection, seq, op, at, line)
        except psycopg.errors.UniqueViolation:
            raise HistoryFileLocked(
                f"{self.path}: row {seq} was written by another writer: this manager no "
                "longer holds the conversation; open it again to read what was written"
            ) from None
        except psycopg.OperationalError as exc:
            await self._drop()
            raise db.unreachable(self.url, exc) from None
        return seq

    async def _reconnect(self) -> None:
        """After a lost connection: connect, take the lock again, and make sure nothing was
        written since (else the change is refused: this manager's history is not the one
        stored any more)."""
        connection = await self._connect()
        try:
            cursor = await connection.execute(
                "SELECT coalesce(max(seq), 0) FROM ctxkit_records WHERE conversation = %s",
                (self.conversation,),
            )
            stored = (await cursor.fetchone())[0]
        except BaseException:
            await connection.close()
            raise
        if stored != self.end:
            await connection.close()
            raise HistoryFileLocked(
                f"{self.path}: holds {stored} rows, this manager wrote {self.end}: it changed "
                "while the connection was lost (another writer, or a change whose answer was "
                "lost). Open it again to read what is stored."
            )
        self._connection = connection

    async def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):  # already broken
                await connection.close()

    def sync(self) -> None:
        """Nothing to do: every row was committed when it was written."""

    def close(self) -> None:
        """Release the lock and the connection; appending after this raises."""
        if self._closed:
            return
        self._closed = True
        # Should the server not answer, it drops the session, and its lock, when the socket goes.
        with contextlib.suppress(HistoryFileError, RuntimeError):
            db.call(self._release(), timeout=10)

    async def _release(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await unlock_and_close(connection, self._key)
