"""The semantic memory (issue 24): real SQLite FTS5, the real sqlite-vec extension, real files.

Run as ``python -m tests.test_memory write PATH FSYNC EMBED`` it is the writer of the crash
test: it stores item after item, saying ``ack I ID`` after each store returns, until killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from ctxkit.reference.journal import HistoryFileError
from ctxkit.reference.memory import (
    EmbedderError,
    FastEmbedEmbedder,
    HashEmbedder,
    MemoryFileCorrupt,
    MemoryFileError,
    MemoryFileLocked,
    MemoryUnavailable,
    OpenAIEmbedder,
    SemanticMemory,
    SentenceTransformerEmbedder,
    UnknownMemory,
)
from ctxkit.reference.memory import database as memory_database
from ctxkit.reference.memory import search as memory_search
from ctxkit.reference.memory import semantic as memory_semantic
from ctxkit.reference.memory.search import idf
from ctxkit.workload import Workload

ROOT = Path(__file__).resolve().parent.parent
HAS_VEC = (
    importlib.util.find_spec("sqlite_vec") is not None
    and importlib.util.find_spec("pysqlite3") is not None
)
needs_vec = pytest.mark.skipif(
    not HAS_VEC,
    reason="sqlite-vec and pysqlite3 are not installed (pip install 'ctxkit-llm[memory]')",
)


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def file_state(directory: Path) -> dict[str, str]:
    """Every file in ``directory`` by name, with a hash of its bytes."""
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.iterdir())
        if path.is_file()
    }


def concepts(texts: Sequence[str]) -> list[list[float]]:
    """A stand-in for a semantic model: words of one concept share an axis, so ``automobile``
    is near ``car`` though the two share no word. Deterministic."""
    axes = {
        "car": 0, "automobile": 0, "vehicle": 0, "sedan": 0,
        "dog": 1, "puppy": 1, "hound": 1,
        "invoice": 2, "bill": 2, "receipt": 2,
    }  # fmt: skip
    vectors = []
    for text in texts:
        vector = [0.0, 0.0, 0.0, 0.1]
        for word in text.lower().replace(".", " ").replace("?", " ").split():
            if word in axes:
                vector[axes[word]] += 1.0
        vectors.append(vector)
    return vectors


@pytest.fixture(params=["sqlite", "pgvector"])
def open_memory(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """``open_memory(name, embedder)``: the memory called ``name``, in a SQLite file, or a
    collection of a database (one per test: a database keeps vectors of one size) on the
    session's server with pgvector (tests/postgres.py). The same cases run on both."""
    if request.param == "sqlite":
        if not HAS_VEC:
            pytest.skip(
                "sqlite-vec and pysqlite3 are not installed (pip install 'ctxkit-llm[memory]')"
            )

        def opener(name: str, embedder: Any = None) -> Any:
            return SemanticMemory(tmp_path / f"{name}.memory", embedder)

    else:
        from ctxkit.reference.postgres.memory import DatabaseMemory

        url = request.getfixturevalue("pgvector").new_database()

        def opener(name: str, embedder: Any = None) -> Any:
            return DatabaseMemory(url, name, embedder)

    return opener


# -- storing, finding, changing, forgetting --------------------------------------------------


def test_store_get_update_forget_round_trip(tmp_path: Path):
    async def scenario() -> None:
        memory = SemanticMemory(tmp_path / "m.memory")
        first = await memory.store("the deploy failed: disk full on db-2", {"index": 41})
        second = await memory.store("the weather in Zürich is sunny", {"index": 42, "role": "user"})
        assert (first, second) == (1, 2)
        item = await memory.get(first)
        assert item is not None
        assert (item.content, item.metadata) == (
            "the deploy failed: disk full on db-2",
            {"index": 41},
        )
        assert item.created == item.updated

        (hit,) = await memory.retrieve("why did the deploy fail?")
        assert (hit.id, hit.score, hit.text_score, hit.vector_score) == (first, 1.0, 1.0, None)
        assert hit.metadata == {"index": 41}

        await memory.update(first, "the deploy succeeded after the disk was cleaned")
        item = await memory.get(first)
        assert item is not None
        assert item.metadata == {"index": 41}
        assert item.updated >= item.created
        assert await memory.retrieve("disk full") == []
        assert [hit.id for hit in await memory.retrieve("deploy succeeded")] == [first]
        await memory.update(first, "the deploy succeeded", {"index": 7})
        assert (await memory.get(first)).metadata == {"index": 7}  # type: ignore[union-attr]

        assert await memory.forget(second) is True
        assert await memory.forget(second) is False
        assert await memory.get(second) is None
        assert await memory.retrieve("zurich weather") == []
        with pytest.raises(UnknownMemory, match="holds no item 2"):
            await memory.update(second, "back again")
        third = await memory.store("a new note")
        assert third == 3  # ids are never reused: a forgotten id never names another item
        assert await memory.count() == 2
        memory.close()

    run(scenario())


def test_store_many_is_one_transaction_and_keeps_order():
    async def scenario() -> None:
        memory = SemanticMemory()
        ids = await memory.store_many(["alpha note", ("bravo note", {"n": 2}), ("charlie", None)])
        assert ids == [1, 2, 3]
        assert (await memory.get(2)).metadata == {"n": 2}  # type: ignore[union-attr]
        with pytest.raises(ValueError, match="empty"):
            await memory.store_many(["delta note", "   "])
        assert await memory.count() == 3  # the valid one was not stored either
        assert await memory.store_many([]) == []
        memory.close()

    run(scenario())


