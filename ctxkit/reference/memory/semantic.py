"""The semantic memory: store texts with metadata, find them again by what a query says.

Without an embedder it searches text (SQLite FTS5, BM25), which needs no model and no
network; with one, it also searches by vector (sqlite-vec) and fuses the two. Every method is
async and runs its SQLite work on one worker thread with its own connection, so the event
loop never waits on the disk; a synchronous embedder runs in a thread too.

Scores are in [0, 1] and mean the same in any memory (:mod:`.search` says how), so one
``threshold`` (0.7 unless told) keeps what is relevant enough.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import os
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from ctxkit.reference.memory import search
from ctxkit.reference.memory.database import Database, Row
from ctxkit.reference.memory.embedders import Embedder, embed, embedder_name, pack
from ctxkit.reference.memory.errors import EmbedderError, MemoryFileError, UnknownMemory

__all__ = [
    "BACKGROUND_NICE",
    "DEFAULT_THRESHOLD",
    "Hit",
    "Item",
    "MemoryBase",
    "MemoryStats",
    "SemanticMemory",
]

DEFAULT_THRESHOLD = 0.7
CATCH_UP_BATCH = 64
"""Texts embedded per call when items stored without a vector get one."""
BACKGROUND_NICE = 10
"""How much lower a ``background`` memory's thread runs (Linux ``nice``, per thread)."""


@dataclass(frozen=True, slots=True)
class Item:
    """A stored text: its id (never reused), text, metadata, and when it was stored and last
    changed (seconds since the epoch)."""

    id: int
    content: str
    metadata: dict[str, Any]
    created: float
    updated: float


@dataclass(frozen=True, slots=True)
class Hit(Item):
    """An item a query found. ``score`` in [0, 1] is what the threshold was compared with:
    the text score, the vector score, or with both the higher. Each is None where that
    search did not find the item (or found it below the threshold)."""

    score: float
    text_score: float | None = None
    vector_score: float | None = None


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """What a memory holds: items, how many have a vector, of what size and from which
    embedder (None before the first vector)."""

    items: int
    vectors: int
    dimensions: int | None
    embedder: str | None


def _run_in_background() -> None:
    """Lower the calling thread's CPU priority by :data:`BACKGROUND_NICE` (Linux, where a
    thread has a nice value of its own; elsewhere nothing). Indexing a batch of messages is a
    few milliseconds of CPU; on a busy machine, at the same priority, it took them from the
    agent's own loop (measured: 1.4x the loop's step at 10k messages, 1.1x niced)."""
    if not sys.platform.startswith("linux"):
        return
    thread = threading.get_native_id()
    with contextlib.suppress(OSError):
        now = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, now + BACKGROUND_NICE))


def _item(row: Row) -> Item:
    return Item(*row)


def _content(content: Any) -> str:
    if not isinstance(content, str):
        raise TypeError(f"content must be a string, got {type(content).__name__}")
    if not content.strip():
        raise ValueError("content is empty: nothing in it could ever be found")
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, which UTF-8 (and so SQLite) cannot hold
        content = content.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return content


def _metadata(metadata: Mapping[str, Any] | None) -> str:
    if metadata is None:
        return "{}"
    if not isinstance(metadata, Mapping) or not all(isinstance(key, str) for key in metadata):
        raise TypeError(f"metadata must be a mapping with string keys, got {metadata!r:.80}")
    try:
        return json.dumps(dict(metadata), separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"metadata is stored as JSON: {exc}") from None


def _id(item: Any) -> int:
    if not isinstance(item, int) or isinstance(item, bool):
        raise TypeError(f"an item id is an integer, got {item!r}")
    return item


