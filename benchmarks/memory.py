"""Semantic memory retrieval, side by side: FTS5, vector, hybrid, and a naive LIKE scan.

A memory of N items (synthetic agent traffic: each message's text, cut at 2,000 characters)
with 40 planted facts among them, each about a made-up name ("the rotation window for
Vexaron is 14 days"). Measured at 10k and 100k items, in one run:

* **fts5**: ``SemanticMemory.retrieve`` with no embedder (the embedded default);
* **vector**: the sqlite-vec KNN alone (cosine, 384 dimensions, ``HashEmbedder``; no threshold);
* **hybrid**: ``retrieve`` with the embedder (both searches, fused);
* **LIKE scan**: the baseline, one SQL pass over every item counting which query words it
  holds (``content LIKE '%word%'``), best count first.

Two query sets: *facts* (a question about a planted fact, the recall case: "how long is the
rotation window for Vexaron?"; found@1 says how often the fact came first) and *vague*
(three of the traffic's most common words: every search's worst case). Times are medians per
query, in milliseconds (each query run three times, the fastest kept); ``hits`` is how many a
query returned on average (limit 5, threshold 0.7). Absolute times on a shared machine are
noise: read the ratios.
Also shown: storing one item (fsync always and never) and opening the file (it is checked).

    python benchmarks/memory.py                 # 10k and 100k (a few minutes: the vectors)
    python benchmarks/memory.py --quick         # a tiny run that only shows it works
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent_loop import machine, percentile

from ctxkit.messages import text_of
from ctxkit.reference.memory import HashEmbedder, SemanticMemory
from ctxkit.reference.memory import search as memory_search
from ctxkit.reference.memory.embedders import pack
from ctxkit.workload import Workload

DIMENSIONS = 384
FACTS = 40
MAX_CHARS = 2_000
GOAL_MS = 5.0
SYLLABLES = ("vex", "ar", "on", "quil", "brix", "tor", "mad", "en", "zu", "lo", "rik", "sa", "fen")
SUBJECTS = [
    ("rotation window", "is {n} days", "how long is the rotation window for {name}?"),
    ("on-call owner", "is {person}", "who is the on-call owner of {name}?"),
    ("release checksum", "is {hex}", "what was the release checksum of {name}?"),
    ("staging port", "is {n}", "which staging port does {name} listen on?"),
]
PEOPLE = ["Ada", "Grace", "Linus", "Barbara", "Ken", "Margaret", "Edsger", "Frances"]


def made_up_name(rng: random.Random, taken: set[str]) -> str:
    while True:
        name = "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()
        if name not in taken:
            taken.add(name)
            return name


def corpus(
    size: int, seed: int = 7
) -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, int]]]:
    """``size`` items with the planted facts among them, and ``(question, index of its fact)``."""
    rng = random.Random(seed)
    texts: list[str] = []
    workload = Workload(seed=seed, shape="openai")
    while len(texts) < size - FACTS:
        for message in workload.messages(min(20_000, 2 * (size - FACTS - len(texts)) + 50)):
            text = text_of(message).strip()
            if text:
                texts.append(text[:MAX_CHARS])
        texts = texts[: size - FACTS]
    taken: set[str] = set()
    questions = []
    for fact in range(FACTS):
        name = made_up_name(rng, taken)
        subject, value, question = SUBJECTS[fact % len(SUBJECTS)]
        said = value.format(
            n=rng.randint(2, 90), person=rng.choice(PEOPLE), hex=f"{rng.getrandbits(48):012x}"
        )
        index = rng.randrange(len(texts) + 1)
        texts.insert(index, f"Noted for later: the {subject} for {name} {said}.")
        for position, (_, known) in enumerate(questions):
            if known >= index:
                questions[position] = (questions[position][0], known + 1)
        questions.append((question.format(name=name), index))
    items = [(text, {"index": index}) for index, text in enumerate(texts)]
    return items, questions


def vague_queries(items: list[tuple[str, dict[str, Any]]], count: int) -> list[str]:
    """Three common words each (from the 40 most common longer words of the traffic)."""
    counts: dict[str, int] = {}
    for text, _ in items[:5_000]:
        for word in set(text.lower().split()):
            if word.isalpha() and len(word) > 4:
                counts[word] = counts.get(word, 0) + 1
    common = sorted(counts, key=counts.get, reverse=True)[:40]  # type: ignore[arg-type]
    rng = random.Random(3)
    return [" ".join(rng.sample(common, 3)) for _ in range(count)]


def like_scan(memory: SemanticMemory, query: str, limit: int) -> list[int]:
    """The baseline: every item, every query word, ``LIKE``; best count first."""
    words = [
        w for w in memory_search._WORD.findall(query) if w.lower() not in memory_search.STOP_WORDS
    ]
    if not words:
        return []
    count = " + ".join("(content LIKE ?)" for _ in words)
    rows = memory._db.connection.execute(
        f"SELECT id, {count} AS n FROM items WHERE n > 0 ORDER BY n DESC, id DESC LIMIT ?",
        [*(f"%{word}%" for word in words), limit],
    ).fetchall()
    return [row[0] for row in rows]


async def timed(calls: list[Any], repeat: int) -> tuple[list[float], list[Any]]:
    """Seconds per call (each call run ``repeat`` times, the fastest kept) and the results."""
    times, results = [], []
    for call in calls:
        best = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            result = call()
            if asyncio.iscoroutine(result):
                result = await result
            best = min(best, time.perf_counter() - started)
        times.append(best)
        results.append(result)
    return times, results


def first_id(result: Any) -> int | None:
    if not result:
        return None
    head = result[0]
    return head if isinstance(head, int) else getattr(head, "id", None)


async def measure(size: int, directory: Path, repeat: int, queries: int) -> list[dict[str, Any]]:
    items, questions = corpus(size)
    questions = questions[:queries]
    vague = vague_queries(items, queries)
    path = directory / f"memory-{size}.db"
    embedder = HashEmbedder(DIMENSIONS)
    started = time.perf_counter()
    memory = SemanticMemory(path, embedder, fsync="never")
    for start in range(0, len(items), 2_000):
        await memory.store_many(items[start : start + 2_000])
    built = time.perf_counter() - started
    memory.close()
    started = time.perf_counter()
    fts = SemanticMemory(path)
    opened = time.perf_counter() - started
    hybrid = SemanticMemory(path, embedder)
    print(
        f"\n{size:,} items: stored with vectors in {built:.1f} s; "
        f"{path.stat().st_size / 1e6:.0f} MB; opening (checked) {opened * 1e3:.0f} ms"
    )
    rows = []
    loop_db = hybrid._db

    def vector_only(question: str) -> Any:
        (vector,), _ = pack(embedder([question]), 1, DIMENSIONS, embedder.name)
        return hybrid._executor.submit(
            loop_db.read,
            lambda: memory_search.vector_search(loop_db, vector, 5, 0.0, None),
        ).result()

    modes = [
        ("fts5", lambda q: fts.retrieve(q, 5)),
        ("vector", vector_only),
        ("hybrid", lambda q: hybrid.retrieve(q, 5)),
        ("LIKE scan", lambda q: fts._executor.submit(like_scan, fts, q, 5).result()),
    ]
    for kind, texts in (("facts", [q for q, _ in questions]), ("vague", vague)):
        fts_median = None
        for name, run in modes:
            times, results = await timed(
                [lambda q=q, run=run: run(q) for q in texts],
                1 if name == "LIKE scan" else repeat,
            )
            median = statistics.median(times) * 1e3
            fts_median = fts_median or median
            row: dict[str, Any] = {
                "items": size,
                "queries": kind,
                "mode": name,
                "median_ms": median,
                "p95_ms": percentile(times, 0.95) * 1e3,
                "vs_fts5": median / fts_median,
                "hits": statistics.mean(len(result) for result in results),
            }
            if kind == "facts":
                expected = [items[index][1]["index"] for _, index in questions]
                firsts = [first_id(result) for result in results]
                row["found_at_1"] = sum(
                    first is not None and first - 1 == want
                    for first, want in zip(firsts, expected, strict=True)
                ) / len(expected)
            rows.append(row)
            found = f"{row['found_at_1']:>6.0%}" if "found_at_1" in row else f"{'':>6}"
            print(
                f"{size:>8,}  {kind:<6} {name:<10} {median:>9.2f} {row['p95_ms']:>9.2f} "
                f"{row['hits']:>5.1f} {found} {row['vs_fts5']:>8.1f}x"
            )
            sys.stdout.flush()
    fts.close()
    hybrid.close()
    return rows


async def store_latency(directory: Path, count: int) -> dict[str, float]:
    """Median ms to store one item, per fsync policy (text only)."""
    result = {}
    for fsync in ("never", "always"):
        path = directory / f"store-{fsync}.db"
        memory = SemanticMemory(path, fsync=fsync)  # type: ignore[arg-type]
        times = []
        for index in range(count):
            started = time.perf_counter()
            await memory.store(f"message {index}: the cache worker retried the flush", {"i": index})
            times.append(time.perf_counter() - started)
        memory.close()
        result[fsync] = statistics.median(times) * 1e3
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=40, help="questions per set (40)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per query, fastest kept (3)")
    parser.add_argument("--quick", action="store_true", help="300 items, 8 queries, 1 run")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.queries, args.repeat = [300], 8, 1
    print(f"machine: {machine()}")
    print(f"planted facts: {FACTS}; vectors: HashEmbedder({DIMENSIONS}); limit 5, threshold 0.7")
    header = (
        f"{'items':>8}  {'set':<6} {'mode':<10} {'median ms':>9} {'p95 ms':>9} {'hits':>5} "
        f"{'found@1':>6} {'vs fts5':>9}"
    )
    results: dict[str, Any] = {"machine": machine(), "retrieval": []}
    with tempfile.TemporaryDirectory(prefix="ctxkit-memory-bench-") as scratch:
        directory = Path(scratch)
        print(header)
        for size in args.sizes:
            results["retrieval"] += asyncio.run(measure(size, directory, args.repeat, args.queries))
        stores = asyncio.run(store_latency(directory, 50 if args.quick else 300))
    results["store_ms"] = stores
    print(
        f"\nstore one item: {stores['never']:.2f} ms (fsync=never), "
        f"{stores['always']:.2f} ms (fsync=always)"
    )
    largest = max(args.sizes)
    for row in results["retrieval"]:
        if row["items"] == largest and row["mode"] == "fts5":
            verdict = "met" if row["median_ms"] <= GOAL_MS else "NOT met"
            print(
                f"fts5 at {largest:,} items, {row['queries']} queries: {row['median_ms']:.2f} ms "
                f"per query (goal <= {GOAL_MS:g} ms: {verdict})"
            )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
