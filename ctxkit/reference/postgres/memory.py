"""Semantic memory in PostgreSQL: :class:`~ctxkit.reference.memory.SemanticMemory`'s interface
and scores, with the server's full-text search (``tsvector``, English stemming, a GIN index).

One table holds every memory of a database, each a ``collection`` (a conversation's recall
memory is the conversation's name)::

    ctxkit_memory (id bigserial PRIMARY KEY, collection text, content text, metadata jsonb,
                   created float8, updated float8,
                   tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED)

A query is scored as SQLite's memory scores it (:mod:`ctxkit.reference.memory.search`): each
word weighs its idf among the collection's items, a score is the share of the query's weight an
item holds, the search asks only for what an item must hold to reach the threshold
(:func:`~ctxkit.reference.memory.search.plan`), and equal scores go by ``ts_rank``, then
newest. The words are the server's (its English stemmer and stop words), so a figure can
differ a little from SQLite's (``benchmarks/recall.py`` measures both).

Vectors need the pgvector extension on the server: a memory opened with an embedder says at
once that it cannot keep them (:class:`~ctxkit.reference.memory.MemoryUnavailable`), never
degrading to text alone unasked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ctxkit.reference.memory import search
from ctxkit.reference.memory.embedders import Embedder
from ctxkit.reference.memory.errors import MemoryFileError, MemoryUnavailable, UnknownMemory
from ctxkit.reference.memory.semantic import (
    DEFAULT_THRESHOLD,
    Hit,
    Item,
    MemoryBase,
    MemoryStats,
    _content,
    _id,
    _metadata,
    _prepared,
    _query,
    _threshold,
)
from ctxkit.reference.postgres import connection as db

__all__ = ["SCHEMA", "DatabaseMemory"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS ctxkit_memory (
    id bigserial PRIMARY KEY,
    collection text NOT NULL,
    content text NOT NULL,
    metadata jsonb NOT NULL,
    created double precision NOT NULL,
    updated double precision NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED
);
CREATE INDEX IF NOT EXISTS ctxkit_memory_tsv ON ctxkit_memory USING gin (tsv);
CREATE INDEX IF NOT EXISTS ctxkit_memory_collection ON ctxkit_memory (collection, id);
"""
_SCHEMA_LOCK = 0x6374786B6D656D  # "ctxkmem"
CONFIG = "english"
_ready: set[str] = set()


def _tsquery(count: int, joiner: str) -> str:
    return f" {joiner} ".join([f"phraseto_tsquery('{CONFIG}', %s)"] * count)


