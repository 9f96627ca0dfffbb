"""What the live-conversation table costs: a scrape, a view, and memory, at 1 to 10k
conversations.

The Prometheus subscriber keeps one row per live conversation and aggregates the rows when
scraped (:mod:`ctxkit.telemetry.conversations`). Side by side in one run, for 1, 100, 1k and
10k live conversations (each having had one view):

* scrape: ``generate_latest`` of the whole registry, what Prometheus's request costs the
  process (median of repeats);
* view: the subscriber's work for one view event, what deferred delivery costs per request;
* memory: what the table holds (tracemalloc, the rows' own allocations).

    python benchmarks/fleet_metrics.py                 # a few seconds
    python benchmarks/fleet_metrics.py --sizes 1 10000 --repeats 50
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any

from agent_loop import machine
from prometheus_client import CollectorRegistry, generate_latest

from ctxkit import events
from ctxkit.events import Event
from ctxkit.telemetry.prometheus import PrometheusMetrics


def view(conversation: int, tokens: int) -> Event:
    return Event(
        events.VIEW,
        {
            "conversation_id": f"conversation-{conversation}",
            "token_count": tokens,
            "budget": 32_000,
            "compact_threshold": 0.7,
            "history_tokens": tokens * 3,
            "history_messages": 120,
            "prefix_tokens": tokens - 500,
            "previous_tokens": tokens - 200,
            "duration_s": 0.002,
        },
    )


def measure(size: int, repeats: int) -> dict[str, Any]:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    metrics = PrometheusMetrics(CollectorRegistry())
    for number in range(size):
        metrics(view(number, 5_000 + number % 20_000))
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    table_bytes = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    scrapes = []
    for _ in range(repeats):
        started = time.perf_counter()
        body = generate_latest(metrics.registry)
        scrapes.append(time.perf_counter() - started)
    assert f"ctxkit_conversations {float(size)}".encode() in body
    events_ = [view(number % size, 6_000) for number in range(2_000)]
    started = time.perf_counter()
    for event in events_:
        metrics(event)
    per_view = (time.perf_counter() - started) / len(events_)
    return {
        "conversations": size,
        "scrape_ms": round(statistics.median(scrapes) * 1000, 3),
        "view_us": round(per_view * 1e6, 2),
        "memory_kib": round(table_bytes / 1024, 1),
        "bytes_per_conversation": round(table_bytes / size) if size else 0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 100, 1_000, 10_000])
    parser.add_argument("--repeats", type=int, default=30, help="scrapes per size (30)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    rows = [measure(size, args.repeats) for size in args.sizes]
    base = rows[0]
    print(f"machine: {machine()}\n")
    print(
        f"{'conversations':>13}{'scrape ms':>11}{'vs first':>10}{'view us':>10}{'vs first':>10}"
        f"{'table KiB':>11}{'bytes each':>12}"
    )
    for row in rows:
        print(
            f"{row['conversations']:>13,}{row['scrape_ms']:>11}"
            f"{row['scrape_ms'] / base['scrape_ms']:>9.1f}x{row['view_us']:>10}"
            f"{row['view_us'] / base['view_us']:>9.2f}x{row['memory_kib']:>11}"
            f"{row['bytes_per_conversation']:>12,}"
        )
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
