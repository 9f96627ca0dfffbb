"""What the conformance protocol costs per operation, and what parallel surveys save.

* Round trips: the same calls (add a message, ask for a view, of a history growing to 200
  messages) on the same manager three ways, side by side in one run: called directly in this
  process (no protocol: the floor), through the Python worker, and through the Node harness
  (its JavaScript twin). Prints microseconds per call and the ratio to the Python worker.
* ``--survey``: wall time of ``ctxkit survey`` over 2, 4 and 8 zoo targets, with 1 job and
  with one job per core.

    python benchmarks/protocol_overhead.py            # from the repository root
    python benchmarks/protocol_overhead.py --survey   # adds the survey timings (minutes)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ctxkit.conformance.targets.routes import route_for  # noqa: E402
from ctxkit.conformance.targets.worker_client import PYTHON_WORKER, Child  # noqa: E402
from tests.zoo.base import GoodManager  # noqa: E402

MESSAGES = 200
SURVEY_TARGETS = [
    "tests.zoo.base:GoodManager",
    "tests.zoo.pairs:SplitsPairsOpenAI",
    "tests.zoo.views:ReordersView",
    "tests.zoo.history:DestructiveCompaction",
    "tests.zoo.pairs:SplitsPairsAnthropic",
    "tests.zoo.views:DropsSystemPrompt",
    "tests.zoo.history:ClearKeepsHistory",
    "tests.zoo.unusual:InsertsSummary",
]
SURVEY_SIZES = (2, 4, 8)


def message(number: int) -> dict[str, object]:
    role = "user" if number % 2 == 0 else "assistant"
    return {"role": role, "content": f"message {number}: " + "words " * 20}


async def direct(count: int) -> float:
    manager = GoodManager(max_tokens=4000)
    started = time.perf_counter()
    for number in range(count):
        await manager.add_message(message(number))
        await manager.get_messages_for_request(token_budget=2000)
    return time.perf_counter() - started


def through(command: tuple[str, ...], target: str, count: int) -> float:
    with Child(command, timeout=30) as child:
        assert child.hello(target).ok
        assert child.call("reset").ok
        started = time.perf_counter()
        for number in range(count):
            assert child.call("add", message=message(number)).ok
            assert child.call("view", token_budget=2000).ok
        return time.perf_counter() - started


def survey_wall(targets: list[str], jobs: int) -> float:
    with tempfile.TemporaryDirectory() as out:
        started = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "ctxkit", "survey", *targets, "--no-adapters",
             "--profile", "quick", "--jobs", str(jobs), "--out", out],
            cwd=ROOT, capture_output=True, check=False,
        )  # fmt: skip
        return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--survey", action="store_true", help="also time ctxkit survey")
    parser.add_argument("--repeat", type=int, default=3, help="best of N (3)")
    parser.add_argument("--messages", type=int, default=MESSAGES, help="history size (200)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    count = args.messages
    print(
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; {count} adds and {count} views, "
        f"best of {args.repeat}\n"
    )
    calls = 2 * count
    rows = [("direct (no protocol)", min(asyncio.run(direct(count)) for _ in range(args.repeat)))]
    rows.append(
        (
            "Python worker",
            min(
                through(PYTHON_WORKER, "tests.zoo.base:GoodManager", count)
                for _ in range(args.repeat)
            ),
        )
    )
    if shutil.which("node"):
        node = route_for("tests/zoo_js/managers.mjs:GoodManager").command
        rows.append(
            (
                "Node harness (JS twin)",
                min(
                    through(node, "tests/zoo_js/managers.mjs:GoodManager", count)
                    for _ in range(args.repeat)
                ),
            )
        )
    worker = rows[1][1]
    print(f"{'route':<26} {'us per call':>12} {'vs Python worker':>17}")
    for name, seconds in rows:
        print(f"{name:<26} {seconds / calls * 1e6:>12.0f} {seconds / worker:>16.2f}x")
    results: dict[str, object] = {
        "routes": [{"route": n, "us_per_call": s / calls * 1e6} for n, s in rows]
    }
    if args.survey:
        cores = os.cpu_count() or 1
        print(f"\nctxkit survey of zoo targets, profile quick\n{'targets':>8} {'1 job':>8} "
              f"{f'{cores} jobs':>8} {'speed-up':>9}")  # fmt: skip
        results["survey"] = []
        for size in SURVEY_SIZES:
            one = survey_wall(SURVEY_TARGETS[:size], 1)
            many = survey_wall(SURVEY_TARGETS[:size], cores)
            print(f"{size:>8} {one:>7.0f}s {many:>7.0f}s {one / many:>8.2f}x")
            results["survey"].append({"targets": size, "one_job_s": one, "all_cores_s": many})
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