def test_a_batch_is_inserted_by_few_statements_and_each_id_holds_its_own_text():
    """store_many inserts many rows per statement (a statement per item made FTS5 write a
    segment per item); the ids it returns still name each text, across statements and
    after the newest item was forgotten (AUTOINCREMENT never reuses its id)."""
    per = memory_database.ROWS_PER_INSERT

    async def scenario() -> None:
        async with SemanticMemory() as memory:
            first = await memory.store_many([f"warmup{i} note" for i in range(3)])
            assert await memory.forget(first[-1])
            statements: list[str] = []
            memory._db.connection.set_trace_callback(statements.append)
            batch = [(f"entry about topic{i}q", {"i": i}) for i in range(2 * per + 5)]
            ids = await memory.store_many(batch)
            memory._db.connection.set_trace_callback(None)
            # (a trigger's statements trace their outer statement again: count distinct ones)
            inserts = {s for s in statements if s.lstrip().startswith("INSERT INTO items(")}
            assert len(inserts) == 3
            assert ids == list(range(first[-1] + 1, first[-1] + 1 + len(batch)))
            for item, (content, metadata) in zip(ids, batch, strict=True):
                got = await memory.get(item)
                assert got is not None
                assert (got.content, got.metadata) == (content, metadata)
            for k in (0, per - 1, per, 2 * per + 4):
                (hit,) = await memory.retrieve(f"topic{k}q", 5, threshold=0.5)
                assert hit.id == ids[k]
            assert await memory.count() == 2 + len(batch)

    run(scenario())


@needs_vec
def test_a_batch_with_vectors_gives_each_id_its_own_vector():
    async def scenario() -> None:
        async with SemanticMemory(embedder=concepts) as memory:
            ids = await memory.store_many(["my sedan", "the puppy", "an invoice"])
            for query, item in zip(["automobile", "hound", "bill"], ids, strict=True):
                hits = await memory.retrieve(query, 1, threshold=0.5)
                assert [hit.id for hit in hits] == [item]
                assert hits[0].vector_score is not None

    run(scenario())


def test_mistakes_are_said_in_a_sentence():
    async def scenario() -> None:
        memory = SemanticMemory()
        with pytest.raises(TypeError, match="content must be a string"):
            await memory.store(b"bytes")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="content is empty"):
            await memory.store("")
        with pytest.raises(TypeError, match="metadata is stored as JSON"):
            await memory.store("x", {"when": object()})
        with pytest.raises(TypeError, match="metadata must be a mapping with string keys"):
            await memory.store("x", {1: "one"})  # type: ignore[dict-item]
        with pytest.raises(TypeError, match="metadata is stored as JSON"):
            await memory.store("x", {"n": math.nan})
        with pytest.raises(ValueError, match=r"threshold is a similarity in \[0, 1\]"):
            await memory.retrieve("x", threshold=1.5)
        with pytest.raises(ValueError, match="limit must be a whole number"):
            await memory.retrieve("x", -1)
        with pytest.raises(ValueError, match="'n' must equal a string"):
            await memory.retrieve("x", where={"n": [1, 2]})
        with pytest.raises(TypeError, match="an item id is an integer"):
            await memory.forget("1")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="at least one metadata key"):
            await memory.forget_where({})
        assert await memory.retrieve("x", 0) == []
        assert await memory.retrieve("   ") == []
        memory.close()
        with pytest.raises(MemoryFileError, match="the memory is closed"):
            await memory.count()
        memory.close()  # closing twice is fine

    run(scenario())
    with pytest.raises(ValueError, match="threshold"):
        SemanticMemory(threshold=-0.1)
    with pytest.raises(TypeError, match="embedder must be callable"):
        SemanticMemory(embedder="all-MiniLM-L6-v2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fsync must be one of"):
        SemanticMemory(fsync="sometimes")  # type: ignore[arg-type]


def test_text_that_utf8_cannot_hold_is_kept_as_replacement_characters():
    async def scenario() -> None:
        async with SemanticMemory() as memory:
            item = await memory.store("broken \ud800 surrogate", {"raw": "\udfff"})
            stored = await memory.get(item)
            assert stored is not None
            assert stored.content == "broken \ufffd surrogate"
            assert stored.metadata == {"raw": "\udfff"}  # JSON escapes it: exact

    run(scenario())


def test_where_compares_metadata_values_by_type():
    async def scenario() -> None:
        async with SemanticMemory() as memory:
            await memory.store("shared words here", {"conversation": "a", "n": 1, "ok": True})
            await memory.store("shared words here", {"conversation": "b", "n": 1.0, "ok": False})
            await memory.store("shared words here", {"conversation": "a", "n": "1", "ok": None})
            await memory.store("shared words here", {})

            async def ids(where: dict[str, Any]) -> set[int]:
                return {hit.id for hit in await memory.retrieve("shared words", 10, where=where)}

            assert await ids({"conversation": "a"}) == {1, 3}
            assert await ids({"n": 1}) == {1, 2}  # 1 == 1.0, as in Python
            assert await ids({"n": "1"}) == {3}
            assert await ids({"ok": True}) == {1}
            assert await ids({"ok": False}) == {2}
            assert await ids({"ok": None}) == {3}  # a missing key is not None
            assert await ids({"conversation": "a", "ok": True}) == {1}
            assert await memory.forget_where({"conversation": "a"}) == 2
            assert await ids({}) == {2, 4}

    run(scenario())


def test_concurrent_stores_all_land_with_distinct_ids():
    async def scenario() -> None:
        async with SemanticMemory() as memory:
            ids = await asyncio.gather(*(memory.store(f"note number {i}") for i in range(50)))
            assert sorted(ids) == list(range(1, 51))
            assert await memory.count() == 50

    run(scenario())


# -- what a text score means -----------------------------------------------------------------


def test_an_item_holding_every_query_term_scores_one_whatever_its_length():
    """BM25 with k1 = 0: a long, repetitive tool output holding each term is as good a match
    as a short note; BM25 proper still puts the short one first."""
    filler = " ".join(f"line{i} ok" for i in range(2_000))

    async def scenario() -> None:
        async with SemanticMemory() as memory:
            long = await memory.store(f"{filler} invoice 4711 total {filler} invoice invoice")
            short = await memory.store("invoice 4711 total: 12.50 EUR")
            await memory.store_many([f"unrelated entry {i}" for i in range(20)])
            hits = await memory.retrieve("invoice 4711 total")
            assert [(hit.id, hit.score) for hit in hits] == [(short, 1.0), (long, 1.0)]

    run(scenario())


