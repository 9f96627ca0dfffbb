"""The agent loop, side by side: ctxkit's reference manager against two baselines.

One loop step adds an assistant message with its tool results, then asks for a view under a
128k-token budget. Measured on histories of 1k, 10k and 50k messages, in one run, against:

* ``naive``: a manager that re-encodes the whole history with tiktoken on every request;
* ``langchain``: LangChain's ``trim_messages`` with a tiktoken counter memoised per message
  (needs ``pip install ".[bench]"``; skipped with a note otherwise).

Beside ctxkit's default strategies, the same loop with ``hierarchical`` (and
``truncate_outputs``): older units shown as a paragraph or one line, summarised by the offline
extractive summarizer, once per unit and level; with ``recall`` (the default strategies, each
message stored in an in-memory SQLite FTS5 memory as it is added, the left-out units the newest
user message finds brought back at each compaction); and with both. Their goals: flat within
1.3x from the smallest history to the largest, and at most 2x the default loop at 10k messages.
Each step ends by yielding to the event loop once, as an agent does while the model answers:
that is when the recall memory's writer runs (its SQLite work on a thread of its own).

Also measured: adding N messages plus the first view, against tiktoken encoding the same text
once. Absolute times on a shared machine are noise; read the ratios.

    python benchmarks/agent_loop.py                 # the full run (a few minutes)
    python benchmarks/agent_loop.py --sizes 1000 --steps 20
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ctxkit.messages import group_units, validate_history
from ctxkit.reference import ReferenceContextManager
from ctxkit.tokens import TokenCounter
from ctxkit.workload import Workload

BUDGET = 128_000
REFERENCE = "ctxkit reference"
HIERARCHICAL = "ctxkit hierarchical"
RECALL = "ctxkit recall"
BOTH = "ctxkit hierarchical+recall"
VARIANTS = (HIERARCHICAL, RECALL, BOTH)
"""ctxkit's other rows, each held to the same goals against the default loop."""


# -- inputs ------------------------------------------------------------------------------------


def history_of(size: int, seed: int = 1) -> list[dict[str, Any]]:
    """``size`` messages of synthetic agent traffic, cut back to a whole unit."""
    messages = Workload(seed=seed, shape="openai").messages(size)
    units = group_units(validate_history(messages))
    while units and units[-1].status != "complete":
        units.pop()
    return messages[: units[-1].stop] if units else []


def loop_steps(count: int, seed: int = 99) -> list[list[dict[str, Any]]]:
    """Tool rounds for the loop, with ids renamed so they never meet the history's."""
    workload = Workload(seed=seed, shape="openai")
    steps = []
    for _ in range(count):
        step = workload.tool_round()
        for message in step:
            for call in message.get("tool_calls") or ():
                call["id"] = "loop_" + call["id"]
            if message["role"] == "tool":
                message["tool_call_id"] = "loop_" + message["tool_call_id"]
        steps.append(step)
    return steps


# -- the managers under test ---------------------------------------------------------------------


