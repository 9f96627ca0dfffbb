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

With an embedder, the server must have pgvector: opening installs it in the database
(``CREATE EXTENSION vector``) if the server offers it and it is not there yet, and keeps each
item's vector in a table of its own, one size for the whole database::

    ctxkit_memory_vectors (id bigint PRIMARY KEY REFERENCES ctxkit_memory ON DELETE CASCADE,
                           embedding vector(N))
    ctxkit_memory_embedders (collection text PRIMARY KEY, embedder text)

A change of an item's text drops its vector (a trigger, whoever changes it), and a memory
with an embedder gives every item without one its vector before it needs them, as SQLite's
does. A search compares the query's vector with each of the collection's (exactly: no
approximate index) and fuses the two lists as SQLite's memory does
(:func:`~ctxkit.reference.memory.search.combined`). What a memory searches is said at open
(:attr:`DatabaseMemory.search`, and logged); a server without pgvector refuses an embedder
(:class:`~ctxkit.reference.memory.MemoryUnavailable`), never degrading to text alone unasked.
"""

from __future__ import annotations

import array
import json
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ctxkit.reference.memory import search
from ctxkit.reference.memory.embedders import Embedder, embed, embedder_name, pack
from ctxkit.reference.memory.errors import (
    EmbedderError,
    MemoryFileError,
    MemoryUnavailable,
    UnknownMemory,
)
from ctxkit.reference.memory.semantic import (
    CATCH_UP_BATCH,
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
    check_embedder,
    hits,
)
from ctxkit.reference.postgres import connection as db

__all__ = ["SCHEMA", "VECTOR_SCHEMA", "DatabaseMemory"]

log = logging.getLogger(__name__)

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
VECTOR_SCHEMA = """
CREATE TABLE IF NOT EXISTS ctxkit_memory_vectors (
    id bigint PRIMARY KEY REFERENCES ctxkit_memory (id) ON DELETE CASCADE,
    embedding vector({dimensions}) NOT NULL
);
CREATE TABLE IF NOT EXISTS ctxkit_memory_embedders (
    collection text PRIMARY KEY,
    embedder text NOT NULL
);
CREATE OR REPLACE FUNCTION ctxkit_memory_text_changed() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM ctxkit_memory_vectors WHERE id = NEW.id;
        RETURN NULL;
    END $$;
"""
"""Made by the first memory with an embedder in a database (pgvector installed by then)."""
_TRIGGER = """
CREATE TRIGGER ctxkit_memory_text_changed AFTER UPDATE OF content ON ctxkit_memory
    FOR EACH ROW WHEN (OLD.content IS DISTINCT FROM NEW.content)
    EXECUTE FUNCTION ctxkit_memory_text_changed()