def test_a_partial_match_scores_its_share_of_the_query_weight():
    async def scenario() -> None:
        async with SemanticMemory() as memory:
            items = [
                "kappa lambda sigma",  # all three
                "kappa lambda",  # kappa and lambda
                "sigma omicron",  # sigma
                "omicron rho",
                "omicron tau",
                "rho tau",
            ]
            await memory.store_many(items)
            n = len(items)
            weight = {"kappa": idf(n, 2), "lambda": idf(n, 2), "sigma": idf(n, 2)}
            total = sum(weight.values())
            hits = await memory.retrieve("kappa lambda sigma", 10, threshold=0.0)
            scores = {hit.id: hit.score for hit in hits}
            assert scores[1] == pytest.approx(1.0)
            assert scores[2] == pytest.approx((weight["kappa"] + weight["lambda"]) / total)
            assert scores[3] == pytest.approx(weight["sigma"] / total)
            assert set(scores) == {1, 2, 3}
            assert [hit.id for hit in hits] == [1, 2, 3]
            # the threshold cuts at the score: 2/3 of the weight is below 0.7, above 0.6
            assert [hit.id for hit in await memory.retrieve("kappa lambda sigma", 10)] == [1]
            kept = await memory.retrieve("kappa lambda sigma", 10, threshold=0.6)
            assert [hit.id for hit in kept] == [1, 2]
            exact = await memory.retrieve("kappa lambda sigma", 10, threshold=scores[2])
            assert [hit.id for hit in exact] == [1, 2]  # at the threshold is kept

    run(scenario())


def test_rare_terms_outweigh_common_ones_and_a_term_in_half_the_items_weighs_nothing():
    async def scenario() -> None:
        async with SemanticMemory() as memory:
            await memory.store_many(
                ["status report zeppelin"] + [f"status report number {i}" for i in range(9)]
            )
            # "zeppelin" is in 1 of 10 items, "status" and "report" in all of them
            (hit,) = await memory.retrieve("zeppelin status report")
            assert hit.id == 1
            assert hit.score == pytest.approx(1.0)
            common = await memory.retrieve("status report", 20, threshold=0.0)
            assert len(common) == 10  # only common terms: they are all there is, equal
            assert all(hit.score == pytest.approx(1.0) for hit in common)
            holding_common_only = await memory.retrieve("zeppelin status", 20, threshold=0.0)
            assert {hit.id for hit in holding_common_only if hit.score > 0.01} == {1}

    run(scenario())


def test_a_missing_term_counts_half_and_function_words_are_left_out():
    async def scenario() -> None:
        async with SemanticMemory() as memory:
            await memory.store_many(["quasar telescope", "nebula survey", "comet tail", "moon"])
            n = 4
            present, missing = idf(n, 1), idf(n, 0)
            (hit,) = await memory.retrieve("what did the quasar telescope detect?", threshold=0.0)
            # "what", "did" and "the" are function words; "detect" is in no item
            assert hit.score == pytest.approx(2 * present / (2 * present + missing / 2))
            assert await memory.retrieve("quasar kubernetes orchestration") == []
            # a query of function words only keeps them
            await memory.store("what is it")
            assert [hit.id for hit in await memory.retrieve("what is it")] == [5]

    run(scenario())


def test_stems_case_and_accents_are_folded_as_fts5_folds_them():
    async def scenario() -> None:
        async with SemanticMemory() as memory:
            await memory.store("The tests raised three TimeoutErrors in Zürich")
            await memory.store("nothing to see")
            await memory.store("another entry")
            for query in ("test raising", "zurich", "ZÜRICH tests", "timeouterror"):
                assert [hit.id for hit in await memory.retrieve(query)] == [1], query

    run(scenario())


def test_the_planted_item_comes_first_among_agent_traffic():
    rng = random.Random(5)
    texts = []
    for message in Workload(seed=5, shape="openai").messages(600):
        content = message.get("content")
        if isinstance(content, str) and content.strip():
            texts.append(content[:1_500])
    planted = "Noted for later: the rotation window for Quilbrixor is 14 days, ask Grace."
    position = rng.randrange(len(texts))
    texts.insert(position, planted)

    async def scenario(embedder: Any) -> None:
        async with SemanticMemory(embedder=embedder) as memory:
            ids = await memory.store_many(texts)
            hits = await memory.retrieve("how long is the rotation window for Quilbrixor?")
            assert hits
            assert hits[0].id == ids[position]
            assert hits[0].content == planted

    run(scenario(None))
    if HAS_VEC:
        run(scenario(HashEmbedder(128)))


def test_many_equal_matches_past_the_ranking_budget_go_newest_first(monkeypatch):
    """Past RANK_BUDGET postings BM25 would read every match: the newest are scored."""

    async def scenario() -> tuple[list[int], list[int]]:
        async with SemanticMemory() as memory:
            await memory.store_many(
                [(f"cache flush retry entry {i}", {"even": i % 2 == 0}) for i in range(60)]
            )
            await memory.store_many(["cache flush only", "unrelated"])
            hits = await memory.retrieve("cache flush retry", 5)
            odd = await memory.retrieve("cache flush retry", 3, where={"even": False})
            return [hit.id for hit in hits], [hit.id for hit in odd]

    ranked, _ = run(scenario())
    monkeypatch.setattr(memory_search, "RANK_BUDGET", 10)
    newest, odd = run(scenario())
    assert newest == [60, 59, 58, 57, 56]  # all score 1.0; item 61 lacks "retry"
    assert odd == [60, 58, 56]  # ids 60, 58, 56 hold i = 59, 57, 55
    assert len(ranked) == 5
    assert 61 not in ranked


