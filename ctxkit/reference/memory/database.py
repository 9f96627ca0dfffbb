"""The memory file: one SQLite database in WAL mode, checked before it is opened for writing,
changed only in transactions that are durable when the call that made them returns.

Layout (format ``ctxkit-memory``, version 1):

``meta(key, value)``
    ``format``, ``version``, ``created``; ``items``, how many are stored (kept by triggers);
    ``dimensions`` and ``embedder`` once a vector is stored.
``items(id, content, metadata, created, updated, crc)``
    one row per stored text. Ids are never reused (AUTOINCREMENT); ``metadata`` is JSON;
    ``crc`` is the CRC-32 of content and metadata, checked whenever a row is read, so a
    changed byte is reported instead of returned (SQLite itself checks structure, not data).
``items_fts``, ``items_terms``
    FTS5 over ``content`` (external content, kept in step by triggers; tokenizer
    :data:`TOKENIZER`) and its ``fts5vocab`` table of terms and document counts.
``items_vec``
    a sqlite-vec ``vec0`` table of float32 vectors (cosine distance), rowid = item id, made
    with the first vector. Triggers drop an item's vector when it is forgotten or its text
    changes, so no vector ever outlives the text it was made from.

Crashes and damage are handled as for the history file (:mod:`ctxkit.reference.journal`). With
``fsync="always"`` (``synchronous=FULL``) a change is on disk before its call returns; with
``"never"`` (``NORMAL``) it survives the process being killed, not the machine failing. A crash
leaves at most an incomplete last transaction in the WAL, which SQLite discards when the file
is next opened. An existing file is checked before it is opened for writing, through a
read-only connection that cannot change it: its header against its size, ``PRAGMA
quick_check``, and its format. Damage raises :class:`MemoryFileCorrupt` and the file stays as
it was; so does a database that is not a ctxkit memory.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import stat
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, TypeVar

from ctxkit.extras import install_line
from ctxkit.reference.journal import FSYNC_POLICIES, sync_directory
from ctxkit.reference.memory.errors import (
    MemoryFileCorrupt,
    MemoryFileError,
    MemoryFileLocked,
    MemoryUnavailable,
)

__all__ = ["FORMAT", "TOKENIZER", "VERSION", "Database", "Row", "choose_driver"]

FORMAT = "ctxkit-memory"
VERSION = 1
TOKENIZER = "porter unicode61 remove_diacritics 2"
"""English stems (``errors`` finds ``error``), any script split into words, case and accents
folded (``Zürich`` finds ``zurich``)."""
INSTALL = install_line("memory")
BUSY_TIMEOUT_MS = 5_000
ROWS_PER_INSERT = 128
"""Items per ``INSERT`` statement: 640 parameters, within the 999 an older SQLite allows."""
_MAGIC = b"SQLite format 3\x00"

Row = tuple[int, str, dict[str, Any], float, float]
"""``(id, content, metadata, created, updated)``."""
T = TypeVar("T")

_SCHEMA = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value NOT NULL) WITHOUT ROWID;
CREATE TABLE items(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    content TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    crc INTEGER NOT NULL
);
CREATE VIRTUAL TABLE items_fts USING fts5(
    content, content='items', content_rowid='id', tokenize='{TOKENIZER}'
);
CREATE VIRTUAL TABLE items_terms USING fts5vocab(items_fts, 'row');
CREATE TRIGGER items_added AFTER INSERT ON items BEGIN
    INSERT INTO items_fts(rowid, content) VALUES (new.id, new.content);
    UPDATE meta SET value = value + 1 WHERE key = 'items';
END;
CREATE TRIGGER items_removed AFTER DELETE ON items BEGIN
    INSERT INTO items_fts(items_fts, rowid, content) VALUES ('delete', old.id, old.content);
    UPDATE meta SET value = value - 1 WHERE key = 'items';
END;
CREATE TRIGGER items_changed AFTER UPDATE OF content ON items BEGIN
    INSERT INTO items_fts(items_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO items_fts(rowid, content) VALUES (new.id, new.content);
END;
"""

_VECTORS = """
CREATE VIRTUAL TABLE items_vec USING vec0(embedding float[{dimensions}] distance_metric=cosine);
CREATE TRIGGER items_vec_removed AFTER DELETE ON items BEGIN
    DELETE FROM items_vec WHERE rowid = old.id;
END;
CREATE TRIGGER items_vec_changed AFTER UPDATE OF content ON items BEGIN
    DELETE FROM items_vec WHERE rowid = old.id;
END;
"""