"""
_SCHEMA_LOCK = 0x6374786B6D656D  # "ctxkmem"
CONFIG = "english"
_ready: set[str] = set()


def _tsquery(count: int, joiner: str) -> str:
    return f" {joiner} ".join([f"phraseto_tsquery('{CONFIG}', %s)"] * count)


class DatabaseMemory(MemoryBase):
    """Texts with metadata in a PostgreSQL database, found again by query.

    ``url``: the database (``postgresql://...``); ``collection``: this memory's name in it.
    ``threshold`` as for :class:`~ctxkit.reference.memory.SemanticMemory`. ``embedder``:
    searches by vector too, with pgvector (see the module); its size is its ``dimensions``
    attribute, or the length of the vector it gives for one word, asked at open.

    Opening raises :class:`~ctxkit.reference.memory.MemoryUnavailable` when an embedder is
    given and the server has no pgvector (or this role may not install it), and
    :class:`~ctxkit.reference.memory.EmbedderError` when the database's vectors are of
    another size than the embedder's. :attr:`search` says what it searches.
    """

    search: str
    """What a query searches, said at open: ``"full text only"``, or
    ``"vectors (pgvector 0.8.1) and full text"``."""

    def __init__(
        self,
        url: str,
        collection: str,
        embedder: Embedder | None = None,
        *,
        threshold: float = DEFAULT_THRESHOLD,
    ) -> None:
        db.check_url(url)
        if embedder is not None and not callable(embedder):
            raise TypeError(f"embedder must be callable (texts -> vectors), got {embedder!r}")
        self.url = url
        self.collection = collection
        self.threshold = _threshold(threshold)
        self.path = f"{db.display_url(url)}#memory:{collection}"
        """What messages call it (a memory file's ``path``)."""
        self._closed = False
        self.embedder = embedder
        self._name = None if embedder is None else embedder_name(embedder)
        self._dimensions: int | None = None
        self._stored_name: str | None = None
        self._caught_up = embedder is None
        if embedder is not None:
            self._dimensions = _dimensions(embedder, self._name or "?")
        version = db.call(self._open())
        self.search = (
            "full text only" if version is None else f"vectors (pgvector {version}) and full text"
        )
        log.info("%s searches %s", self.path, self.search)

    async def _open(self) -> str | None:
        """Make sure of the tables; with an embedder, of pgvector and the vectors' (their
        size checked, this collection's embedder read): pgvector's version, or None."""
        pool = await db.pool(self.url)
        async with pool.connection() as connection:
            if self.url not in _ready:
                async with connection.transaction():
                    await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                    await connection.execute(SCHEMA)
                _ready.add(self.url)
            if self.embedder is None:
                return None
            async with connection.transaction():
                await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                version = await self._pgvector(connection)
                await connection.execute(VECTOR_SCHEMA.format(dimensions=int(self._dimensions)))
                cursor = await connection.execute(
                    "SELECT 1 FROM pg_trigger WHERE tgname = 'ctxkit_memory_text_changed' "
                    "AND tgrelid = 'ctxkit_memory'::regclass"
                )
                if await cursor.fetchone() is None:
                    await connection.execute(_TRIGGER)
                cursor = await connection.execute(
                    "SELECT atttypmod FROM pg_attribute WHERE attname = 'embedding' "
                    "AND attrelid = 'ctxkit_memory_vectors'::regclass"
                )
                (size,) = await cursor.fetchone()
                if size != self._dimensions:
                    raise EmbedderError(
                        f"{self.path}: this database's vectors have {size} numbers "
                        f"(ctxkit_memory_vectors.embedding is vector({size})) and the embedder "
                        f"{self._name} gives {self._dimensions}; one database holds vectors "
                        "of one size: use an embedder of that size, or another database"
                    )
                cursor = await connection.execute(
                    "SELECT embedder FROM ctxkit_memory_embedders WHERE collection = %s",
                    (self.collection,),
                )
                row = await cursor.fetchone()
                self._stored_name = None if row is None else row[0]
                return version

    async def _pgvector(self, connection: Any) -> str:
        """pgvector's version in this database, installed first if the server offers it;
        :class:`MemoryUnavailable` if it cannot be."""
        cursor = await connection.execute(
            "SELECT installed_version, default_version FROM pg_available_extensions "
            "WHERE name = 'vector'"
        )
        row = await cursor.fetchone()
        if row is None:
            raise MemoryUnavailable(
                f"{self.path}: vectors in PostgreSQL need the pgvector extension, which this "
                "server does not have (no 'vector' in pg_available_extensions); install it on "
                "the server (Debian: postgresql-NN-pgvector), open the memory without an "
                "embedder to search text only (tsvector), or keep it in SQLite (memory_path=FILE)"
            )
        if row[0] is not None:
            return str(row[0])
        psycopg = db._psycopg()
        try:
            async with connection.transaction():  # a savepoint: a refusal leaves the rest
                await connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.InsufficientPrivilege:
            raise MemoryUnavailable(
                f"{self.path}: the server has pgvector {row[1]} but this database has not "
                "installed it, and this role may not: ask its owner to run CREATE EXTENSION "
                "vector, or open the memory without an embedder to search text only"
            ) from None
        cursor = await connection.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        )
        return str((await cursor.fetchone())[0])

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

    # -- vectors ------------------------------------------------------------------------------

    async def _vectors(self, texts: list[str], *, query: bool = False) -> list[str]:
        """One vector per text, checked as SQLite's memory checks them, in pgvector's text."""
        assert self.embedder is not None
        check_embedder(self.path, self._stored_name, self._name, "a collection")
        vectors = await embed(self.embedder, texts, query=query)
        packed, _ = pack(vectors, len(texts), self._dimensions, self._name or "?")
        return [_literal(vector) for vector in packed]

    async def _claim(self, connection: Any) -> None:
        """Record this collection's embedder with its first vector; if another process
        recorded another one meanwhile, refuse (the transaction is rolled back)."""
        cursor = await connection.execute(
            "INSERT INTO ctxkit_memory_embedders (collection, embedder) VALUES (%s, %s) "
            "ON CONFLICT (collection) DO UPDATE SET embedder = ctxkit_memory_embedders.embedder "
            "RETURNING embedder",
            (self.collection, self._name),
        )
        (self._stored_name,) = await cursor.fetchone()
        check_embedder(self.path, self._stored_name, self._name, "a collection")

    async def _catch_up(self) -> None:
        """Embed what was stored without a vector (by a memory without an embedder, or
        changed by one)."""
        if self._caught_up:
            return
        check_embedder(self.path, self._stored_name, self._name, "a collection")

        async def missing(connection: Any, after: int) -> list[tuple[int, str]]:
            cursor = await connection.execute(
                "SELECT m.id, m.content FROM ctxkit_memory m "
                "LEFT JOIN ctxkit_memory_vectors v ON v.id = m.id "
                "WHERE m.collection = %s AND m.id > %s AND v.id IS NULL ORDER BY m.id LIMIT %s",
                (self.collection, after, CATCH_UP_BATCH),
            )
            return [(row[0], row[1]) for row in await cursor.fetchall()]

        async def write(connection: Any, rows: list[tuple[int, str]], vectors: list[str]) -> None:
            async with connection.transaction():
                await self._claim(connection)
                for (item, content), vector in zip(rows, vectors, strict=True):
                    await connection.execute(  # unless it changed or went meanwhile
                        "INSERT INTO ctxkit_memory_vectors (id, embedding) "
                        "SELECT id, %s::vector FROM ctxkit_memory WHERE id = %s AND content = %s "
                        "ON CONFLICT (id) DO NOTHING",
                        (vector, item, content),
                    )

        after = 0
        while rows := await self._run(missing, after):
            vectors = await self._vectors([content for _, content in rows])
            await self._run(write, rows, vectors)
            after = rows[-1][0]
        self._caught_up = True

    # -- the interface (``store`` and ``async with``: MemoryBase's) ---------------------------

    async def store_many(
        self, items: Iterable[str | tuple[str, Mapping[str, Any] | None]]
    ) -> list[int]:
        """Keep many texts in one transaction (and one embedder call): all or none."""
        prepared = [(_text(content), metadata) for content, metadata in _prepared(items)]
        if not prepared:
            return []
        vectors: list[str | None] = [None] * len(prepared)
        if self.embedder is not None:
            await self._catch_up()
            vectors = list(await self._vectors([content for content, _ in prepared]))

        async def work(connection: Any) -> list[int]:
            at = time.time()
            ids = []
            async with connection.transaction(), connection.cursor() as cursor:
                if self.embedder is not None:
                    await self._claim(connection)
                for (content, metadata), vector in zip(prepared, vectors, strict=True):
                    insert = (
                        "INSERT INTO ctxkit_memory (collection, content, metadata, created, "
                        "updated) VALUES (%s, %s, %s::jsonb, %s, %s) RETURNING id"
                    )
                    arguments: list[Any] = [self.collection, content, metadata, at, at]
                    if vector is not None:
                        insert = (
                            f"WITH item AS ({insert}) INSERT INTO ctxkit_memory_vectors "
                            "(id, embedding) SELECT id, %s::vector FROM item RETURNING id"
                        )
                        arguments.append(vector)
                    await cursor.execute(insert, arguments)
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
        vector: str | None = None
        if self.embedder is not None:
            await self._catch_up()
            (vector,) = await self._vectors([query], query=True)
        elif not words:
            return []

        async def work(connection: Any) -> list[Hit]:
            depth = search.depth(limit) if vector else limit
            async with connection.transaction():  # one snapshot: every count agrees
                text = await self._text_search(connection, words, depth, floor, contains)
                near = None
                if vector is not None:
                    near = await self._vector_search(connection, vector, depth, floor, contains)
                found = search.combined(text, near, limit)
                return hits(found, await _fetch(connection, [item for item, *_ in found]))

        return await self._run(work)

    async def _vector_search(
        self, connection: Any, vector: str, limit: int, floor: float, contains: str | None
    ) -> list[search.Found]:
        """The ``limit`` nearest of the collection's vectors (every one compared)."""
        extra, arguments = ("", []) if contains is None else (" AND m.metadata @> %s", [contains])
        cursor = await connection.execute(
            "SELECT m.id, v.embedding <=> %s::vector AS distance FROM ctxkit_memory m "
            f"JOIN ctxkit_memory_vectors v ON v.id = m.id WHERE m.collection = %s{extra} "
            "ORDER BY distance, m.id DESC LIMIT %s",
            [vector, self.collection, *arguments, limit],
        )
        return search.nearest(await cursor.fetchall(), floor)

    async def _text_search(
        self, connection: Any, words: list[str], limit: int, floor: float, contains: str | None
    ) -> list[search.Found]:
        if not words:
            return []
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
        return search.best(weighed, candidates, floor, limit)

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
        """Replace an item's text (and its metadata, when given); its vector is made again
        (without an embedder, dropped). Raises
        :class:`~ctxkit.reference.memory.UnknownMemory` if there is no such item."""
        item, content = _id(item), _text(_content(content))
        encoded = None if metadata is None else _metadata(metadata)
        vector = None
        if self.embedder is not None:
            await self._catch_up()
            (vector,) = await self._vectors([content])

        async def work(connection: Any) -> int:
            async with connection.transaction():
                cursor = await connection.execute(
                    "UPDATE ctxkit_memory SET content = %s, "
                    "metadata = coalesce(%s::jsonb, metadata), updated = %s "
                    "WHERE id = %s AND collection = %s",
                    (content, encoded, time.time(), item, self.collection),
                )
                if cursor.rowcount and vector is not None:
                    await self._claim(connection)
                    await connection.execute(
                        "INSERT INTO ctxkit_memory_vectors (id, embedding) "
                        "VALUES (%s, %s::vector) "
                        "ON CONFLICT (id) DO UPDATE SET embedding = excluded.embedding",
                        (item, vector),
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
        """How many items and vectors it holds, of what size and whose."""

        async def work(connection: Any) -> MemoryStats:
            cursor = await connection.execute(
                "SELECT to_regclass('ctxkit_memory_vectors') IS NOT NULL"
            )
            if not (await cursor.fetchone())[0]:  # no memory of this database has had vectors
                cursor = await connection.execute(
                    "SELECT count(*) FROM ctxkit_memory WHERE collection = %s", (self.collection,)
                )
                return MemoryStats((await cursor.fetchone())[0], 0, None, None)
            cursor = await connection.execute(
                "SELECT count(m.id), count(v.id), (SELECT embedder FROM ctxkit_memory_embedders "
                "WHERE collection = %s), (SELECT atttypmod FROM pg_attribute "
                "WHERE attname = 'embedding' AND attrelid = 'ctxkit_memory_vectors'::regclass) "
                "FROM ctxkit_memory m LEFT JOIN ctxkit_memory_vectors v ON v.id = m.id "
                "WHERE m.collection = %s",
                (self.collection, self.collection),
            )
            items, vectors, embedder, size = await cursor.fetchone()
            return MemoryStats(items, vectors, size if embedder else None, embedder)

        return await self._run(work)

    async def reembed(self) -> int:
        """Make every vector of the collection again with this memory's embedder (after
        changing models): the old ones go in one transaction, then the new ones are made
        batch by batch (if this stops halfway, the next call that needs vectors goes on).
        Returns how many items have a vector."""
        if self.embedder is None:
            raise EmbedderError(
                "reembed needs an embedder: DatabaseMemory(url, collection, embedder=...)"
            )

        async def drop(connection: Any) -> None:
            async with connection.transaction():
                await connection.execute(
                    "DELETE FROM ctxkit_memory_vectors v USING ctxkit_memory m "
                    "WHERE v.id = m.id AND m.collection = %s",
                    (self.collection,),
                )
                await connection.execute(
                    "DELETE FROM ctxkit_memory_embedders WHERE collection = %s",
                    (self.collection,),
                )

        await self._run(drop)
        self._stored_name, self._caught_up = None, False
        await self._catch_up()
        return (await self.stats()).vectors

    def close(self) -> None:
        """Calls after this raise (the pool is the process's, and stays)."""
        self._closed = True

    def __repr__(self) -> str:
        return (
            f"DatabaseMemory({self.path!r}, embedder={self._name!r}, "
            f"threshold={self.threshold}, search={self.search!r})"
        )


def _dimensions(embedder: Any, name: str) -> int:
    """How many numbers the embedder's vectors have: its ``dimensions``, else what it
    gives for one word (asked once, on the database loop)."""
    size = getattr(embedder, "dimensions", None)
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return size
    _, size = pack(db.call(embed(embedder, ["dimensions"])), 1, None, name)
    return size


def _literal(vector: bytes) -> str:
    """float32 bytes (:func:`~ctxkit.reference.memory.embedders.pack`'s) in pgvector's text
    form, each number with the digits that give the same float32 back."""
    return "[" + ",".join(f"{x:.9g}" for x in array.array("f", vector)) + "]"


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