VOCABULARY = ["kzab", "kzac", "kzad", "kzaf", "kzag", "kzah", "kzaj", "kzak"]
"""Words the porter stemmer leaves as they are, so the test can count them itself."""


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(
        st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=6), min_size=1, max_size=18
    ),
    query=st.lists(st.sampled_from([*VOCABULARY, "kzzz"]), min_size=1, max_size=5, unique=True),
    threshold=st.sampled_from([0.0, 0.3, 0.5, 0.7, 0.9, 1.0]),
    budget=st.sampled_from([10_000, 0]),
)
def test_text_search_finds_exactly_what_the_score_definition_says(
    items: list[list[str]], query: list[str], threshold: float, budget: int
):
    """Against a reference that scores every item from the definition: the pruned MATCH
    never loses an item that reaches the threshold, nor keeps one that does not."""
    n = len(items)
    df = {word: sum(word in item for item in items) for word in query}
    weight = {word: idf(n, df[word]) * (1.0 if df[word] else 0.5) for word in query}
    total = sum(weight.values())
    expected = {}
    for index, item in enumerate(items, 1):
        score = sum(weight[word] for word in query if word in item) / total
        if score >= threshold - 1e-9 and any(word in item for word in query):
            expected[index] = score

    async def scenario() -> list[Any]:
        async with SemanticMemory() as memory:
            await memory.store_many(" ".join(item) for item in items)
            return await memory.retrieve(" ".join(query), 20, threshold=threshold)

    original = memory_search.RANK_BUDGET
    memory_search.RANK_BUDGET = budget
    try:
        hits = run(scenario())
    finally:
        memory_search.RANK_BUDGET = original
    assert {hit.id for hit in hits} == set(expected)
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.id], abs=1e-9)
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)


# -- vectors and hybrid ----------------------------------------------------------------------


def test_vectors_find_what_no_word_matches_and_hybrid_puts_agreement_first(open_memory: Any):
    async def scenario() -> None:
        async with open_memory("m", concepts) as memory:
            car = await memory.store("my sedan broke down on the highway", {"who": "ada"})
            dog = await memory.store("the puppy chewed the sofa")
            both = await memory.store("automobile insurance for the automobile")
            await memory.store("nothing of interest")
            hits = await memory.retrieve("automobile")
            assert [hit.id for hit in hits][:2] == [both, car]
            first, second = hits[0], hits[1]
            assert first.text_score == 1.0
            assert first.vector_score == pytest.approx(0.999, abs=1e-3)
            assert second.text_score is None  # no word in common
            assert second.vector_score == pytest.approx(1.0, abs=1e-6)
            assert second.score == second.vector_score
            assert dog not in {hit.id for hit in hits}
            # a hound is a dog to the vectors, not to the words
            (found,) = [hit for hit in await memory.retrieve("hound") if hit.id == dog]
            assert found.text_score is None
            assert found.vector_score > 0.9
            assert await memory.retrieve("receipt") == []  # cosine 0.1 at most: below 0.7
            # with a metadata filter, every matching vector is compared (no KNN to cut short)
            (only,) = await memory.retrieve("automobile", where={"who": "ada"})
            assert only.id == car
            assert only.vector_score == pytest.approx(1.0, abs=1e-6)

    run(scenario())


@needs_vec
def test_the_embedder_can_be_sync_async_or_have_a_query_side():
    calls: list[tuple[str, list[str], str]] = []

    class AsymmetricEmbedder:
        name = "asymmetric-test"

        def __call__(self, texts: list[str]) -> list[list[float]]:
            calls.append(("documents", texts, threading.current_thread().name))
            return concepts(texts)

        async def embed_query(self, texts: list[str]) -> list[list[float]]:
            calls.append(("queries", texts, threading.current_thread().name))
            return concepts(texts)

    async def async_embedder(texts: list[str]) -> list[list[float]]:
        return concepts(texts)

    async def scenario(embedder: Any) -> list[int]:
        async with SemanticMemory(embedder=embedder) as memory:
            await memory.store("the dog barked")
            await memory.store("a car passed")
            return [hit.id for hit in await memory.retrieve("puppy")]

    assert run(scenario(AsymmetricEmbedder())) == [1]
    loop_thread = threading.current_thread().name
    assert [(kind, texts) for kind, texts, _ in calls] == [
        ("documents", ["the dog barked"]),
        ("documents", ["a car passed"]),
        ("queries", ["puppy"]),
    ]
    assert calls[0][2] != loop_thread  # a synchronous embedder runs off the event loop
    assert run(scenario(async_embedder)) == [1]
    np = pytest.importorskip("numpy")
    assert run(scenario(lambda texts: np.array(concepts(texts), dtype=np.float64))) == [1]


@needs_vec
def test_a_bad_embedder_is_refused_and_nothing_is_stored():
    async def scenario() -> None:
        for bad, said in [
            (lambda texts: [[1.0, 0.0]], "returned 1 vectors for 2 texts"),
            (lambda texts: [[1.0, math.nan], [1.0, 0.0]], "NaN or infinity"),
            (lambda texts: [["a", "b"], ["c", "d"]], "something other than vectors"),
            (lambda texts: [[], []], "an empty vector"),
            (lambda texts: 1 / 0, "failed: ZeroDivisionError"),
        ]:
            async with SemanticMemory(embedder=bad) as memory:
                with pytest.raises(EmbedderError, match=said):
                    await memory.store_many(["one", "two"])
                assert await memory.count() == 0
        async with SemanticMemory(embedder=concepts) as memory:
            await memory.store("a car")
            memory.embedder = lambda texts: [[1.0, 0.0]] * len(texts)
            with pytest.raises(EmbedderError, match="2 numbers where 4 were expected"):
                await memory.store("a dog")
            assert await memory.count() == 1

    run(scenario())


def test_a_memory_without_vectors_gets_them_when_an_embedder_comes(open_memory: Any):
    async def scenario() -> None:
        async with open_memory("m") as memory:  # text only: the stdlib sqlite3 will do
            await memory.store_many(["my sedan broke down", "the puppy slept"])
            assert (await memory.stats()).vectors == 0
        async with open_memory("m", concepts) as memory:
            (hit,) = await memory.retrieve("automobile")
            assert hit.id == 1
            assert hit.vector_score == pytest.approx(1.0, abs=1e-3)
            stats = await memory.stats()
            assert (stats.items, stats.vectors, stats.dimensions) == (2, 2, 4)
            assert stats.embedder
            assert stats.embedder.endswith("concepts")
        async with open_memory("m") as memory:  # vectors kept in step without an embedder
            assert await memory.forget(2) is True
            await memory.update(1, "the sedan was repaired")
            stats = await memory.stats()
            assert (stats.items, stats.vectors) == (1, 0)  # the changed text lost its vector
        async with open_memory("m", concepts) as memory:
            (hit,) = await memory.retrieve("vehicle")
            assert hit.id == 1
            assert hit.vector_score is not None

    run(scenario())