# -- drivers ----------------------------------------------------------------------------------


@functools.cache
def _has_fts5(driver: ModuleType) -> bool:
    connection = driver.connect(":memory:")
    try:
        return bool(
            connection.execute("SELECT sqlite_compileoption_used('ENABLE_FTS5')").fetchone()[0]
        )
    finally:
        connection.close()


def choose_driver(*, extensions: bool) -> ModuleType:
    """The SQLite module to use: the interpreter's own ``sqlite3`` when it can do what is
    needed (FTS5; loading sqlite-vec when ``extensions``), else ``pysqlite3`` (a newer SQLite
    that can). Raises :class:`MemoryUnavailable` naming what to install."""
    import sqlite3

    can_load = hasattr(sqlite3.Connection, "enable_load_extension")
    if _has_fts5(sqlite3) and (can_load or not extensions):
        return sqlite3
    try:
        from pysqlite3 import dbapi2  # type: ignore[import-not-found]
    except ImportError:
        need = "load the sqlite-vec extension" if extensions else "do full-text search (FTS5)"
        raise MemoryUnavailable(
            f"this Python's sqlite3 (SQLite {sqlite3.sqlite_version}) cannot {need}; "
            f"install pysqlite3-binary ({INSTALL}) or use a Python built with it"
        ) from None
    return dbapi2


def _load_sqlite_vec(connection: Any) -> None:
    try:
        import sqlite_vec  # type: ignore[import-not-found]
    except ImportError:
        raise MemoryUnavailable(
            f"vector search needs the sqlite-vec extension: {INSTALL}"
        ) from None
    connection.enable_load_extension(True)
    try:
        sqlite_vec.load(connection)
    finally:
        connection.enable_load_extension(False)


# -- checking a file before use ---------------------------------------------------------------


def _check_path(path: Path) -> bool:
    """Whether ``path`` holds something (a non-empty regular file). Refuses links and special
    files, as the history does: a memory is only ever a file of ctxkit's own."""
    try:
        status = path.lstat()
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(status.st_mode):
        raise MemoryFileError(
            f"{path}: is a symbolic link; a memory file must be a regular file "
            "(ctxkit never follows links, so it cannot overwrite what one points to)"
        )
    if not stat.S_ISREG(status.st_mode):
        raise MemoryFileError(f"{path}: is not a regular file; a memory file must be one")
    return status.st_size > 0


