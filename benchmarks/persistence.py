"""What a history file costs: ``add_message`` per fsync policy, and opening a 50k-message file.

Two measurements, each side by side in one run with its baseline:

* **add throughput**: the same synthetic agent traffic (``agent_loop.history_of``) added to a
  manager without a file, with ``fsync="never"`` and with ``fsync="always"``, in rotating
  order per round; next to it the disk's own floor for ``always``: writing the same records
  with ``os.write`` + ``os.fdatasync`` and nothing else. Adds per second (median of rounds)
  and the ratio to the manager without a file.
* **load**: a history file of 50k messages (written once by a manager, ``fsync="never"``),
  opened by a new manager until it is ready, against reading the file and parsing every line
  with ``json.loads`` and nothing else (the floor the goal is set against: within 2x).
  Interleaved pairs; the ratio is the median of the pairs' ratios, so drift on a shared
  machine hits both sides of a pair alike. Also shown: ``read_history_file`` (parse and
  check the lines, no history built), and the plain parse with Python's cycle collector
  paused, as the manager pauses it while loading, so the trick's share is visible.

    python benchmarks/persistence.py                       # a few minutes (the 50k file)
    python benchmarks/persistence.py --adds 300 --load-messages 3000 --rounds 1
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent_loop import history_of, machine

from ctxkit.reference import ReferenceContextManager
from ctxkit.reference.journal import encode_record, read_history_file
from ctxkit.tokens import TokenCounter, load_encoding

ADD_MODES = ("no file", "fsync=never", "fsync=always", "floor: write+fdatasync")
LOAD_MODES = (
    "json.loads per line",
    "json.loads, GC paused",
    "read_history_file",
    "open manager",
)


async def add_all(messages: list[dict[str, Any]], path: Path | None, fsync: str) -> float:
    """Seconds to add every message to a new manager (with a file at ``path`` if given)."""
    if path is None:
        manager = ReferenceContextManager()
    else:
        manager = ReferenceContextManager(storage_path=path, fsync=fsync)
    started = time.perf_counter()
    for message in messages:
        await manager.add_message(message)
    elapsed = time.perf_counter() - started
    manager.close()
    return elapsed


def write_floor(lines: list[bytes], path: Path) -> float:
    """Seconds to append the records and fdatasync after each: the disk's part of ``always``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    started = time.perf_counter()
    for line in lines:
        os.write(fd, line)
        os.fdatasync(fd)
    elapsed = time.perf_counter() - started
    os.close(fd)
    return elapsed


def measure_adds(messages: list[dict[str, Any]], rounds: int, directory: Path) -> dict[str, Any]:
    counter = TokenCounter()
    lines = [
        encode_record(
            {"op": "add", "at": 0.0, "message": m, "cost": dict(counter.message_cost(m).parts)}
        )
        for m in messages
    ]
    seconds: dict[str, list[float]] = {mode: [] for mode in ADD_MODES}
    for round_ in range(rounds):
        order = ADD_MODES[round_ % len(ADD_MODES) :] + ADD_MODES[: round_ % len(ADD_MODES)]
        for mode in order:
            path = directory / f"adds-{round_}-{ADD_MODES.index(mode)}.jsonl"
            gc.collect()
            if mode == "no file":
                elapsed = asyncio.run(add_all(messages, None, "never"))
            elif mode.startswith("fsync="):
                elapsed = asyncio.run(add_all(messages, path, mode.split("=")[1]))
            else:
                elapsed = write_floor(lines, path)
            seconds[mode].append(elapsed)
            path.unlink(missing_ok=True)
            print(
                f"  adds round {round_ + 1}: {mode:<24} {len(messages) / elapsed:9,.0f}/s",
                file=sys.stderr,
            )
    base = statistics.median(seconds["no file"])
    return {
        mode: {
            "adds_per_s": round(len(messages) / statistics.median(times)),
            "us_per_add": round(statistics.median(times) / len(messages) * 1e6, 1),
            "time_vs_no_file": round(statistics.median(times) / base, 2),
        }
        for mode, times in seconds.items()
    }


def plain_parse(path: Path, *, collector: bool = True) -> float:
    """Read the file and ``json.loads`` every line; ``collector=False`` with Python's cycle
    collector paused, as the manager's own load does (see manager._collector_paused)."""
    if not collector:
        gc.disable()
    started = time.perf_counter()
    with open(path, "rb") as file:
        data = file.read()
    records = [json.loads(line) for line in data.split(b"\n") if line]
    elapsed = time.perf_counter() - started
    gc.enable()
    assert records
    return elapsed