class NaiveManager:
    """Re-encodes the whole history on every request, then keeps the newest that fit."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.messages: list[dict[str, Any]] = []

    async def add_message(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    async def get_messages_for_request(self, token_budget: int) -> list[dict[str, Any]]:
        costs = [self.counter.count_message(m) for m in self.messages]
        total, start = 3, len(self.messages)
        while start > 0 and total + costs[start - 1] <= token_budget:
            start -= 1
            total += costs[start]
        return list(self.messages[start:])


class LangChainManager:
    """Stores LangChain messages and trims with ``trim_messages`` and a memoised counter."""

    def __init__(self, counter: TokenCounter) -> None:
        from langchain_core.messages import convert_to_messages, trim_messages

        self._convert = convert_to_messages
        self._trim = trim_messages
        self.counter = counter
        self.messages: list[Any] = []
        self._memo: dict[str, int] = {}
        self._source: dict[str, dict[str, Any]] = {}

    async def add_message(self, message: dict[str, Any]) -> None:
        (converted,) = self._convert([message])
        converted.id = f"m{len(self.messages)}"  # trim_messages copies; the id survives
        self._source[converted.id] = message
        self.messages.append(converted)

    def _count(self, messages: list[Any]) -> int:
        """Tokens of a list of messages, each counted once and then looked up."""
        total = 0
        for message in messages:
            cost = self._memo.get(message.id)
            if cost is None:
                source = self._source[message.id]
                cost = self._memo[message.id] = self.counter.count_message(source)
            total += cost
        return total

    async def get_messages_for_request(self, token_budget: int) -> list[Any]:
        return self._trim(
            self.messages,
            max_tokens=token_budget,
            token_counter=self._count,
            strategy="last",
            start_on="human",
            include_system=True,
        )


# -- measuring ---------------------------------------------------------------------------------


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def time_loop(
    manager: Any,
    history: list[dict[str, Any]],
    steps: list[list[dict[str, Any]]],
    max_seconds: float,
    ours: bool,
) -> list[float]:
    """Per-step seconds of (add the step's messages, ask for a view)."""
    if ours:
        await manager.set_messages(history)
        await manager.memory_synced()  # recall: the history stored (not timed)
    else:
        for message in history:
            await manager.add_message(message)
    await manager.get_messages_for_request(token_budget=BUDGET)  # warm: first view
    times: list[float] = []
    started = time.perf_counter()
    gc.collect()
    for step in steps:
        t0 = time.perf_counter()
        for message in step:
            await manager.add_message(message)
        await manager.get_messages_for_request(token_budget=BUDGET)
        await asyncio.sleep(0)  # the model's turn: the event loop runs what waits
        times.append(time.perf_counter() - t0)
        if len(times) >= 3 and time.perf_counter() - started > max_seconds:
            break
    return times


async def run_closing(
    manager: Any,
    history: list[dict[str, Any]],
    steps: list[list[dict[str, Any]]],
    max_seconds: float,
    ours: bool,
) -> list[float]:
    """:func:`time_loop`, then close ctxkit's manager (its recall memory's thread)."""
    try:
        return await time_loop(manager, history, steps, max_seconds, ours)
    finally:
        if ours:
            manager.close()


def texts_of(message: dict[str, Any]) -> Iterable[str]:
    """Every text a counter must encode in a message: content, blocks, call names and args."""
    content = message.get("content")
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict):
                for key in ("text", "content", "name"):
                    if isinstance(block.get(key), str):
                        yield block[key]
                if block.get("type") == "tool_use":
                    yield json.dumps(block.get("input", {}), ensure_ascii=False)
    for call in message.get("tool_calls") or ():
        yield call["function"]["name"]
        yield call["function"]["arguments"]


async def time_bulk(history: list[dict[str, Any]], counter: TokenCounter) -> tuple[float, float]:
    """Seconds to add every message one by one plus the first view, and seconds for tiktoken
    to encode the same texts once."""
    encode = counter._encode  # the bare tiktoken encoder, the floor for exact counting
    texts = [text for message in history for text in texts_of(message)]
    t0 = time.perf_counter()
    for text in texts:
        encode(text)
    baseline = time.perf_counter() - t0
    manager = ReferenceContextManager(max_tokens=BUDGET)
    t0 = time.perf_counter()
    for message in history:
        await manager.add_message(message)
    await manager.get_messages_for_request()
    ours = time.perf_counter() - t0
    return ours, baseline


# -- report ------------------------------------------------------------------------------------