def _wal_of(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def _check_header(path: Path) -> None:
    """What the first 100 bytes say, against the file's size; raises for damage. The size is
    only compared when no WAL is waiting (a crash during a checkpoint can leave the header
    ahead of the file, and the WAL mends that)."""
    with open(path, "rb") as file:
        header = file.read(100)
        size = os.fstat(file.fileno()).st_size
    if not header.startswith(_MAGIC[: len(header)]) or len(header) < len(_MAGIC):
        raise MemoryFileCorrupt(path, "is not an SQLite database", ours=False)
    if len(header) < 100:
        raise MemoryFileCorrupt(path, f"is cut short: {size} bytes, less than an SQLite header")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65_536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise MemoryFileCorrupt(path, f"has a damaged header (page size {page_size})")
    pages = int.from_bytes(header[28:32], "big")
    counted = header[24:28] == header[92:96] and pages > 0
    wal = _wal_of(path)
    waiting = wal.exists() and wal.stat().st_size > 0
    if counted and not waiting and size < pages * page_size:
        raise MemoryFileCorrupt(
            path, f"is cut short: {size:,} bytes where its header says {pages * page_size:,}"
        )


def _read_only(driver: ModuleType, path: Path) -> Any:
    """A connection that cannot change the file. With no WAL waiting it is ``immutable``
    (no lock files either); with one, SQLite must read it, so only ``mode=ro``."""
    wal = _wal_of(path)
    immutable = not (wal.exists() and wal.stat().st_size > 0)
    uri = path.resolve().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")
    return driver.connect(uri, uri=True, isolation_level=None, check_same_thread=False)


def check_file(path: Path, driver: ModuleType) -> dict[str, Any] | None:
    """The meta of the memory at ``path`` after checking it without changing it; None for a
    database with nothing in it yet. Raises :class:`MemoryFileCorrupt`."""
    _check_header(path)
    shm = path.with_name(path.name + "-shm")
    had_shm = shm.exists()
    try:
        connection = _read_only(driver, path)
        try:
            problems = [row[0] for row in connection.execute("PRAGMA quick_check(3)")]
            if problems != ["ok"]:
                lines = [line for text in problems for line in text.splitlines()]
                said = "; ".join(line for line in lines if not line.startswith("***"))
                raise MemoryFileCorrupt(path, f"is damaged: {said}")
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_schema")}
            if not tables:
                return None
            if "meta" not in tables or "items" not in tables:
                raise MemoryFileCorrupt(
                    path, "is an SQLite database but not a ctxkit memory", ours=False
                )
            meta = dict(connection.execute("SELECT key, value FROM meta"))
        finally:
            connection.close()
    except driver.DatabaseError as exc:
        if not had_shm:  # a read-only connection may leave one behind: the file stays as it was
            with contextlib.suppress(OSError):
                shm.unlink()
        raise MemoryFileCorrupt(path, f"is damaged: SQLite says {exc}") from None
    except MemoryFileCorrupt:
        if not had_shm:
            with contextlib.suppress(OSError):
                shm.unlink()
        raise
    if meta.get("format") != FORMAT:
        raise MemoryFileCorrupt(path, "is an SQLite database but not a ctxkit memory", ours=False)
    if meta.get("version") != VERSION:
        raise MemoryFileCorrupt(
            path, f"has format version {meta.get('version')!r}; this ctxkit reads {VERSION}"
        )
    return meta


# -- the open database ------------------------------------------------------------------------


def checksum(content: str, metadata: str) -> int:
    return zlib.crc32(metadata.encode("ascii"), zlib.crc32(content.encode("utf-8") + b"\x00"))


class Database:
    """One connection to a memory file (or to a database in memory when ``path`` is None).

    Not thread-safe: :class:`~ctxkit.reference.memory.SemanticMemory` calls it from one
    worker thread only. ``vectors`` says an embedder is configured, so sqlite-vec must load;
    it also loads whenever the file already holds vectors, to keep them in step.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        *,
        vectors: bool = False,
        fsync: Literal["always", "never"] = "always",
    ) -> None:
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync must be one of {', '.join(FSYNC_POLICIES)}, got {fsync!r}")
        self.path = None if path is None else Path(path)
        self.name = str(self.path) if self.path is not None else "the memory (in memory)"
        meta: dict[str, Any] | None = None
        created = False
        if self.path is not None:
            if _check_path(self.path):
                meta = check_file(self.path, choose_driver(extensions=False))
            else:
                created = not self.path.exists()
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise MemoryFileError(
                        f"{self.path.parent}: cannot create the folder: {exc.strerror}"
                    ) from None
        has_vectors = meta is not None and "dimensions" in meta
        self.driver = choose_driver(extensions=vectors or has_vectors)
        self.vectors_loaded = vectors or has_vectors
        try:
            self.connection = self.driver.connect(
                str(self.path) if self.path is not None else ":memory:",
                isolation_level=None,
                check_same_thread=False,
            )
        except self.driver.Error as exc:
            raise MemoryFileError(f"{self.name}: cannot open: {exc}") from None
        try:
            self._configure(fsync)
            if self.vectors_loaded:
                _load_sqlite_vec(self.connection)
            if meta is None:
                self._create()
                if created and fsync == "always" and self.path is not None:
                    sync_directory(self.path.parent)
            self._prepare_queries()
        except BaseException:
            self.connection.close()
            raise

    # -- setting up ---------------------------------------------------------------------------

    def _configure(self, fsync: str) -> None:
        execute = self.connection.execute
        execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if self.path is not None:
            mode = self.run(lambda: execute("PRAGMA journal_mode = WAL").fetchone()[0])
            if mode != "wal":
                raise MemoryFileError(f"{self.name}: cannot use WAL mode here (got {mode})")
        execute(f"PRAGMA synchronous = {'FULL' if fsync == 'always' else 'NORMAL'}")
        execute("PRAGMA temp_store = MEMORY")

    def _create(self) -> None:
        def create() -> None:
            tables = {row[0] for row in self.connection.execute("SELECT name FROM sqlite_schema")}
            if "meta" in tables:  # made meanwhile by another connection
                return
            for statement in _statements(_SCHEMA):
                self.connection.execute(statement)
            self.connection.executemany(
                "INSERT INTO meta(key, value) VALUES (?, ?)",
                [("format", FORMAT), ("version", VERSION), ("created", time.time()), ("items", 0)],
            )

        self.write(create)

    def _prepare_queries(self) -> None:
        """The scratch tables that turn a query into FTS5's own terms (per connection)."""
        self.connection.execute(
            "CREATE VIRTUAL TABLE temp.query_words USING fts5(word, content='', "
            f"tokenize='{TOKENIZER}')"
        )
        self.connection.execute(
            "CREATE VIRTUAL TABLE temp.query_terms USING fts5vocab(temp, query_words, instance)"
        )

    # -- running statements -------------------------------------------------------------------

    def run(self, work: Callable[[], T]) -> T:
        """``work()``, with SQLite's errors said as the memory's."""
        try:
            return work()
        except self.driver.Error as exc:
            raise self._failure(exc) from None

    def read(self, work: Callable[[], T]) -> T:
        """``work()`` in one read transaction: every statement sees the same state."""

        def in_transaction() -> T:
            self.connection.execute("BEGIN")
            try:
                return work()
            finally:
                self.connection.execute("COMMIT")

        return self.run(in_transaction)

    def write(self, work: Callable[[], T]) -> T:
        """``work()`` in one write transaction, all or nothing; durable (as the fsync policy
        says) when this returns."""

        def in_transaction() -> T:
            self.connection.execute("BEGIN IMMEDIATE")
            try:
                result = work()
            except BaseException:
                with contextlib.suppress(self.driver.Error):
                    self.connection.execute("ROLLBACK")
                raise
            self.connection.execute("COMMIT")
            return result

        return self.run(in_transaction)

    def _failure(self, exc: Exception) -> Exception:
        name = getattr(exc, "sqlite_errorname", "") or ""
        text = str(exc)
        if name in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or "malformed" in text:
            return MemoryFileCorrupt(self.name, f"is damaged: SQLite says {text}")
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
            return MemoryFileLocked(
                f"{self.name}: another connection held its write lock for more than "
                f"{BUSY_TIMEOUT_MS / 1000:g} s; nothing was changed. Close the other writer."
            )
        if name == "SQLITE_FULL" or "full" in text:
            return MemoryFileError(
                f"{self.name}: cannot write: the disk is full; nothing was changed"
            )
        return MemoryFileError(f"{self.name}: {text}")

    def close(self) -> None:
        with contextlib.suppress(self.driver.Error):
            self.connection.close()

    # -- meta ---------------------------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        return dict(self.connection.execute("SELECT key, value FROM meta"))

    def count(self) -> int:
        return int(
            self.connection.execute("SELECT value FROM meta WHERE key = 'items'").fetchone()[0]
        )

    # -- writing (inside :meth:`write`) --------------------------------------------------------

    def ensure_vectors(self, dimensions: int, embedder: str) -> None:
        """Make the vector table for ``dimensions`` if there is none yet."""
        execute = self.connection.execute
        if execute("SELECT 1 FROM meta WHERE key = 'dimensions'").fetchone() is None:
            for statement in _statements(_VECTORS.format(dimensions=int(dimensions))):
                execute(statement)
            execute(
                "INSERT INTO meta(key, value) VALUES ('dimensions', ?), ('embedder', ?)",
                (dimensions, embedder),
            )

    def drop_vectors(self) -> None:
        execute = self.connection.execute
        for name in ("items_vec_removed", "items_vec_changed"):
            execute(f"DROP TRIGGER IF EXISTS {name}")
        execute("DROP TABLE IF EXISTS items_vec")
        execute("DELETE FROM meta WHERE key IN ('dimensions', 'embedder')")

    def insert_many(self, items: Sequence[tuple[str, str]], at: float) -> list[int]:
        """Insert ``(content, metadata)`` pairs, in order; their ids. Call within a write.

        One multi-row ``INSERT`` per :data:`ROWS_PER_INSERT` items, not a statement per item:
        FTS5 writes what a statement indexed when the statement ends, so a statement per item
        made a segment per item (about twice the CPU for a batch of agent messages, and more
        merging later), and each statement let the event loop's thread wait for the GIL.
        The ids are consecutive: ``AUTOINCREMENT`` numbers the rows of a statement in order,
        and the write transaction lets no other writer in."""
        ids: list[int] = []
        for start in range(0, len(items), ROWS_PER_INSERT):
            chunk = items[start : start + ROWS_PER_INSERT]
            values: list[Any] = []
            for content, metadata in chunk:
                values += (content, metadata, at, at, checksum(content, metadata))
            last = self.connection.execute(
                "INSERT INTO items(content, metadata, created, updated, crc) VALUES "
                + ", ".join(["(?, ?, ?, ?, ?)"] * len(chunk)),
                values,
            ).lastrowid
            first = int(last) - len(chunk) + 1
            ids += range(first, first + len(chunk))
        return ids

    def set_vector(self, item: int, vector: bytes) -> None:
        self.connection.execute(
            "INSERT INTO items_vec(rowid, embedding) VALUES (?, ?)", (item, vector)
        )

    def update(self, item: int, content: str, metadata: str | None, at: float) -> bool:
        """Replace an item's text (and its metadata, unless None); False if there is none."""
        row = self._row(item)
        if row is None:
            return False
        metadata = row[2] if metadata is None else metadata
        self.connection.execute(
            "UPDATE items SET content = ?, metadata = ?, updated = ?, crc = ? WHERE id = ?",
            (content, metadata, at, checksum(content, metadata), item),
        )
        return True

    def delete(self, item: int) -> bool:
        if self._row(item) is None:  # checked first: FTS5 removes the words the row holds
            return False
        self.connection.execute("DELETE FROM items WHERE id = ?", (item,))
        return True

    # -- reading --------------------------------------------------------------------------------

    def _row(self, item: int) -> tuple[int, str, str, float, float] | None:
        row = self.connection.execute(
            "SELECT id, content, metadata, created, updated, crc FROM items WHERE id = ?", (item,)
        ).fetchone()
        if row is None:
            return None
        self._verify(row)
        return row[:5]

    def _verify(self, row: Sequence[Any]) -> None:
        if checksum(row[1], row[2]) != row[5]:
            raise MemoryFileCorrupt(
                self.name,
                f"item {row[0]} does not match its checksum (its bytes changed after it was "
                "written)",
            )

    def fetch(self, items: Sequence[int]) -> dict[int, Row]:
        """The rows of ``items`` that exist, checked against their checksums."""
        found: dict[int, Row] = {}
        for start in range(0, len(items), 500):
            chunk = list(items[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for row in self.connection.execute(
                "SELECT id, content, metadata, created, updated, crc FROM items "
                f"WHERE id IN ({marks})",
                chunk,
            ):
                self._verify(row)
                found[row[0]] = (row[0], row[1], json.loads(row[2]), row[3], row[4])
        return found

    def without_vectors(self, after: int, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` items after id ``after`` that have no vector yet, oldest first."""
        if self.connection.execute("SELECT 1 FROM meta WHERE key = 'dimensions'").fetchone():
            query = (
                "SELECT id, content FROM items WHERE id > ? AND id NOT IN "
                "(SELECT rowid FROM items_vec) ORDER BY id LIMIT ?"
            )
        else:
            query = "SELECT id, content FROM items WHERE id > ? ORDER BY id LIMIT ?"
        return self.connection.execute(query, (after, limit)).fetchall()

    def set_vector_if_current(self, item: int, content: str, vector: bytes) -> bool:
        """Give ``item`` its vector if it still holds ``content`` and has none yet (another
        call may have changed, forgotten or embedded it meanwhile)."""
        row = self.connection.execute(
            "SELECT content FROM items WHERE id = ? AND NOT EXISTS "
            "(SELECT 1 FROM items_vec WHERE rowid = ?)",
            (item, item),
        ).fetchone()
        if row is None or row[0] != content:
            return False
        self.set_vector(item, vector)
        return True

    def vector_count(self) -> int:
        return int(self.connection.execute("SELECT count(*) FROM items_vec").fetchone()[0])

    def delete_where(self, sql: str, arguments: Sequence[Any]) -> int:
        """Remove every item matching ``sql`` (``AND ...`` over ``items``); how many went.
        Each is checked first: FTS5 is told which words to remove from what the row holds."""
        ids = [
            row[0]
            for row in self.connection.execute(f"SELECT id FROM items WHERE 1{sql}", arguments)
        ]
        self.fetch(ids)
        self.connection.executemany("DELETE FROM items WHERE id = ?", [(item,) for item in ids])
        return len(ids)


def _statements(script: str) -> list[str]:
    """A script's statements, one by one (``executescript`` would commit the transaction)."""
    import sqlite3

    statements, current = [], ""
    for line in script.strip().splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return statements
