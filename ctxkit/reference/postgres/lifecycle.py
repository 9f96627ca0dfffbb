"""Stored conversations in a database over time, as :mod:`ctxkit.reference.lifecycle` tells
them for a directory: list, show, archive; and copying a conversation between a history file
and a database.

A conversation's state comes from its last row's ``at`` (the same rule as a file's last
record). Archiving marks it (``ctxkit_conversations.archived``), never deletes a row; a manager
that opens it again takes the mark off. A listing reads each conversation's first and last
rows and takes no lock; ``show`` and ``copy`` read every row and check its checksum.

Copying takes the source's lock (file or database) for the copy, so no writer changes it
meanwhile, writes the destination whole (a database's rows in one transaction; a file to a
temporary name, synced, then linked to its name, so it appears whole or not at all), then
reads the destination back and checks it holds the source's records line for line. A
destination that exists is never overwritten.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxkit.reference.journal import (
    HistoryFileError,
    HistoryFileLocked,
    Loaded,
    encode_record,
    lock,
    read_history_file,
    sync_directory,
)
from ctxkit.reference.lifecycle import (
    DEFAULT_IDLE_AFTER,
    DEFAULT_TTL,
    Action,
    StoredConversation,
    UnknownConversation,
    expired,
    state_of,
    stored_details,
    unknown_conversation,
)
from ctxkit.reference.postgres import connection as db
from ctxkit.reference.postgres.history import (
    conversation_label,
    lock_holders,
    lock_key,
    parse_rows,
    read_lines,
    unlock_and_close,
)

__all__ = ["Copied", "cleanup", "copy_conversation", "details", "scan", "split_location"]


def split_location(text: str) -> tuple[str, str | None]:
    """``URL#conversation`` as ``(URL, conversation)``; the conversation None without ``#``."""
    url, hash_, name = text.partition("#")
    return url, (name if hash_ and name else None)


async def _has_tables(connection: Any) -> bool:
    cursor = await connection.execute(
        "SELECT to_regclass('ctxkit_records') IS NOT NULL "
        "AND to_regclass('ctxkit_conversations') IS NOT NULL"
    )
    return bool((await cursor.fetchone())[0])


async def _with_connection(url: str, work: Any) -> Any:
    psycopg = db._psycopg()
    try:
        pool = await db.pool(url)
        async with pool.connection() as connection:
            return await work(connection)
    except psycopg.OperationalError as exc:
        raise db.unreachable(url, exc) from None


_LISTING = """
SELECT c.conversation, c.created, c.archived,
       (SELECT r.at FROM ctxkit_records r WHERE r.conversation = c.conversation
        ORDER BY r.seq DESC LIMIT 1),
       (SELECT sum(length(r.line) + 1) FROM ctxkit_records r
        WHERE r.conversation = c.conversation),
       (SELECT r.line FROM ctxkit_records r WHERE r.conversation = c.conversation AND r.seq = 1),
       hashtextextended('ctxkit conversation ' || c.conversation, 0)
FROM ctxkit_conversations c
"""


def scan(
    url: str,
    *,
    now: float | None = None,
    idle_after: float = DEFAULT_IDLE_AFTER,
    ttl: float = DEFAULT_TTL,
    archived: bool = False,
    names: Iterable[str] | None = None,
) -> list[StoredConversation]:
    """Every conversation in the database (archived ones too with ``archived``; only
    ``names`` when given), by name."""
    now = time.time() if now is None else now
    wanted = None if names is None else list(names)

    async def work(connection: Any) -> list[StoredConversation]:
        if not await _has_tables(connection):
            return []
        sql, arguments = _LISTING, []
        if wanted is not None:
            sql, arguments = sql + " WHERE c.conversation = ANY(%s)", [wanted]
        cursor = await connection.execute(sql + " ORDER BY c.conversation", arguments)
        rows = await cursor.fetchall()
        holders = await lock_holders(connection)
        found = []
        for name, created, marked, last, size, first, key in rows:
            if marked is not None and not archived and wanted is None:
                continue
            header = _header(first)
            state, reason = state_of(
                last if last is not None else created,
                now=now,
                idle_after=idle_after,
                ttl=ttl,
                archived=marked is not None,
            )
            found.append(
                StoredConversation(
                    id=name,
                    path=conversation_label(url, name),
                    state=state,
                    last_activity=last if last is not None else created,
                    created=created,
                    size_bytes=int(size or 0),
                    open_by=holders.get(key),
                    encoding=header.get("encoding"),
                    conversation_id=header.get("conversation_id"),
                    reason=reason,
                )
            )
        return found

    return db.call(_with_connection(url, work))


def _header(line: str | None) -> dict[str, Any]:
    try:
        header = json.loads(line) if line else {}
    except ValueError:
        return {}
    return header if isinstance(header, dict) else {}


def _unknown(url: str, name: str, known: list[str]) -> UnknownConversation:
    return unknown_conversation(name, db.display_url(url), known)