class MemoryBase:
    """What every memory (SQLite's here, PostgreSQL's in :mod:`ctxkit.reference.postgres`)
    does the same way over its own ``store_many`` and ``close``."""

    async def store_many(
        self, items: Iterable[str | tuple[str, Mapping[str, Any] | None]]
    ) -> list[int]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    async def store(self, content: str, metadata: Mapping[str, Any] | None = None) -> int:
        """Keep ``content`` with ``metadata`` (JSON); returns its id once it is stored."""
        (item,) = await self.store_many([(content, metadata)])
        return item

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()


class SemanticMemory(MemoryBase):
    """Texts with metadata, found again by query; one SQLite file, or in memory.

    ``path``: the file (made with its folders if missing); None keeps everything in memory.
    ``embedder``: any callable from a list of texts to one vector each (see
    :mod:`.embedders`); None searches text only. ``threshold``: what :meth:`retrieve` keeps
    unless told (scores are in [0, 1]). ``fsync``: ``"always"`` makes every change durable
    before its call returns; ``"never"`` leaves it to the OS (safe when the process dies, not
    when the machine does), as for the history file. ``background``: its worker thread runs
    at a lower CPU priority (:data:`BACKGROUND_NICE`, on Linux), for a memory written behind
    an agent's loop (recall's): on a busy machine its indexing then waits for the loop rather
    than the loop for it; a search runs there too, which only an overloaded machine slows.

    Opening checks an existing file (``PRAGMA quick_check``: about 150 ms for 100k items
    here); from a running event loop, ``await SemanticMemory.open(...)`` does it in a thread.
    Raises :class:`MemoryFileCorrupt` for a damaged file (left as it was),
    :class:`MemoryUnavailable` when an embedder is given and sqlite-vec cannot be loaded.

    With an embedder, items stored without a vector (before it was configured) get theirs
    on the first call that needs vectors, and a failing embedder raises
    :class:`EmbedderError` from the call that needed it (a caller that would rather search
    text only then can open the memory without it).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        embedder: Embedder | None = None,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        fsync: Literal["always", "never"] = "always",
        background: bool = False,
    ) -> None:
        if embedder is not None and not callable(embedder):
            raise TypeError(f"embedder must be callable (texts -> vectors), got {embedder!r}")
        self.threshold = _threshold(threshold)
        self.embedder = embedder
        self._db = Database(path, vectors=embedder is not None, fsync=fsync)
        self.path = self._db.path
        self._executor = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix="ctxkit-memory",
            initializer=_run_in_background if background else None,
        )
        self._closed = False
        meta = self._db.meta()
        self._name = embedder_name(embedder) if embedder is not None else None
        self._dimensions: int | None = meta.get("dimensions")
        self._stored_name: str | None = meta.get("embedder")
        self._caught_up = embedder is None

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        embedder: Embedder | None = None,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        fsync: Literal["always", "never"] = "always",
        background: bool = False,
    ) -> SemanticMemory:
        """The same as the constructor, with the file's check run off the event loop."""
        return await asyncio.to_thread(
            functools.partial(
                cls, path, embedder, threshold=threshold, fsync=fsync, background=background
            )
        )

    # -- plumbing ---------------------------------------------------------------------------

    async def _run(self, work: Any, *args: Any) -> Any:
        if self._closed:
            raise MemoryFileError(f"{self._db.name}: the memory is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(work, *args))

    def _check_embedder(self) -> None:
        check_embedder(self._db.name, self._stored_name, self._name, "a path")

    async def _vectors(self, texts: list[str], *, query: bool = False) -> list[bytes]:
        assert self.embedder is not None
        self._check_embedder()
        vectors = await embed(self.embedder, texts, query=query)
        who = self._name or "?"
        packed, size = pack(vectors, len(texts), self._dimensions, who)
        self._dimensions = size
        return packed

    def _write_vectors(self, rows: list[tuple[int, str]], vectors: list[bytes]) -> int:
        """Give each ``(id, text)`` its vector, unless it changed or went meanwhile."""
        db = self._db

        def work() -> int:
            db.ensure_vectors(self._dimensions or 0, self._name or "")
            return sum(
                db.set_vector_if_current(item, content, vector)
                for (item, content), vector in zip(rows, vectors, strict=True)
            )

        return db.write(work)

    async def _catch_up(self) -> None:
        """Embed what was stored without a vector (before this embedder was configured)."""
        if self._caught_up:
            return
        self._check_embedder()
        db, after = self._db, 0
        while rows := await self._run(
            db.read, functools.partial(db.without_vectors, after, CATCH_UP_BATCH)
        ):
            vectors = await self._vectors([content for _, content in rows])
            await self._run(self._write_vectors, rows, vectors)
            after = rows[-1][0]
        self._caught_up = True

    # -- the interface ------------------------------------------------------------------------

    async def store_many(
        self, items: Iterable[str | tuple[str, Mapping[str, Any] | None]]
    ) -> list[int]:
        """Keep many texts in one transaction (and one embedder call per batch): all or none."""
        prepared = _prepared(items)
        if not prepared:
            return []
        vectors: list[bytes] | None = None
        if self.embedder is not None:
            await self._catch_up()
            vectors = await self._vectors([content for content, _ in prepared])
        db = self._db

        def work() -> list[int]:
            at = time.time()
            if vectors is not None:
                db.ensure_vectors(self._dimensions or 0, self._name or "")
            ids = db.insert_many(prepared, at)
            if vectors is not None:
                for item, vector in zip(ids, vectors, strict=True):
                    db.set_vector(item, vector)
            return ids

        ids = await self._run(db.write, work)
        if vectors is not None:
            self._stored_name = self._name
        return ids

    async def retrieve(
        self,
        query: str,
        limit: int = 5,
        *,
        threshold: float | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """The items most relevant to ``query``, best first, at most ``limit``, each scoring at
        least ``threshold`` (the memory's unless given). ``where`` keeps only items whose
        metadata has each of its keys equal to its value."""
        floor = _query(query, limit, self.threshold if threshold is None else threshold)
        search.where_clause(where)  # a mistake in it is said here, not on the worker
        if limit == 0 or not query.strip():
            return []
        vector: bytes | None = None
        if self.embedder is not None:
            await self._catch_up()
            if self._dimensions is not None:  # else nothing has a vector yet
                (vector,) = await self._vectors([query], query=True)
        db = self._db

        def work() -> list[Hit]:
            depth = search.depth(limit) if vector else limit
            text = search.text_search(db, query, depth, floor, where)
            near = None if vector is None else search.vector_search(db, vector, depth, floor, where)
            found = search.combined(text, near, limit)
            return hits(found, db.fetch([item for item, *_ in found]))

        return await self._run(db.read, work)

    async def get(self, item: int) -> Item | None:
        """The item with this id, or None."""
        item = _id(item)
        rows = await self._run(self._db.read, lambda: self._db.fetch([item]))
        return _item(rows[item]) if item in rows else None

    async def update(
        self, item: int, content: str, metadata: Mapping[str, Any] | None = None
    ) -> None:
        """Replace an item's text (and its metadata, when given); its vector is made again.
        Raises :class:`UnknownMemory` if there is no such item."""
        item, content = _id(item), _content(content)
        encoded = None if metadata is None else _metadata(metadata)
        vectors = None
        if self.embedder is not None:
            await self._catch_up()
            vectors = await self._vectors([content])
        db = self._db

        def work() -> bool:
            if not db.update(item, content, encoded, time.time()):
                return False
            if vectors is not None:
                db.ensure_vectors(self._dimensions or 0, self._name or "")
                db.set_vector(item, vectors[0])
            return True

        if not await self._run(db.write, work):
            raise UnknownMemory(
                f"{self._db.name} holds no item {item} (never stored, or forgotten)"
            )

    async def forget(self, item: int) -> bool:
        """Remove an item, its words from the text index and its vector; False if it was not
        there."""
        item = _id(item)
        return bool(await self._run(self._db.write, lambda: self._db.delete(item)))

    async def forget_where(self, where: Mapping[str, Any]) -> int:
        """Remove every item whose metadata matches ``where`` (as in :meth:`retrieve`); how
        many went. An empty ``where`` is refused rather than taken to mean everything."""
        extra, arguments = search.where_clause(where)
        if not extra:
            raise ValueError("forget_where needs at least one metadata key to match")
        db = self._db
        return int(await self._run(db.write, functools.partial(db.delete_where, extra, arguments)))

    async def count(self) -> int:
        """How many items are stored."""
        return int(await self._run(self._db.run, self._db.count))

    async def stats(self) -> MemoryStats:
        """How many items and vectors the memory holds, and whose vectors they are."""
        db = self._db

        def work() -> MemoryStats:
            meta = db.meta()
            vectors = db.vector_count() if "dimensions" in meta else 0
            return MemoryStats(db.count(), vectors, meta.get("dimensions"), meta.get("embedder"))

        return await self._run(db.read, work)

    async def reembed(self) -> int:
        """Make every vector again with this memory's embedder (after changing models).
        The old vectors go first, in one transaction, then the new ones are made batch by
        batch; if this stops halfway, the next call that needs vectors goes on. Returns how
        many items have a vector."""
        if self.embedder is None:
            raise EmbedderError("reembed needs an embedder: SemanticMemory(path, embedder=...)")
        await self._run(self._db.write, self._db.drop_vectors)
        self._stored_name, self._dimensions, self._caught_up = None, None, False
        await self._catch_up()
        return int(await self._run(self._db.run, self._db.vector_count))

    def close(self) -> None:
        """Finish what is running and close the file; calls after this raise."""
        if self._closed:
            return
        self._closed = True
        self._executor.submit(self._db.close).result()
        self._executor.shutdown(wait=True)

    def __repr__(self) -> str:
        where = self._db.name
        return f"SemanticMemory({where!r}, embedder={self._name!r}, threshold={self.threshold})"


def check_embedder(where: str, stored: str | None, name: str | None, own: str) -> None:
    """Raise :class:`EmbedderError` when ``where`` holds vectors of another embedder than
    ``name`` (``own``: what to give a memory of its own, ``a path`` or ``a collection``)."""
    if stored is not None and stored != name:
        raise EmbedderError(
            f"{where}: holds vectors made by {stored}, not by {name}; vectors of two models "
            "cannot be compared. Call `await memory.reembed()` to make them all again with "
            f"this embedder, or give this one {own} of its own."
        )


def hits(
    found: Iterable[tuple[int, float, float | None, float | None]],
    rows: Mapping[int, tuple[Any, ...]],
) -> list[Hit]:
    """:func:`~.search.combined`'s ``(id, score, text_score, vector_score)`` as hits, each
    with its stored ``(id, content, metadata, created, updated)`` row; an id without a row
    (forgotten meanwhile) is left out."""
    return [
        Hit(*rows[item], score, text_score, vector_score)
        for item, score, text_score, vector_score in found
        if item in rows
    ]


def _prepared(items: Iterable[str | tuple[str, Any]]) -> list[tuple[str, str]]:
    """``store_many``'s items as ``(content, metadata JSON)``, each checked."""
    prepared = []
    for entry in items:
        content, metadata = (entry, None) if isinstance(entry, str) else entry
        prepared.append((_content(content), _metadata(metadata)))
    return prepared


def _query(query: Any, limit: Any, threshold: Any) -> float:
    """``retrieve``'s query and limit checked; the threshold it keeps."""
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, got {type(query).__name__}")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise ValueError(f"limit must be a whole number of at least 0, got {limit!r}")
    return _threshold(threshold)


def _threshold(value: Any) -> float:
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or not 0 <= value <= 1
    ):
        raise ValueError(f"threshold is a similarity in [0, 1], got {value!r}")
    return float(value)