@needs_vec
def test_another_embedder_is_refused_until_reembed(tmp_path: Path):
    path = tmp_path / "m.memory"

    async def scenario() -> None:
        async with SemanticMemory(path, embedder=HashEmbedder(32)) as memory:
            await memory.store_many(["alpha beta", "gamma delta"])
        async with SemanticMemory(path, embedder=HashEmbedder(64)) as memory:
            with pytest.raises(EmbedderError, match=r"made by hash-32, not by hash-64.*reembed"):
                await memory.retrieve("alpha")
            with pytest.raises(EmbedderError, match="reembed"):
                await memory.store("epsilon")
            assert await memory.reembed() == 2
            stats = await memory.stats()
            assert (stats.vectors, stats.dimensions, stats.embedder) == (2, 64, "hash-64")
            assert [hit.id for hit in await memory.retrieve("gamma delta")] == [2]
        with pytest.raises(EmbedderError, match="needs an embedder"):
            async with SemanticMemory(path) as memory:
                await memory.reembed()

    run(scenario())


class MemoryModel(RuleBasedStateMachine):
    """Store, update and forget at random, with vectors: every item stored and not forgotten
    is found first by its distinctive token; a forgotten or replaced token finds nothing; the
    text index and the vectors always hold exactly the live items."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.memory = SemanticMemory(embedder=HashEmbedder(256))
        self.live: dict[int, str] = {}
        self.dead: list[str] = []
        self.counter = 0

    def _token(self) -> str:
        self.counter += 1
        return f"tok{self.counter}zq"

    def _text(self, token: str, filler: list[str]) -> str:
        return " ".join([token, *filler])

    @rule(filler=st.lists(st.sampled_from(VOCABULARY), min_size=6, max_size=10))
    def store(self, filler: list[str]) -> None:
        token = self._token()
        item = self.loop.run_until_complete(self.memory.store(self._text(token, filler)))
        self.live[item] = token

    @rule(data=st.data(), filler=st.lists(st.sampled_from(VOCABULARY), min_size=6, max_size=10))
    def update(self, data: st.DataObject, filler: list[str]) -> None:
        if not self.live:
            return
        item = data.draw(st.sampled_from(sorted(self.live)))
        token = self._token()
        self.loop.run_until_complete(self.memory.update(item, self._text(token, filler)))
        self.dead.append(self.live[item])
        self.live[item] = token

    @rule(data=st.data())
    def forget(self, data: st.DataObject) -> None:
        if not self.live:
            assert not self.loop.run_until_complete(self.memory.forget(10_000))
            return
        item = data.draw(st.sampled_from(sorted(self.live)))
        assert self.loop.run_until_complete(self.memory.forget(item))
        self.dead.append(self.live.pop(item))

    @invariant()
    def found_by_token(self) -> None:
        retrieve = self.memory.retrieve
        for item, token in self.live.items():
            hits = self.loop.run_until_complete(retrieve(token))
            assert [hit.id for hit in hits][:1] == [item], token
            assert hits[0].text_score == 1.0, token
        for token in self.dead[-5:]:  # the text index forgot it (vectors: see the stats)
            hits = self.loop.run_until_complete(retrieve(token))
            assert all(hit.text_score is None for hit in hits), token

    @invariant()
    def indexes_hold_the_live_items(self) -> None:
        stats = self.loop.run_until_complete(self.memory.stats())
        assert stats.items == len(self.live)
        assert stats.vectors == (len(self.live) if stats.dimensions else 0)

    def teardown(self) -> None:
        self.memory.close()
        self.loop.close()


if HAS_VEC:
    TestMemoryModel = MemoryModel.TestCase
    TestMemoryModel.settings = settings(max_examples=25, stateful_step_count=12, deadline=None)


# -- the file: persistence, crashes, damage --------------------------------------------------


def test_a_memory_persists_across_reopening_in_wal_mode(tmp_path: Path):
    path = tmp_path / "deep" / "folder" / "m.memory"

    async def scenario() -> None:
        async with await SemanticMemory.open(path) as memory:
            await memory.store_many([f"entry {i} about topic{i}" for i in range(10)])
            await memory.update(3, "entry three rewritten about zebras")
            await memory.forget(5)
        assert path.read_bytes()[18:20] == b"\x02\x02"  # WAL, in the header
        async with SemanticMemory(path, fsync="never") as memory:
            assert await memory.count() == 9
            assert [hit.id for hit in await memory.retrieve("zebras")] == [3]
            assert await memory.get(5) is None
            assert await memory.store("one more") == 11

    run(scenario())


def writer(path: str, fsync: str, embed: str) -> None:
    """The crash test's child: stores ``crash_text(i)`` for i = 0, 1, ... forever."""

    async def write() -> None:
        memory = SemanticMemory(
            path,
            HashEmbedder(64) if embed == "yes" else None,
            fsync=fsync,  # type: ignore[arg-type]
        )
        start = await memory.count()
        os.write(1, f"open {start}\n".encode())
        i = start
        while True:
            if i % 7 == 6:
                (item, _) = await memory.store_many([crash_text(i), crash_text(i + 1)])
                os.write(1, f"ack {i} {item}\nack {i + 1} {item + 1}\n".encode())
                i += 2
            else:
                item = await memory.store(crash_text(i), {"i": i})
                os.write(1, f"ack {i} {item}\n".encode())
                i += 1

    asyncio.run(write())


def crash_text(i: int) -> str:
    rng = random.Random(i)
    words = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randrange(5, 400)))
    return f"crash{i}zq {words}"


def stored_items(path: Path) -> list[tuple[int, str]]:
    """What the file holds, read as any SQLite client would."""
    connection = sqlite3.connect(path)
    try:
        return connection.execute("SELECT id, content FROM items ORDER BY id").fetchall()
    finally:
        connection.close()