def details(url: str, name: str, *, newest: int = 5) -> dict[str, Any]:
    """A full read of one conversation, every row's checksum checked (see
    :func:`ctxkit.reference.lifecycle.details`). Raises
    :class:`~ctxkit.reference.lifecycle.UnknownConversation`, or
    :class:`~ctxkit.reference.journal.HistoryFileError` for rows that are not a whole history."""

    async def work(connection: Any) -> list[tuple[int, str]]:
        return await read_lines(connection, name) if await _has_tables(connection) else []

    rows = db.call(_with_connection(url, work))
    if not rows:
        raise _unknown(url, name, [found.id for found in scan(url, archived=True)])
    label = conversation_label(url, name)
    loaded = parse_rows(label, rows)
    if loaded.header is None:
        raise HistoryFileError(f"{label}: row 1 is not a header, so not a ctxkit history")
    return stored_details(
        loaded,
        name=name,
        where=label,
        size=sum(len(line) + 1 for _, line in rows),
        set_aside=None,
        memory=None,
        newest=newest,
    )


def cleanup(
    url: str,
    *,
    ttl: float = DEFAULT_TTL,
    now: float | None = None,
    ids: Iterable[str] | None = None,
    dry_run: bool = False,
) -> list[Action]:
    """Archive every expired conversation of the database, or exactly those named by ``ids``,
    as :func:`ctxkit.reference.lifecycle.cleanup` does for a directory: never deletes, skips
    (naming the holder) one a manager has open, holding each one's lock while it marks it."""
    if isinstance(ids, str):
        raise TypeError(f"ids must be a list of ids, not the string {ids!r}")
    now = time.time() if now is None else now
    if ids is None:
        chosen = expired(scan(url, now=now, ttl=ttl), now=now, ttl=ttl)
    else:
        names = list(dict.fromkeys(ids))
        found_by_name = {found.id: found for found in scan(url, now=now, names=names)}
        for name in names:
            if name not in found_by_name:
                raise _unknown(url, name, [found.id for found in scan(url, archived=True)])
            if found_by_name[name].state == "archived":
                raise UnknownConversation(f"{name!r} is archived already")
        chosen = [(found_by_name[name], "named") for name in names]
    if dry_run:
        return [
            Action(found.id, found.path, "skipped", f"open by {found.open_by}", open=True,
                   open_by=found.open_by)
            if found.open_by is not None
            else Action(found.id, found.path, "would_archive", reason, f"{found.path} (archived)")
            for found, reason in chosen
        ]  # fmt: skip

    async def archive(found: StoredConversation, reason: str) -> Action:
        connection = await db.connect(url)
        key = 0
        try:
            key = await lock_key(connection, found.id)
            cursor = await connection.execute("SELECT pg_try_advisory_lock(%s)", (key,))
            if not (await cursor.fetchone())[0]:
                holder = await lock_holders(connection, key)
                who = holder.get(key, "another process")
                return Action(
                    found.id, found.path, "skipped", f"open by {who}", open=True, open_by=who
                )
            if ids is None:  # still expired once locked? (a writer may have come back)
                cursor = await connection.execute(
                    "SELECT at FROM ctxkit_records WHERE conversation = %s "
                    "ORDER BY seq DESC LIMIT 1",
                    (found.id,),
                )
                row = await cursor.fetchone()
                if row is not None and now - row[0] < ttl:
                    return Action(found.id, found.path, "skipped", "written to meanwhile")
            await connection.execute(
                "UPDATE ctxkit_conversations SET archived = %s WHERE conversation = %s",
                (time.time(), found.id),
            )
            return Action(found.id, found.path, "archived", reason, f"{found.path} (archived)")
        finally:
            await unlock_and_close(connection, key)

    async def all_of() -> list[Action]:
        return [await archive(found, reason) for found, reason in chosen]

    return db.call(all_of())


# -- copying -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Copied:
    """What :func:`copy_conversation` wrote: where from and to, how many records (the header
    not among them) and messages, and that the destination was read back and matched."""

    source: str
    destination: str
    records: int
    messages: int
    verified: bool

    def describe(self) -> str:
        check = "read back and checked line by line" if self.verified else "not checked"
        return (
            f"copied {self.source} -> {self.destination}: {self.records} records, "
            f"{self.messages} messages in the current history; {check}"
        )


