"""Semantic memory in PostgreSQL: SemanticMemory's behaviour on the server's full-text search
(the same cases on SQLite and on the session's cluster, parametrized), and a store's recall
memory in its database."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from ctxkit.reference import ReferenceContextManager
from ctxkit.reference.memory import (
    HashEmbedder,
    MemoryFileError,
    MemoryUnavailable,
    SemanticMemory,
    UnknownMemory,
)
from tests.chat import run
from tests.test_recall import ASK, long_conversation

FACTS = [
    ("The staging database listens on port 6543.", {"kind": "fact", "n": 1}),
    ("Deploys happen every Tuesday at 10am, never on Fridays.", {"kind": "fact", "n": 2}),
    ("Lunch was a sandwich with too much mustard.", {"kind": "chat", "n": 3}),
    ("The cat sat on the warm keyboard all afternoon.", {"kind": "chat", "n": 4}),
]


@pytest.fixture(params=["sqlite", "postgresql"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        opened: Any = SemanticMemory(tmp_path / "memory.sqlite")
    else:
        from ctxkit.reference.postgres.memory import DatabaseMemory

        url = request.getfixturevalue("postgres").url
        opened = DatabaseMemory(url, f"m-{uuid.uuid4().hex[:8]}")
    yield opened
    opened.close()


def test_retrieve_finds_what_a_question_is_about_with_the_same_scores(memory: Any):
    async def scenario() -> None:
        ids = await memory.store_many(FACTS)
        (hit,) = await memory.retrieve("which port does the staging database use")
        assert hit.id == ids[0]
        assert hit.metadata == {"kind": "fact", "n": 1}
        assert 0.9 < hit.score <= 1.0
        assert hit.text_score == hit.score
        assert hit.vector_score is None
        (hit,) = await memory.retrieve("when do deploys happen")
        assert (hit.id, hit.score) == (ids[1], 1.0)
        assert await memory.retrieve("kubernetes ingress controller") == []
        assert await memory.retrieve("   ") == []
        assert await memory.retrieve("mustard", limit=0) == []

    run(scenario())


def test_where_update_forget_and_count(memory: Any):
    async def scenario() -> None:
        ids = await memory.store_many(FACTS)
        assert await memory.count() == 4
        assert [h.id for h in await memory.retrieve("cat keyboard", where={"kind": "chat"})] == [
            ids[3]
        ]
        assert await memory.retrieve("cat keyboard", where={"kind": "fact"}) == []
        await memory.update(ids[3], "The dog slept on the warm keyboard.")
        assert await memory.retrieve("cat keyboard", threshold=0.9) == []
        (hit,) = await memory.retrieve("dog keyboard")
        assert hit.metadata == {"kind": "chat", "n": 4}  # kept: no metadata given
        item = await memory.get(ids[3])
        assert item is not None
        assert item.content.startswith("The dog")
        assert item.updated >= item.created
        assert await memory.forget(ids[3]) is True
        assert await memory.forget(ids[3]) is False
        assert await memory.get(ids[3]) is None
        with pytest.raises(UnknownMemory):
            await memory.update(ids[3], "gone")
        assert await memory.forget_where({"kind": "fact"}) == 2
        assert await memory.count() == 1
        with pytest.raises(ValueError, match="at least one metadata key"):
            await memory.forget_where({})
        with pytest.raises(ValueError, match="must equal a string"):
            await memory.retrieve("x", where={"kind": ["a"]})
        with pytest.raises(ValueError, match="empty"):
            await memory.store("   ")

    run(scenario())


def test_text_a_database_cannot_hold_is_stored_as_near_as_it_can(memory: Any):
    async def scenario() -> None:
        item = await memory.store("a NUL \x00 and a lone surrogate \ud800 in a tool output")
        (hit,) = await memory.retrieve("tool output surrogate")
        assert hit.id == item

    run(scenario())


def test_a_closed_memory_refuses_calls(memory: Any):
    memory.close()
    with pytest.raises(MemoryFileError, match="closed"):
        run(memory.count())


def test_vectors_without_pgvector_are_refused_at_open_in_one_sentence(postgres: Any):
    from ctxkit.reference.postgres.memory import DatabaseMemory

    with pytest.raises(MemoryUnavailable, match="need the pgvector extension") as caught:
        DatabaseMemory(postgres.url, "vectors", HashEmbedder())
    assert "\n" not in str(caught.value)


def test_a_store_keeps_its_recall_memory_in_its_database(postgres: Any):
    """recall={} with a store: the conversation's messages are stored in the database's
    memory as they are added, and an old tool result asked about again comes back."""
    history = long_conversation()
    name = f"recall-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        async with ReferenceContextManager(
            store=postgres.url, conversation=name, recall={}, fsync="never"
        ) as manager:
            for message in history:
                await manager.add_message(message)
            budget = manager.usage()["history_tokens"] // 4
            await manager.add_message(ASK)
            assert await manager.memory_synced()
            view = await manager.get_messages_for_request(token_budget=budget)
            assert history[3] in view  # the result asked about, with its call
            assert view[view.index(history[3]) - 1] == history[2]
            assert type(manager.memory).__name__ == "DatabaseMemory"
            stored = await manager.memory.count()
        async with ReferenceContextManager(
            store=postgres.url, conversation=name, recall={}, fsync="never"
        ) as again:
            assert await again.memory_synced()
            assert await again.memory.count() == stored  # not stored twice on reopening

    run(scenario())
