"""Every message shape side by side, in one run, against Chat Completions as the baseline.

* the conformance suite's wall time on the reference manager, one run per shape with the same
  seed and profile (goal: no shape slower than 1.5x the ``openai`` run);
* the reference manager's agent loop in each shape: a history of N messages of the same
  synthetic conversation (converted without loss from Chat Completions), then steps of one
  tool round and a view under a 128k budget (goal: within 1.3x of the ``openai`` loop).

Absolute times on a shared machine are noise; read the ratios.

    python benchmarks/shapes.py                     # the full run (a few minutes)
    python benchmarks/shapes.py --size 1000 --steps 30 --profile quick
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ctxkit.conformance.runner import RunOptions, run  # noqa: E402
from ctxkit.messages import group_units, validate_history  # noqa: E402
from ctxkit.reference import ReferenceContextManager  # noqa: E402
from ctxkit.shapes import SHAPES  # noqa: E402
from ctxkit.workload import Workload  # noqa: E402

BUDGET = 128_000


def history_of(shape: str, size: int) -> list[dict[str, Any]]:
    """About ``size`` messages of the synthetic conversation in ``shape``, cut back to a whole
    unit (the newer shapes write one Chat Completions message as one or more items)."""
    messages = Workload(seed=1, shape=shape).messages(size)  # type: ignore[arg-type]
    units = group_units(validate_history(messages))
    while units and units[-1].status != "complete":
        units.pop()
    return messages[: units[-1].stop] if units else []


def rounds_of(shape: str, count: int) -> list[list[dict[str, Any]]]:
    workload = Workload(seed=99, shape=shape)  # type: ignore[arg-type]
    return [workload.tool_round() for _ in range(count)]


async def loop_seconds(shape: str, size: int, steps: int) -> tuple[float, int]:
    """Median seconds of one loop step (add a tool round, ask for a view), and the history's
    length in messages."""
    history = history_of(shape, size)
    manager = ReferenceContextManager(max_tokens=BUDGET)
    await manager.set_messages(history)
    await manager.get_messages_for_request(token_budget=BUDGET)
    times = []
    gc.collect()
    for step in rounds_of(shape, steps):
        started = time.perf_counter()
        for message in step:
            await manager.add_message(message)
        await manager.get_messages_for_request(token_budget=BUDGET)
        times.append(time.perf_counter() - started)
    return statistics.median(times), len(history)


def suite_seconds(shape: str, profile: str, seed: int) -> tuple[float, str, int]:
    started = time.monotonic()
    report = run(RunOptions(shapes=(shape,), profile=profile, seed=seed, stability_steps=0))
    return time.monotonic() - started, report.verdict, report.depth.get("steps", 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="history length (messages)")
    parser.add_argument("--steps", type=int, default=200, help="loop steps per shape")
    parser.add_argument("--profile", default="default", choices=["quick", "default", "thorough"])
    parser.add_argument("--seed", type=int, default=20261125)
    parser.add_argument("--skip-suite", action="store_true", help="the agent loop only")
    args = parser.parse_args(argv)
    print(f"{platform.processor() or platform.machine()}, Python {platform.python_version()}")

    print(f"\nagent loop, reference manager, {args.size:,} messages, {args.steps} steps")
    print(f"{'shape':<10} {'messages':>9} {'ms/step':>9} {'vs openai':>10}")
    base = None
    for shape in SHAPES:
        seconds, length = asyncio.run(loop_seconds(shape, args.size, args.steps))
        base = base or seconds
        print(f"{shape:<10} {length:>9,} {seconds * 1000:>9.3f} {seconds / base:>9.2f}x")

    if args.skip_suite:
        return 0
    print(f"\nconformance suite on the reference manager, profile {args.profile}, seed {args.seed}")
    print(f"{'shape':<10} {'verdict':>8} {'steps':>8} {'wall s':>8} {'vs openai':>10}")
    base = None
    for shape in SHAPES:
        seconds, verdict, steps = suite_seconds(shape, args.profile, args.seed)
        base = base or seconds
        print(f"{shape:<10} {verdict:>8} {steps:>8,} {seconds:>8.1f} {seconds / base:>9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