def parse_only(path: Path) -> float:
    started = time.perf_counter()
    loaded = read_history_file(path)
    elapsed = time.perf_counter() - started
    assert loaded.records
    return elapsed


def open_manager(path: Path, expected: int) -> float:
    started = time.perf_counter()
    manager = ReferenceContextManager(storage_path=path, fsync="never")
    elapsed = time.perf_counter() - started
    assert manager.usage()["history_messages"] == expected
    manager.close()
    return elapsed


def measure_load(messages: list[dict[str, Any]], repeats: int, directory: Path) -> dict[str, Any]:
    path = directory / "history.jsonl"
    started = time.perf_counter()
    asyncio.run(add_all(messages, path, "never"))
    print(
        f"  wrote {len(messages):,} messages ({path.stat().st_size / 1e6:.0f} MB) in "
        f"{time.perf_counter() - started:.0f} s",
        file=sys.stderr,
    )
    seconds: dict[str, list[float]] = {mode: [] for mode in LOAD_MODES}
    ratios, paused_ratios = [], []
    for repeat in range(repeats):
        gc.collect()
        pair = {}
        for mode in LOAD_MODES if repeat % 2 == 0 else LOAD_MODES[::-1]:
            if mode == "json.loads per line":
                pair[mode] = plain_parse(path)
            elif mode == "json.loads, GC paused":
                pair[mode] = plain_parse(path, collector=False)
            elif mode == "read_history_file":
                pair[mode] = parse_only(path)
            else:
                pair[mode] = open_manager(path, len(messages))
            gc.collect()
        for mode, elapsed in pair.items():
            seconds[mode].append(elapsed)
        ratios.append(pair["open manager"] / pair["json.loads per line"])
        paused_ratios.append(pair["open manager"] / pair["json.loads, GC paused"])
        print(
            f"  load repeat {repeat + 1}: " + ", ".join(f"{m} {s:.2f} s" for m, s in pair.items()),
            file=sys.stderr,
        )
    base = statistics.median(seconds["json.loads per line"])
    result: dict[str, Any] = {
        "messages": len(messages),
        "file_mb": round(path.stat().st_size / 1e6, 1),
        "modes": {
            mode: {
                "seconds": round(statistics.median(times), 3),
                "vs_plain": round(statistics.median(times) / base, 2),
            }
            for mode, times in seconds.items()
        },
        "open_vs_plain_median_of_pairs": round(statistics.median(ratios), 2),
        "open_vs_paused_plain_median_of_pairs": round(statistics.median(paused_ratios), 2),
    }
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--adds", type=int, default=3_000, help="messages per add run (3000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the add modes (3)")
    parser.add_argument(
        "--load-messages", type=int, default=50_000, help="messages in the file opened (50000)"
    )
    parser.add_argument("--repeats", type=int, default=5, help="interleaved load repeats (5)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    load_encoding()
    with tempfile.TemporaryDirectory(prefix="ctxkit-bench-", dir=Path.cwd()) as tmp:
        directory = Path(tmp)
        print(f"add throughput: {args.adds} messages x {args.rounds} rounds", file=sys.stderr)
        adds = measure_adds(history_of(args.adds), args.rounds, directory)
        print(f"load: {args.load_messages:,} messages x {args.repeats} repeats", file=sys.stderr)
        load = measure_load(history_of(args.load_messages), args.repeats, directory)
    results = {"machine": machine(), "adds": adds, "load": load}
    print(f"\nmachine: {results['machine']}")
    print(f"\nadd_message, {args.adds:,} messages of agent traffic (median of {args.rounds})")
    print(f"{'mode':<26}{'adds/s':>10}{'us/add':>10}{'time vs no file':>17}")
    for mode, row in adds.items():
        print(
            f"{mode:<26}{row['adds_per_s']:>10,}{row['us_per_add']:>10}{row['time_vs_no_file']:>16}x"
        )
    size = f"{load['messages']:,}-message history ({load['file_mb']} MB"
    print(f"\nopening a {size}, median of {args.repeats})")
    print(f"{'mode':<26}{'seconds':>10}{'vs plain':>10}")
    for mode, row in load["modes"].items():
        print(f"{mode:<26}{row['seconds']:>10}{row['vs_plain']:>9}x")
    ratio = load["open_vs_plain_median_of_pairs"]
    verdict = "within" if ratio <= 2 else "OVER"
    print(f"open manager / plain parse, median of pairs: {ratio}x ({verdict} the 2x goal)")
    paused = load["open_vs_paused_plain_median_of_pairs"]
    print(f"open manager / plain parse with GC paused too, median of pairs: {paused}x")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
