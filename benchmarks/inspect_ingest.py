"""How fast ``ctxkit inspect`` takes in a followed stream, with what memory and redraw rate.

Two measurements, each side by side with a floor that does the least possible work:

* **sustained**: a separate writer process appends a recorded demo stream to a file at
  ``--rate`` events per second (default 5,000, the goal) for ``--seconds``; the inspector
  follows the file with its screen up (the real Textual app, headless, 120x40). Reported:
  events per second taken in over the run (including catching up once the writer stops),
  the lag at the end, screen redraws per second (the goal is at most 10), and the process's
  resident memory at the start and end of the run (bounded: ring buffers, capped listings).
* **burst**: a backlog of ``--backlog`` events already in the file, read as fast as possible
  by the follower into the model; beside it the floor, reading the same lines and
  ``json.loads``-ing each. The ratio says what the model costs over parsing alone.

Both are run on two streams: the demo's plain stream (what ``EventStream`` writes by default,
about 450 bytes a line) and the same with each view's per-message listing (``view_listing``,
about 4 KB a line).

    python benchmarks/inspect_ingest.py                  # about a minute
    python benchmarks/inspect_ingest.py --seconds 3 --backlog 20000
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from agent_loop import machine

from ctxkit.demo import DemoOptions, run_demo
from ctxkit.tui.app import InspectorApp
from ctxkit.tui.model import Inspector
from ctxkit.tui.sources import FollowSource

WRITER = """
import sys, time
source, target, rate, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
lines = open(source, "rb").read().splitlines(keepends=True)
out = open(target, "ab", buffering=0)
started = time.monotonic()
written = 0
tick = 0.01
while True:
    now = time.monotonic()
    if now - started >= seconds:
        break
    due = int((now - started) * rate) - written
    for _ in range(max(0, due)):
        out.write(lines[written % len(lines)])
        written += 1
    time.sleep(tick)
print(written)
"""


def rss_bytes() -> int:
    """Resident memory of this process now (Linux), 0 where unknown."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def record_demo(path: Path, turns: int, *, listing: bool) -> int:
    """A realistic stream: the demo's events (two conversations) as its writer writes them,
    with or without the per-message listing of each view."""
    options = DemoOptions(
        events_path=path,
        duration=math.inf,
        rate=math.inf,
        turns=turns,
        conversations=2,
        config={"view_listing": listing},
    )
    asyncio.run(run_demo(options))
    with open(path, "rb") as file:
        return sum(1 for _ in file)


async def sustained(recording: Path, rate: float, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "events.jsonl"
        inspector = Inspector(str(target))
        app = InspectorApp(inspector, FollowSource(target))
        async with app.run_test(headless=True, size=(120, 40)) as pilot:
            await pilot.pause(0.5)
            rss_start = rss_bytes()
            started = time.monotonic()
            redraws_start = app.redraws
            writer = await asyncio.create_subprocess_exec(
                *(sys.executable, "-c", WRITER, recording, target, str(rate), str(seconds)),
                stdout=asyncio.subprocess.PIPE,
            )
            peak = rss_start
            output = asyncio.ensure_future(writer.communicate())
            while not output.done():
                await asyncio.sleep(0.2)
                peak = max(peak, rss_bytes())
            written = int((await output)[0].decode().strip() or 0)
            writer_done = time.monotonic()
            lag_events = written - (inspector.events + inspector.skipped + inspector.unknown)
            while inspector.events + inspector.skipped + inspector.unknown < written:
                await asyncio.sleep(0.05)
                if time.monotonic() - writer_done > 60:
                    break
            caught_up = time.monotonic()
            peak = max(peak, rss_bytes())
            redraws = app.redraws - redraws_start
            elapsed = caught_up - started
            taken = inspector.events + inspector.skipped + inspector.unknown
            await pilot.press("q")
    return {
        "target_rate": rate,
        "written": written,
        "taken": taken,
        "skipped": inspector.skipped,
        "events_per_s": taken / elapsed,
        "lag_events_at_writer_end": lag_events,
        "catch_up_s": caught_up - writer_done,
        "redraws_per_s": redraws / elapsed,
        "rss_start_mib": rss_start / 2**20,
        "rss_peak_mib": peak / 2**20,
    }


def burst(recording: Path, backlog: int) -> dict[str, Any]:
    lines = recording.read_bytes().splitlines(keepends=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "backlog.jsonl"
        with open(path, "wb") as out:
            out.writelines(itertools.islice(itertools.cycle(lines), backlog))

        started = time.perf_counter()
        parsed = 0
        with open(path, "rb") as file:
            for line in file:
                json.loads(line)
                parsed += 1
        floor = time.perf_counter() - started

        inspector = Inspector(str(path))
        stop = threading.Event()
        rss_before = rss_bytes()
        started = time.perf_counter()
        thread = threading.Thread(target=FollowSource(path).run, args=(inspector, stop))
        thread.start()
        while inspector.events + inspector.skipped + inspector.unknown < backlog:
            time.sleep(0.01)
        ours = time.perf_counter() - started
        stop.set()
        thread.join()
        rss_after = rss_bytes()
    return {
        "events": backlog,
        "floor_events_per_s": parsed / floor,
        "inspector_events_per_s": backlog / ours,
        "ratio": ours / floor,
        "rss_growth_mib": (rss_after - rss_before) / 2**20,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=5_000, help="events/s written (5000)")
    parser.add_argument("--seconds", type=float, default=15, help="writer run time (15)")
    parser.add_argument("--backlog", type=int, default=200_000, help="burst events (200000)")
    parser.add_argument("--turns", type=int, default=200, help="demo turns recorded (200)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    print(f"machine: {machine()}")
    results: dict[str, Any] = {"machine": machine(), "rate": args.rate, "streams": {}}
    met = True
    for name, listing in (("plain", False), ("with listing", True)):
        with tempfile.TemporaryDirectory() as tmp:
            recording = Path(tmp) / "demo.jsonl"
            events = record_demo(recording, args.turns, listing=listing)
            size = recording.stat().st_size / events
            run = asyncio.run(sustained(recording, args.rate, args.seconds))
            ingest = burst(recording, args.backlog)
        results["streams"][name] = {"bytes_per_line": size, "sustained": run, "burst": ingest}
        print(f"\n{name} stream ({events:,} demo events recorded, {size:,.0f} bytes a line):")
        print(
            f"  sustained: {run['written']:,} written at {args.rate:,.0f}/s for "
            f"{args.seconds:g} s, taken in at {run['events_per_s']:,.0f}/s; lag when the "
            f"writer stopped {run['lag_events_at_writer_end']:,} events "
            f"(caught up {run['catch_up_s']:.2f} s later); {run['redraws_per_s']:.1f} "
            f"redraws/s; RSS {run['rss_start_mib']:.0f} -> {run['rss_peak_mib']:.0f} MiB"
        )
        print(
            f"  burst of {ingest['events']:,}: inspector {ingest['inspector_events_per_s']:,.0f}"
            f"/s, json.loads alone {ingest['floor_events_per_s']:,.0f}/s "
            f"({ingest['ratio']:.1f}x the floor's time); RSS +{ingest['rss_growth_mib']:.1f} MiB"
        )
        met &= run["events_per_s"] >= 0.95 * args.rate and run["redraws_per_s"] <= 10.5
    verdict = "met" if met else "NOT met"
    print(f"\ngoal (>= {args.rate:,.0f} events/s sustained, <= 10 redraws/s): {verdict}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