class DatabaseMemory(MemoryBase):
    """Texts with metadata in a PostgreSQL database, found again by query.

    ``url``: the database (``postgresql://...``); ``collection``: this memory's name in it.
    ``threshold`` as for :class:`~ctxkit.reference.memory.SemanticMemory`. ``embedder``: needs
    pgvector, which this version does not use yet: given one, opening raises
    :class:`~ctxkit.reference.memory.MemoryUnavailable` saying so.
    """

    def __init__(
        self,
        url: str,
        collection: str,
        embedder: Embedder | None = None,
        *,
        threshold: float = DEFAULT_THRESHOLD,
    ) -> None:
        db.check_url(url)
        self.url = url
        self.collection = collection
        self.threshold = _threshold(threshold)
        self.path = f"{db.display_url(url)}#memory:{collection}"
        """What messages call it (a memory file's ``path``)."""
        self._closed = False
        vectors = db.call(self._open())
        if embedder is not None:
            where = "has pgvector" if vectors else "has no pgvector extension"
            raise MemoryUnavailable(
                f"{self.path}: vectors in PostgreSQL need pgvector (this server {where}), "
                "which this version of ctxkit does not use yet; open it without an embedder "
                "to search text (tsvector), or keep the memory in SQLite (memory_path=FILE)"
            )
        self.embedder = None

    async def _open(self) -> bool:
        """Make sure of the table; whether the server could give vectors (pgvector)."""
        pool = await db.pool(self.url)
        async with pool.connection() as connection:
            if self.url not in _ready:
                async with connection.transaction():
                    await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                    await connection.execute(SCHEMA)
                _ready.add(self.url)
            cursor = await connection.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            )
            return await cursor.fetchone() is not None

    async def _run(self, work: Any, *args: Any) -> Any:
        """``work(connection, *args)`` on a pooled connection, on the database loop."""
        if self._closed:
            raise MemoryFileError(f"{self.path}: the memory is closed")

        async def job() -> Any:
            psycopg = db._psycopg()
            try:
                pool = await db.pool(self.url)
                async with pool.connection() as connection:
                    return await work(connection, *args)
            except psycopg.OperationalError as exc:
                raise db.unreachable(self.url, exc) from None

        return await db.run(job())

    # -- the interface (``store`` and ``async with``: MemoryBase's) ---------------------------

    async def store_many(
        self, items: Iterable[str | tuple[str, Mapping[str, Any] | None]]
    ) -> list[int]:
        """Keep many texts in one transaction: all or none."""
        prepared = [(_text(content), metadata) for content, metadata in _prepared(items)]
        if not prepared:
            return []

        async def work(connection: Any) -> list[int]:
            at = time.time()
            ids = []
            async with connection.transaction(), connection.cursor() as cursor:
                for content, metadata in prepared:
                    await cursor.execute(
                        "INSERT INTO ctxkit_memory (collection, content, metadata, created, "
                        "updated) VALUES (%s, %s, %s::jsonb, %s, %s) RETURNING id",
                        (self.collection, content, metadata, at, at),
                    )
                    ids.append((await cursor.fetchone())[0])
            return ids

        return await self._run(work)

    async def retrieve(
        self,
        query: str,
        limit: int = 5,
        *,
        threshold: float | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """The items most relevant to ``query``, best first (as SemanticMemory's)."""
        floor = _query(query, limit, self.threshold if threshold is None else threshold)
        contains = _contains(where)
        if limit == 0 or not query.strip():
            return []
        words = search.query_words(query)
        if not words:
            return []

        async def work(connection: Any) -> list[Hit]:
            async with connection.transaction():  # one snapshot: every count agrees
                return await self._text_search(connection, words, limit, floor, contains)

        return await self._run(work)

    async def _text_search(
        self, connection: Any, words: list[str], limit: int, floor: float, contains: str | None
    ) -> list[Hit]:
        cursor = await connection.execute(
            f"SELECT tsvector_to_array(to_tsvector('{CONFIG}', w)) "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS t(w, n) ORDER BY n",
            (words,),
        )
        tokens = [sorted(row[0]) for row in await cursor.fetchall()]
        terms = search.distinct_terms(words, tokens)
        if not terms:
            return []
        cursor = await connection.execute(
            "SELECT count(*) FROM ctxkit_memory WHERE collection = %s", (self.collection,)
        )
        items = (await cursor.fetchone())[0]
        if items == 0:
            return []
        counts = ", ".join(
            f"count(*) FILTER (WHERE tsv @@ phraseto_tsquery('{CONFIG}', %s))" for _ in terms
        )
        cursor = await connection.execute(
            f"SELECT {counts} FROM ctxkit_memory WHERE collection = %s",
            [*(word for word, _ in terms), self.collection],
        )
        dfs = await cursor.fetchone()
        weighed = [
            search.Term(word, df, search.weigh(word, items, df))
            for (word, _), df in zip(terms, dfs, strict=True)
        ]
        matching = search.plan(weighed, floor)
        if matching is None:
            return []
        all_of, any_of = matching
        match = " && ".join(
            [_tsquery(1, "&&") for _ in all_of]
            + ([f"({_tsquery(len(any_of), '||')})"] if any_of else [])
        )
        match_words = [term.word for term in all_of] + [term.word for term in any_of]
        ranked = sum(term.df for term in all_of + any_of) <= search.RANK_BUDGET
        order = f"ts_rank(tsv, {match}) DESC, id DESC" if ranked else "id DESC"
        holds = ", ".join(f"tsv @@ phraseto_tsquery('{CONFIG}', %s)" for term in weighed if term.df)
        present = [term for term in weighed if term.df]
        extra, extra_arguments = (
            ("", []) if contains is None else (" AND metadata @> %s", [contains])
        )
        cursor = await connection.execute(
            f"SELECT id, ARRAY[{holds}] FROM ctxkit_memory "
            f"WHERE collection = %s AND tsv @@ ({match}){extra} ORDER BY {order} LIMIT %s",
            [
                *(term.word for term in present),
                self.collection,
                *match_words,
                *extra_arguments,
                *(match_words if ranked else []),
                max(4 * limit, 20),
            ],
        )
        candidates = [
            (
                item,
                float(rank),
                sum(t.weight for t, held in zip(present, flags, strict=True) if held),
            )
            for rank, (item, flags) in enumerate(await cursor.fetchall())
        ]
        found = search.best(weighed, candidates, floor, limit)
        rows = await _fetch(connection, [hit.id for hit in found])
        return [Hit(*rows[hit.id], hit.score, hit.score, None) for hit in found if hit.id in rows]

    async def get(self, item: int) -> Item | None:
        """The item with this id, or None."""
        item = _id(item)

        async def work(connection: Any) -> dict[int, tuple[Any, ...]]:
            return await _fetch(connection, [item], self.collection)

        rows = await self._run(work)
        return Item(*rows[item]) if item in rows else None

    async def update(
        self, item: int, content: str, metadata: Mapping[str, Any] | None = None
    ) -> None:
        """Replace an item's text (and its metadata, when given). Raises
        :class:`~ctxkit.reference.memory.UnknownMemory` if there is no such item."""
        item, content = _id(item), _text(_content(content))
        encoded = None if metadata is None else _metadata(metadata)

        async def work(connection: Any) -> int:
            cursor = await connection.execute(
                "UPDATE ctxkit_memory SET content = %s, "
                "metadata = coalesce(%s::jsonb, metadata), updated = %s "
                "WHERE id = %s AND collection = %s",
                (content, encoded, time.time(), item, self.collection),
            )
            return cursor.rowcount

        if not await self._run(work):
            raise UnknownMemory(f"{self.path} holds no item {item} (never stored, or forgotten)")

    async def forget(self, item: int) -> bool:
        """Remove an item; False if it was not there."""
        item = _id(item)

        async def work(connection: Any) -> int:
            cursor = await connection.execute(
                "DELETE FROM ctxkit_memory WHERE id = %s AND collection = %s",
                (item, self.collection),
            )
            return cursor.rowcount

        return bool(await self._run(work))

    async def forget_where(self, where: Mapping[str, Any]) -> int:
        """Remove every item whose metadata matches ``where``; how many went. An empty
        ``where`` is refused rather than taken to mean everything."""
        contains = _contains(where)
        if contains is None:
            raise ValueError("forget_where needs at least one metadata key to match")

        async def work(connection: Any) -> int:
            cursor = await connection.execute(
                "DELETE FROM ctxkit_memory WHERE collection = %s AND metadata @> %s::jsonb",
                (self.collection, contains),
            )
            return cursor.rowcount

        return int(await self._run(work))

    async def count(self) -> int:
        """How many items are stored."""

        async def work(connection: Any) -> int:
            cursor = await connection.execute(
                "SELECT count(*) FROM ctxkit_memory WHERE collection = %s", (self.collection,)
            )
            return (await cursor.fetchone())[0]

        return int(await self._run(work))

    async def stats(self) -> MemoryStats:
        """How many items it holds (no vectors: see the class)."""
        return MemoryStats(await self.count(), 0, None, None)

    def close(self) -> None:
        """Calls after this raise (the pool is the process's, and stays)."""
        self._closed = True

    def __repr__(self) -> str:
        return f"DatabaseMemory({self.path!r}, threshold={self.threshold})"


def _text(content: str) -> str:
    """PostgreSQL's text holds no NUL character: it is stored as U+FFFD."""
    return content.replace("\x00", "\ufffd")


def _contains(where: Mapping[str, Any] | None) -> str | None:
    """``where`` as a jsonb containment (``metadata @> ...``), checked as SQLite's memory
    checks it; None for no condition."""
    search.where_clause(where)  # the same mistakes refused with the same words
    if not where:
        return None
    return json.dumps(dict(where), allow_nan=False)


async def _fetch(
    connection: Any, ids: list[int], collection: str | None = None
) -> dict[int, tuple[Any, ...]]:
    if not ids:
        return {}
    sql = "SELECT id, content, metadata, created, updated FROM ctxkit_memory WHERE id = ANY(%s)"
    arguments: list[Any] = [ids]
    if collection is not None:
        sql += " AND collection = %s"
        arguments.append(collection)
    cursor = await connection.execute(sql, arguments)
    return {row[0]: tuple(row) for row in await cursor.fetchall()}