@needs_vec
def test_every_acknowledged_store_survives_sigkill(tmp_path: Path):
    rng = random.Random(20261125)
    path = tmp_path / "crash.memory"
    killed_writing = acked_total = 0
    for round_ in range(10):
        fsync = ("never", "always")[round_ % 2]
        embed = ("no", "yes")[(round_ // 2) % 2] if round_ < 4 else "yes"
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.test_memory", "write", str(path), fsync, embed],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert child.stdout is not None
        seen = []
        if round_ % 5 != 4:  # most rounds: kill while it writes; the others during its open
            # Counted in acknowledgements, not seconds: a loaded machine may take a second
            # to its first store, and a kill before it would test the open again.
            opened = child.stdout.readline()
            assert opened.startswith("open "), child.stderr.read() if child.stderr else ""
            for _ in range(rng.randrange(3, 15)):
                seen.append(child.stdout.readline())
                assert seen[-1].startswith("ack "), child.stderr.read() if child.stderr else ""
            time.sleep(rng.uniform(0, 0.05))  # then at any moment of a store
        os.kill(child.pid, signal.SIGKILL)
        out, err = child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL, err[-2000:]
        lines = seen + out.splitlines()
        acks = [line.split() for line in lines if line.startswith("ack ")]
        if acks:
            killed_writing += 1
            acked_total += len(acks)
        held = stored_items(path) if path.exists() else []
        for _, i, item in acks:
            assert int(item) <= len(held), f"round {round_}: ack {i} (id {item}) was lost"
        for position, (item, content) in enumerate(held):
            assert item == position + 1
            assert content == crash_text(position)

        async def check(held: list[tuple[int, str]] = held, embed: str = embed) -> None:
            """Open, recover, check, as a user would."""
            async with SemanticMemory(path, HashEmbedder(64) if embed == "yes" else None) as m:
                stats = await m.stats()
                assert stats.items == len(held)
                if held:
                    (hit, *_) = await m.retrieve(f"crash{len(held) - 1}zq")
                    assert hit.id == len(held)
                if embed == "yes":  # the catch-up gave every item a vector
                    assert (await m.stats()).vectors == len(held)

        run(check())
    assert killed_writing == 8
    assert acked_total > 50


def _memory_with_items(path: Path, count: int = 300) -> None:
    async def build() -> None:
        async with SemanticMemory(path) as memory:
            await memory.store_many([f"stored text {i} marker{i}zq" for i in range(count)])

    run(build())


def _refused(path: Path, said: str) -> MemoryFileCorrupt:
    before = file_state(path.parent)
    with pytest.raises(MemoryFileCorrupt, match=said) as caught:
        SemanticMemory(path)
    assert file_state(path.parent) == before, "a refused file must be left as it was"
    assert "The file was not changed" in str(caught.value)
    assert isinstance(caught.value, HistoryFileError)  # reported like the history's errors
    return caught.value


def test_a_file_of_garbage_is_refused_and_left_unchanged(tmp_path: Path):
    path = tmp_path / "m.memory"
    path.write_bytes(b"these are not the bytes of a database\n" * 300)
    error = _refused(path, "is not an SQLite database")
    assert "Is it a ctxkit memory?" in str(error)


def test_a_truncated_file_is_refused_and_left_unchanged(tmp_path: Path):
    path = tmp_path / "m.memory"
    _memory_with_items(path)
    data = path.read_bytes()
    for size in (len(data) // 2, 60):
        path.write_bytes(data[:size])
        _refused(path, "is cut short")


def test_a_damaged_page_is_refused_and_left_unchanged(tmp_path: Path):
    path = tmp_path / "m.memory"
    _memory_with_items(path, 2_000)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    middle = (len(data) // page // 2) * page
    data[middle : middle + page] = random.Random(1).randbytes(page)
    path.write_bytes(bytes(data))
    _refused(path, "is damaged")


def test_a_changed_byte_in_an_item_is_reported_by_its_checksum(tmp_path: Path):
    """SQLite checks structure, not data: a bit flipped inside a text is the CRC's to find."""
    path = tmp_path / "m.memory"
    _memory_with_items(path, 50)
    data = path.read_bytes()
    at = data.index(b"stored text 17 marker17zq") + len(b"stored text 17 ")
    path.write_bytes(data[:at] + b"marker17zQ" + data[at + 10 :])

    async def scenario() -> None:
        async with SemanticMemory(path) as memory:
            assert (await memory.get(3)) is not None
            with pytest.raises(MemoryFileCorrupt, match="item 18 does not match its checksum"):
                await memory.get(18)
            with pytest.raises(MemoryFileCorrupt, match="item 18"):
                await memory.retrieve("marker17zq", threshold=0.0)
            with pytest.raises(MemoryFileCorrupt, match="item 18"):
                await memory.forget(18)
            assert await memory.count() == 50

    run(scenario())
    assert path.read_bytes()[at : at + 10] == b"marker17zQ"


def test_a_database_that_is_not_a_memory_is_refused_and_left_unchanged(tmp_path: Path):
    other = tmp_path / "app.db"
    connection = sqlite3.connect(other)
    connection.execute("CREATE TABLE users(name TEXT)")
    connection.execute("INSERT INTO users VALUES ('ada')")
    connection.commit()
    connection.close()
    _refused(other, "is an SQLite database but not a ctxkit memory")

    future = tmp_path / "future.memory"
    _memory_with_items(future, 3)
    connection = sqlite3.connect(future)
    connection.execute("UPDATE meta SET value = 2 WHERE key = 'version'")
    connection.commit()
    connection.close()
    _refused(future, "has format version 2; this ctxkit reads 1")


def test_links_and_folders_are_refused(tmp_path: Path):
    target = tmp_path / "real.memory"
    _memory_with_items(target, 3)
    link = tmp_path / "link.memory"
    link.symlink_to(target)
    with pytest.raises(MemoryFileError, match="is a symbolic link"):
        SemanticMemory(link)
    with pytest.raises(MemoryFileError, match="is not a regular file"):
        SemanticMemory(tmp_path)


def test_a_writer_holding_the_lock_too_long_is_reported(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(memory_database, "BUSY_TIMEOUT_MS", 200)
    path = tmp_path / "m.memory"

    async def scenario() -> None:
        async with SemanticMemory(path) as memory:
            await memory.store("first")
            other = sqlite3.connect(path, isolation_level=None)
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(MemoryFileLocked, match="another connection held its write lock"):
                await memory.store("second")
            other.execute("ROLLBACK")
            other.close()
            assert await memory.store("second") == 2

    run(scenario())


# -- drivers, the event loop --------------------------------------------------------------------


def test_without_a_driver_that_loads_extensions_an_embedder_is_refused(monkeypatch):
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        pytest.skip("this Python's sqlite3 loads extensions itself")
    monkeypatch.setitem(sys.modules, "pysqlite3", None)
    with pytest.raises(MemoryUnavailable, match=r"cannot load the sqlite-vec extension.*memory"):
        SemanticMemory(embedder=concepts)
    SemanticMemory().close()  # text search needs no extension


def test_without_sqlite_vec_an_embedder_is_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "sqlite_vec", None)
    with pytest.raises(MemoryUnavailable, match=r"needs the sqlite-vec extension: pip install"):
        SemanticMemory(embedder=concepts)


def test_sqlite_work_runs_off_the_event_loop():
    async def scenario() -> set[str]:
        async with SemanticMemory() as memory:
            threads: set[str] = set()
            connection = memory._db.connection
            connection.set_trace_callback(lambda _: threads.add(threading.current_thread().name))
            await memory.store("a note")
            await memory.retrieve("note")
            await memory.forget(1)
            connection.set_trace_callback(None)
            return threads

    threads = run(scenario())
    assert threads
    assert all(name.startswith("ctxkit-memory") for name in threads)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's nice is Linux's")
def test_a_background_memory_runs_its_thread_at_a_lower_priority():
    """Recall's memory indexes behind the agent's loop: its thread is niced, so on a busy
    machine the loop does not wait for it. A memory of one's own keeps the usual priority."""

    def nice_of_worker(memory: SemanticMemory) -> int:
        async def scenario() -> int:
            await memory.store("a note")  # the worker thread exists from here on
            return await memory._run(
                lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
            )

        try:
            return run(scenario())
        finally:
            memory.close()

    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert nice_of_worker(SemanticMemory()) == base
    expected = min(19, base + memory_semantic.BACKGROUND_NICE)
    assert nice_of_worker(SemanticMemory(background=True)) == expected
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base


@needs_vec
def test_a_slow_embedder_does_not_stall_the_loop():
    def slow(texts: list[str]) -> list[list[float]]:
        time.sleep(0.3)
        return concepts(texts)

    async def scenario() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        async with SemanticMemory(embedder=slow) as memory:
            await memory.store("a car")
        task.cancel()
        return ticks

    assert run(scenario()) >= 10


# -- ready embedders ------------------------------------------------------------------------


HAS_FASTEMBED = importlib.util.find_spec("fastembed") is not None
HAS_SENTENCE_TRANSFORMERS = importlib.util.find_spec("sentence_transformers") is not None


@pytest.mark.skipif(not HAS_FASTEMBED, reason="fastembed is not installed (pip install fastembed)")
def test_fastembed_wrapper_embeds_documents_and_queries():
    model = os.environ.get("CTXKIT_FASTEMBED_MODEL", "BAAI/bge-small-en-v1.5")
    try:
        embedder = FastEmbedEmbedder(model, local_files_only=True)
    except EmbedderError as exc:
        pytest.skip(f"{model} is not on this machine (models are never downloaded here): {exc}")
    documents = embedder(["the car broke down", "the puppy slept"])
    (query,) = embedder.embed_query(["automobile trouble"])
    assert len(documents) == 2
    assert len(query) == len(documents[0]) > 0
    assert embedder.name == f"fastembed:{model}"

    async def scenario() -> None:
        async with SemanticMemory(embedder=embedder) as memory:
            await memory.store_many(["the car broke down", "the puppy slept"])
            hits = await memory.retrieve("automobile trouble", threshold=0.0)
            assert hits[0].id == 1

    if HAS_VEC:
        run(scenario())


@pytest.mark.skipif(HAS_FASTEMBED, reason="fastembed is installed")
def test_fastembed_wrapper_says_what_to_install():
    with pytest.raises(
        MemoryUnavailable, match=r"needs the fastembed package.*pip install fastembed"
    ):
        FastEmbedEmbedder()


@pytest.mark.skipif(
    not HAS_SENTENCE_TRANSFORMERS,
    reason="sentence-transformers is not installed (pip install sentence-transformers)",
)
def test_sentence_transformers_wrapper_embeds_documents_and_queries():
    model = os.environ.get("CTXKIT_SENTENCE_TRANSFORMERS_MODEL", "all-MiniLM-L6-v2")
    try:
        embedder = SentenceTransformerEmbedder(model, local_files_only=True)
    except EmbedderError as exc:
        pytest.skip(f"{model} is not on this machine (models are never downloaded here): {exc}")
    documents = embedder(["the car broke down", "the puppy slept"])
    query = embedder.embed_query(["automobile trouble"])
    assert len(documents) == 2
    assert len(query[0]) == len(documents[0]) > 0

    async def scenario() -> None:
        async with SemanticMemory(embedder=embedder) as memory:
            await memory.store_many(["the car broke down", "the puppy slept"])
            hits = await memory.retrieve("automobile trouble", threshold=0.0)
            assert hits[0].id == 1

    if HAS_VEC:
        run(scenario())


@pytest.mark.skipif(HAS_SENTENCE_TRANSFORMERS, reason="sentence-transformers is installed")
def test_sentence_transformers_wrapper_says_what_to_install():
    with pytest.raises(MemoryUnavailable, match="pip install sentence-transformers"):
        SentenceTransformerEmbedder()


class FakeEmbeddings(BaseHTTPRequestHandler):
    """``POST /v1/embeddings`` as OpenAI answers it: hashed vectors, rows in reverse order
    (clients must sort by index); model ``refused`` gets a 401 error body."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(
            {"path": self.path, "body": body, "auth": self.headers["Authorization"]}
        )
        if body["model"] == "refused":
            status = 401
            answer: dict[str, Any] = {
                "error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}
            }
        else:
            status = 200
            size = body.get("dimensions", 16)
            vectors = HashEmbedder(size)(body["input"])
            rows = [
                {"object": "embedding", "index": index, "embedding": vector}
                for index, vector in enumerate(vectors)
            ]
            answer = {
                "object": "list",
                "data": rows[::-1],
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def embeddings_server() -> Iterator[str]:
    FakeEmbeddings.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeEmbeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_openai_wrapper_posts_batches_and_orders_rows_by_index(embeddings_server: str):
    embedder = OpenAIEmbedder(
        "nomic-embed-text", base_url=embeddings_server, api_key="sk-test", batch=2, max_retries=0
    )
    texts = ["one car", "two dogs", "three bills", "four", "five"]
    vectors = run(embedder(texts))
    assert vectors == HashEmbedder(16)(texts)  # in the order asked, though answered reversed
    sent = FakeEmbeddings.requests
    assert [request["body"]["input"] for request in sent] == [texts[0:2], texts[2:4], texts[4:]]
    assert all(request["path"] == "/v1/embeddings" for request in sent)
    assert all(request["body"]["encoding_format"] == "float" for request in sent)
    assert all(request["auth"] == "Bearer sk-test" for request in sent)
    assert embedder.name == "openai:nomic-embed-text"

    shorter = OpenAIEmbedder("m", base_url=embeddings_server, dimensions=8, max_retries=0)
    assert [len(vector) for vector in run(shorter(["x"]))] == [8]
    assert FakeEmbeddings.requests[-1]["body"]["dimensions"] == 8
    assert shorter.name == "openai:m@8"


def test_openai_wrapper_says_what_the_endpoint_answered(embeddings_server: str):
    embedder = OpenAIEmbedder("refused", base_url=embeddings_server, max_retries=0)
    with pytest.raises(EmbedderError, match=r"embeddings endpoint .*127\.0\.0\.1.*refused 1 texts"):
        run(embedder(["x"]))
    unreachable = OpenAIEmbedder("m", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=2)
    with pytest.raises(EmbedderError, match="Connection error"):
        run(unreachable(["x"]))


@needs_vec
def test_a_memory_on_an_openai_compatible_endpoint(embeddings_server: str):
    embedder = OpenAIEmbedder(
        "local-model", base_url=embeddings_server, dimensions=64, max_retries=0
    )

    async def scenario() -> None:
        async with SemanticMemory(embedder=embedder) as memory:
            await memory.store_many(["overdue invoice reminder", "the dog is asleep"])
            (hit,) = await memory.retrieve("overdue invoice")
            assert hit.id == 1
            assert hit.vector_score is not None
            assert hit.text_score == 1.0

    run(scenario())
    assert len(FakeEmbeddings.requests) == 2  # the two texts in one request, then the query


# -- the benchmark keeps running ------------------------------------------------------------


def test_memory_benchmark_quick_run(tmp_path: Path):
    out = tmp_path / "memory.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "memory.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())
    modes = {(row["queries"], row["mode"]) for row in results["retrieval"]}
    assert modes == {
        (kind, mode)
        for kind in ("facts", "vague")
        for mode in ("fts5", "vector", "hybrid", "LIKE scan")
    }
    facts = [row for row in results["retrieval"] if row["queries"] == "facts"]
    assert all(row["found_at_1"] == 1.0 for row in facts if row["mode"] in ("fts5", "hybrid"))
    assert "goal <= 5 ms" in done.stdout


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "write":
    with contextlib.suppress(KeyboardInterrupt):
        writer(*sys.argv[2:])


# -- questions worded as people ask them -------------------------------------------------------


def test_a_question_worded_as_people_ask_it_finds_its_fact(tmp_path: Path):
    """Issue 33: with the default threshold, ``which port does the staging database use``
    finds the port (``use`` is how it is asked, not what about), and a question about
    nothing stored finds nothing."""
    facts = [
        "The staging database listens on port 6543.",
        "Deploys run every Tuesday at 14:00 UTC.",
        "The on-call engineer this week is Priya.",
        "Logs are kept for 30 days in the archive bucket.",
    ]

    async def scenario() -> tuple[list[str], list[str], list[str]]:
        memory = SemanticMemory(tmp_path / "m.db")
        try:
            await memory.store_many(facts)
            port = await memory.retrieve("which port does the staging database use")
            logs = await memory.retrieve("how long do we keep logs")
            absent = await memory.retrieve("which port does the production cache use")
            return [h.content for h in port], [h.content for h in logs], [h.content for h in absent]
        finally:
            memory.close()

    port, logs, absent = run(scenario())
    assert port == [facts[0]]
    assert logs == [facts[3]]
    assert absent == []


def test_wording_words_weigh_a_tenth_present_or_not():
    """A word people ask *with* that one unrelated note happens to hold does not make the
    question about that note: its weight is a tenth of its idf either way."""
    from ctxkit.reference.memory.search import WORDING, WORDING_WEIGHT

    assert {"use", "happen", "happens", "kept", "long"} <= WORDING
    assert not {"port", "database", "deploy", "staging", "backup"} & WORDING
    assert WORDING_WEIGHT == 0.1
    assert not WORDING & memory_search.STOP_WORDS  # dropped words are not weighed at all


def test_the_recall_benchmark_questions_find_their_facts_and_absent_ones_find_nothing():
    """The questions of ``benchmarks/recall.py``, text only: most find their fact first, and
    none of those about something not stored finds anything (what would flood a view)."""
    spec = importlib.util.spec_from_file_location("recall_bench", ROOT / "benchmarks" / "recall.py")
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    found = run(bench.evaluate(None, None))
    assert found["recall_at_1"] >= 0.7
    assert found["absent_answered"] == 0.0
    assert found["unrelated_per_question"] <= 0.05