def copy_conversation(source: str, destination: str) -> Copied:
    """Copy a conversation from a history file into a database (``URL#conversation``; the
    file's name without ``.jsonl`` when no ``#`` is given) or from a database into a file.
    Raises :class:`~ctxkit.reference.journal.HistoryFileError` (and its ``Locked``) in one
    sentence: a source open by a writer, a destination that exists, damage in the source."""
    if db.is_database_url(source) == db.is_database_url(destination):
        raise ValueError(
            "copy moves a conversation between a history file and a database: one of SOURCE "
            "and DESTINATION is a postgresql:// URL, the other a file"
        )
    if db.is_database_url(destination):
        path = Path(source)
        url, name = split_location(destination)
        name = name or path.name.removesuffix(".jsonl")
        db.check_url(url)
        with _file_locked(path):
            loaded = read_history_file(path)
            lines = _lines(loaded, path)
            db.call(_write_rows(url, name, lines))
            back = db.call(_with_connection(url, lambda c: read_lines(c, name)))
        copied = [line for _, line in back]
        target = conversation_label(url, name)
    else:
        url, name = split_location(source)
        if name is None:
            raise ValueError(f"which conversation of {db.display_url(url)}? give URL#NAME")
        db.check_url(url)
        path = Path(destination)
        if path.is_dir() or destination.endswith("/"):
            path = path / f"{name}.jsonl"
        rows = db.call(_read_locked(url, name))
        loaded = parse_rows(conversation_label(url, name), rows)
        lines = [line for _, line in rows]
        _write_file(path, lines)
        copied = [line.rstrip("\n") for line in path.read_text("ascii").splitlines()]
        target = str(path)
    if copied != lines:
        raise HistoryFileError(
            f"{target}: what was read back differs from what was copied; the destination is "
            "left for inspection, the source is unchanged"
        )
    messages = _current_messages(loaded)
    return Copied(
        source=source if not db.is_database_url(source) else db.display_url(source),
        destination=target,
        records=len(lines) - 1,
        messages=messages,
        verified=True,
    )


def _lines(loaded: Loaded, path: Path) -> list[str]:
    """The file's lines as a database stores them: each with its checksum (a version 1 file's
    records get theirs, and its header becomes version 2's)."""
    if loaded.header is None:
        raise HistoryFileError(f"{path}: no whole header, so not a ctxkit history (yet)")
    if loaded.torn is not None:
        raise HistoryFileError(
            f"{path}: ends in a torn line (a crash cut an append short); open it with a "
            "manager first, which sets the line aside, then copy"
        )
    header = {**loaded.header, "version": 2}
    return [encode_record(record)[:-1].decode("ascii") for record in [header, *loaded.records]]


def _current_messages(loaded: Loaded) -> int:
    from ctxkit.reference.timeline import Timeline

    timeline = Timeline()
    timeline.replay(loaded.path, loaded.records, recount=None)
    return len(timeline.current()[0])


@contextlib.contextmanager
def _file_locked(path: Path) -> Iterator[None]:
    """The history file's lock held (no writer meanwhile), taken without waiting."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise HistoryFileError(f"{path}: no such history file") from None
    except OSError as exc:
        raise HistoryFileError(f"{path}: cannot open: {exc.strerror}") from None
    try:
        lock(fd, path, "close its manager before copying it")
        yield
    finally:
        os.close(fd)


async def _write_rows(url: str, name: str, lines: list[str]) -> None:
    """A new conversation of these lines, in one transaction, under its lock."""
    connection = await db.connect(url)
    try:
        from ctxkit.reference.postgres.history import ensure_schema

        await ensure_schema(connection, url)
        key = await lock_key(connection, name)
        async with connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
            cursor = await connection.execute(
                "SELECT count(*) FROM ctxkit_records WHERE conversation = %s", (name,)
            )
            if (await cursor.fetchone())[0]:
                raise HistoryFileError(
                    f"{conversation_label(url, name)} exists already: nothing was copied "
                    "(copy to another name: URL#NAME)"
                )
            header = json.loads(lines[0])
            await connection.execute(
                "INSERT INTO ctxkit_conversations (conversation, created) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING",
                (name, float(header.get("created") or time.time())),
            )
            async with connection.cursor() as cursor:
                await cursor.executemany(
                    "INSERT INTO ctxkit_records (conversation, seq, op, at, line) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    [
                        (name, seq, *_op_and_at(line, seq), line)
                        for seq, line in enumerate(lines, start=1)
                    ],
                )
    finally:
        await connection.close()


def _op_and_at(line: str, seq: int) -> tuple[str, float]:
    record = json.loads(line)
    if seq == 1:
        return "header", float(record.get("created") or 0)
    return str(record["op"]), float(record["at"])


async def _read_locked(url: str, name: str) -> list[tuple[int, str]]:
    """Every row of the conversation, read under its lock (no writer meanwhile)."""
    connection = await db.connect(url)
    key = 0
    try:
        key = await lock_key(connection, name)
        cursor = await connection.execute("SELECT pg_try_advisory_lock(%s)", (key,))
        if not (await cursor.fetchone())[0]:
            holder = (await lock_holders(connection, key)).get(key, "another process")
            raise HistoryFileLocked(
                f"{conversation_label(url, name)} is open by {holder}: close its manager "
                "before copying it"
            )
        rows = await read_lines(connection, name) if await _has_tables(connection) else []
    finally:
        await unlock_and_close(connection, key)
    if not rows:
        raise UnknownConversation(f"no conversation {name!r} in {db.display_url(url)}")
    return rows


def _write_file(path: Path, lines: list[str]) -> None:
    """The file appears whole or not at all, and never over one that exists."""
    if path.exists() or path.is_symlink():
        raise HistoryFileError(f"{path} exists already: nothing was copied")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write("".join(line + "\n" for line in lines).encode("ascii"))
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temporary, path)  # fails if the name was taken meanwhile
        except FileExistsError:
            raise HistoryFileError(f"{path} exists already: nothing was copied") from None
        sync_directory(path.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
