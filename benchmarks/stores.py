"""The agent loop on each store, side by side: no store, a history file and PostgreSQL.

For each store and durability (``fsync="always"``: a history file's ``fdatasync``, the
database's commit waiting for its disk; ``"never"``: the operating system, or
``synchronous_commit off``), in one run:

* **appends**: the history (``--messages``, 10,000 by default: synthetic agent traffic) added
  one ``add_message`` at a time, each acknowledged only once it is stored: appends per second;
* **open**: a new manager opening that conversation (reading and checking every record, no
  token counted again) until it is ready;
* **loop step**: what an agent does per turn on the full history: add one tool round (an
  assistant message with its calls, then their results), then ask for a view under a 128k
  budget (median and p95 of ``--steps`` steps); and **view** alone, the request, which is
  served from memory on every store, so it should not move. Between the adds and the view
  the loop waits 2 ms (not counted), as an agent waits for the model, so a view is not timed
  while the store's threads finish waking from the last write.

The database is a throwaway cluster of Debian's server (``initdb`` in a temporary folder, fsync
on, as a real server runs; as the ``postgres`` user when run as root), or the one
``--postgres URL`` names. Ratios are to the manager without a store; absolute times on a shared
machine are noise.

    python benchmarks/stores.py                          # 10,000 messages (a minute or two)
    python benchmarks/stores.py --messages 500 --steps 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from agent_loop import BUDGET, history_of, loop_steps, machine, percentile  # noqa: E402

from ctxkit.reference import ReferenceContextManager  # noqa: E402
from ctxkit.tokens import load_encoding  # noqa: E402

STORES = (
    ("no store", None, None),
    ("file, fsync=never", "file", "never"),
    ("file, fsync=always", "file", "always"),
    ("postgres, fsync=never", "postgres", "never"),
    ("postgres, fsync=always", "postgres", "always"),
)


def options(kind: str | None, fsync: str | None, folder: Path, url: str | None) -> dict[str, Any]:
    """A new conversation's manager options on ``kind`` of store."""
    name = f"bench-{uuid.uuid4().hex[:8]}"
    if kind == "file":
        return {"storage_path": folder / f"{name}.jsonl", "fsync": fsync}
    if kind == "postgres":
        return {"store": url, "conversation": name, "fsync": fsync}
    return {}


async def measure(
    config: dict[str, Any], history: list[dict[str, Any]], steps: list[list[dict[str, Any]]]
) -> dict[str, Any]:
    manager = ReferenceContextManager(**config)
    gc.collect()
    started = time.perf_counter()
    for message in history:
        await manager.add_message(message)
    appending = time.perf_counter() - started
    manager.close()
    opened = None
    if config:
        started = time.perf_counter()
        manager = await asyncio.to_thread(lambda: ReferenceContextManager(**config))
        opened = time.perf_counter() - started
        assert len(await manager.get_messages()) == len(history)
    else:
        manager = ReferenceContextManager()
        await manager.set_messages(history)
    await manager.get_messages_for_request(token_budget=BUDGET)  # the first view: warm
    step_times, view_times = [], []
    for step in steps:
        t0 = time.perf_counter()
        for message in step:
            await manager.add_message(message)
        t1 = time.perf_counter()
        await asyncio.sleep(0.002)  # what the store's threads do after an add settles
        t2 = time.perf_counter()
        await manager.get_messages_for_request(token_budget=BUDGET)
        t3 = time.perf_counter()
        step_times.append(t1 - t0 + t3 - t2)
        view_times.append(t3 - t2)
    manager.close()
    return {
        "appends_per_s": len(history) / appending,
        "open_s": opened,
        "step_median_ms": statistics.median(step_times) * 1e3,
        "step_p95_ms": percentile(step_times, 0.95) * 1e3,
        "view_median_ms": statistics.median(view_times) * 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=10_000, help="history size (10000)")
    parser.add_argument("--steps", type=int, default=50, help="loop steps measured (50)")
    parser.add_argument("--postgres", metavar="URL", help="this database, not a new cluster")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    load_encoding()
    history = history_of(args.messages)
    steps = loop_steps(args.steps)
    with contextlib.ExitStack() as stack:
        url = args.postgres
        if url is None:
            from tests.postgres import started_cluster

            url = stack.enter_context(started_cluster(durable=True)).url
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ctxkit-stores-")))
        results = {
            label: asyncio.run(measure(options(kind, fsync, folder, url), history, steps))
            for label, kind, fsync in STORES
        }
    base = results["no store"]
    print(f"the agent loop at {len(history):,} messages on each store; {machine()}")
    header = (
        f"{'store':<24}{'appends/s':>11}{'vs none':>9}{'open s':>8}{'step ms':>9}"
        f"{'p95':>7}{'vs none':>9}{'view ms':>9}{'vs none':>9}"
    )
    print(header)
    for label, row in results.items():
        opened = "-" if row["open_s"] is None else f"{row['open_s']:.2f}"
        print(
            f"{label:<24}{row['appends_per_s']:>11,.0f}"
            f"{row['appends_per_s'] / base['appends_per_s']:>9.3f}{opened:>8}"
            f"{row['step_median_ms']:>9.2f}{row['step_p95_ms']:>7.2f}"
            f"{row['step_median_ms'] / base['step_median_ms']:>9.2f}"
            f"{row['view_median_ms']:>9.2f}{row['view_median_ms'] / base['view_median_ms']:>9.2f}"
        )
    file_always = results["file, fsync=always"]["appends_per_s"]
    pg_always = results["postgres, fsync=always"]["appends_per_s"]
    print(
        f"postgres against the file, durable appends: {pg_always / file_always:.2f}x the "
        "file's rate; views are served from memory on every store"
    )
    if args.json is not None:
        args.json.write_text(
            json.dumps({"messages": len(history), "steps": len(steps), "stores": results}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