def machine() -> str:
    import os

    cpu = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 50_000])
    parser.add_argument("--steps", type=int, default=1_000, help="loop steps per cell (1000)")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of ctxkit's own cells; the lowest median counts, as noise only adds (3)",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=20.0,
        help="stop a slow cell after this long, keeping at least 3 steps (20)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    counter = TokenCounter()
    steps = loop_steps(args.steps)
    managers: list[tuple[str, Callable[[], Any], bool]] = [
        (REFERENCE, lambda: ReferenceContextManager(max_tokens=BUDGET), True),
        (
            HIERARCHICAL,
            lambda: ReferenceContextManager(
                max_tokens=BUDGET, strategies=["truncate_outputs", "hierarchical"]
            ),
            True,
        ),
        (
            RECALL,
            lambda: ReferenceContextManager(max_tokens=BUDGET, recall={}),
            True,
        ),
        (
            BOTH,
            lambda: ReferenceContextManager(
                max_tokens=BUDGET, strategies=["truncate_outputs", "hierarchical"], recall={}
            ),
            True,
        ),
        ("naive re-encode", lambda: NaiveManager(counter), False),
    ]
    try:
        import langchain_core  # noqa: F401

        managers.append(("langchain trim_messages", lambda: LangChainManager(counter), False))
    except ImportError:
        print("note: langchain-core not installed (pip install '.[bench]'); its row is skipped")

    print(f"machine: {machine()}")
    print(
        f"budget {BUDGET:,} tokens; up to {len(steps)} loop steps per cell; times are medians "
        f"per step (ctxkit: lowest of {args.repeat} runs)\n"
    )
    results: dict[str, Any] = {"machine": machine(), "budget": BUDGET, "loop": [], "bulk": []}
    header = (
        f"{'history':>8}  {'manager':<24} {'median ms':>10} {'p95 ms':>9} {'steps':>6} "
        f"{'ours is':>14}"
    )
    print(header)
    print("-" * len(header))
    ours_by_size: dict[int, float] = {}
    variants: dict[str, dict[int, float]] = {name: {} for name in VARIANTS}
    for size in args.sizes:
        history = history_of(size)
        for name, factory, ours in managers:
            runs = [
                asyncio.run(run_closing(factory(), history, steps, args.max_seconds, ours))
                for _ in range(args.repeat if ours else 1)
            ]
            times = min(runs, key=statistics.median)
            median = statistics.median(times)
            if name == REFERENCE:
                ours_by_size[size] = median
            elif name in variants:
                variants[name][size] = median
            ratio = median / ours_by_size[size]
            row = {
                "history": len(history),
                "manager": name,
                "median_ms": median * 1e3,
                "p95_ms": percentile(times, 0.95) * 1e3,
                "steps": len(times),
                "ratio_to_ours": ratio,
            }
            results["loop"].append(row)
            if name == REFERENCE:
                speed = "-"
            elif ours:
                speed = f"{ratio:.2f}x ours"
            else:
                speed = f"{ratio:,.0f}x faster" if ratio >= 10 else f"{ratio:.1f}x faster"
            print(
                f"{len(history):>8,}  {name:<24} {row['median_ms']:>10.3f} "
                f"{row['p95_ms']:>9.3f} {len(times):>6} {speed:>14}"
            )
            sys.stdout.flush()
    if len(ours_by_size) > 1:
        small, large = min(ours_by_size), max(ours_by_size)
        flat = ours_by_size[large] / ours_by_size[small]
        results["flatness"] = flat
        print(f"\nflatness: ours at {large:,} / ours at {small:,} = {flat:.2f}x (goal <= 1.3x)")
    for name, by_size in variants.items():
        label = name.removeprefix("ctxkit ")
        key = label.replace("+", "_and_")
        if len(by_size) > 1:
            small, large = min(by_size), max(by_size)
            flat = by_size[large] / by_size[small]
            results[f"{key}_flatness"] = flat
            print(f"flatness of {label}: at {large:,} / at {small:,} = {flat:.2f}x (goal <= 1.3x)")
        for size, median in by_size.items():
            results.setdefault(f"{key}_to_ours", {})[size] = median / ours_by_size[size]
        if 10_000 in by_size:
            ratio = by_size[10_000] / ours_by_size[10_000]
            print(f"{label} at 10,000: {ratio:.2f}x the default loop (goal <= 2x)")
    print()
    for size in args.sizes:
        history = history_of(size)
        ours, baseline = asyncio.run(time_bulk(history, counter))
        results["bulk"].append({"history": len(history), "ours_s": ours, "tiktoken_s": baseline})
        print(
            f"add {len(history):,} messages + first view: {ours:.2f} s; tiktoken encoding the "
            f"same text once: {baseline:.2f} s; ratio {ours / baseline:.2f}x (goal <= 1.5x)"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
