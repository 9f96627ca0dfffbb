"""What compaction costs in prompt-cache misses: the same agent loop through four managers.

Each manager is driven as an agent drives it (:func:`ctxkit.prefix.agent_loop_stability`): a
view under a 12k-token budget before each of 150 model calls, the steps of ctxkit's synthetic
agent traffic (tool outputs up to 6 KB). Every view is measured against the one before it:
the tokens of their longest common prefix, message by message, are what a provider's prompt
cache can serve. Then what all views would be billed, in tokens at the full input price, with
the cached prefix at a share of that price, beside the reference's bill:

* ``ctxkit reference``: compacts rarely (at 70% of the budget, down to 50%), then extends;
* ``window, drop when full``: system messages and the newest whole units that fit the budget,
  dropping the oldest when a new one does not fit (a common hand-written manager);
* ``window, newest 12 messages``: system messages and the newest whole units holding at
  most 12 messages: its start moves on every request;
* ``langchain trim_messages``: LangChain's ``trim_messages(strategy="last")`` through
  ctxkit's adapter (needs ``pip install "ctxkit-llm[langchain]"``; skipped with a note otherwise).

    python benchmarks/cache_stability.py                  # 3 seeds, about a minute
    python benchmarks/cache_stability.py --seeds 1 --steps 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agent_loop import machine

from ctxkit.conformance.targets.load import EventRecorder, LoadError, load_target
from ctxkit.messages import group_units, inspect_message
from ctxkit.prefix import (
    AGENT_LOOP_BUDGET,
    AGENT_LOOP_STEPS,
    agent_loop_stability,
    agent_steps,
    estimated_cost_ratio,
)
from ctxkit.reference import ReferenceContextManager
from ctxkit.tokens import TokenCounter

CACHED_PRICES = (0.1, 0.5)
"""Cached input billed at these shares of the full input price (providers' discounts for
cache reads range from half price to a tenth)."""


class Window:
    """A manager by hand: the system messages and the newest whole units that fit the budget
    and, with ``max_messages``, hold at most that many messages."""

    def __init__(self, *, max_messages: int | None = None) -> None:
        self.max_messages = max_messages
        self.messages: list[dict[str, Any]] = []
        self.counter = TokenCounter()

    async def add_message(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    async def get_messages(self) -> list[dict[str, Any]]:
        return list(self.messages)

    async def set_messages(self, messages: list[dict[str, Any]]) -> None:
        self.messages = list(messages)

    async def clear(self) -> None:
        self.messages = []

    async def get_messages_for_request(self, token_budget: int | None = None, **_: Any) -> Any:
        budget = token_budget or 128_000
        infos = [inspect_message(m, i) for i, m in enumerate(self.messages)]
        system = [i for i, info in enumerate(infos) if info.role == "system"]
        used = sum(self.counter.message_cost(self.messages[i]).total for i in system)
        kept: list[int] = []
        for unit in reversed(group_units(infos)):
            indexes = [i for i in range(unit.start, unit.stop) if i not in system]
            cost = sum(self.counter.message_cost(self.messages[i]).total for i in indexes)
            too_many = (
                self.max_messages is not None and len(kept) + len(indexes) > self.max_messages
            )
            if used + cost > budget or too_many:
                break
            kept[:0] = indexes
            used += cost
        return [self.messages[i] for i in sorted({*system, *kept})]


async def langchain() -> Any:
    target = load_target("langchain:trim_messages", {"max_tokens": AGENT_LOOP_BUDGET})
    return await target.build(EventRecorder())


MANAGERS = {
    "ctxkit reference": lambda: _ready(ReferenceContextManager()),
    "window, drop when full": lambda: _ready(Window()),
    "window, newest 12 messages": lambda: _ready(Window(max_messages=12)),
    "langchain trim_messages": langchain,
}


async def _ready(manager: Any) -> Any:
    return manager


async def measure(name: str, seeds: list[int], steps: int) -> dict[str, Any] | str:
    kept = total = views = 0
    for seed in seeds:
        try:
            manager = await MANAGERS[name]()
        except (LoadError, ImportError) as exc:
            return f"skipped: {exc}"
        result = await agent_loop_stability(manager, agent_steps(steps, seed=seed))
        kept, total, views = (
            kept + result.kept_tokens,
            total + result.view_tokens,
            views + result.views,
        )
    row: dict[str, Any] = {
        "views": views,
        "view_tokens": total,
        "kept_tokens": kept,
        "share": round(kept / total, 4) if total else 0.0,
    }
    for price in CACHED_PRICES:
        row[f"billed_at_{price}"] = round(estimated_cost_ratio(kept, total, price) * total)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=3, help="agent loops per manager (3)")
    parser.add_argument("--steps", type=int, default=AGENT_LOOP_STEPS, help="model calls (150)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    seeds = list(range(1, args.seeds + 1))
    results: dict[str, Any] = {"machine": machine(), "seeds": seeds, "steps": args.steps}
    for name in MANAGERS:
        print(f"  {name} ...", file=sys.stderr)
        results[name] = asyncio.run(measure(name, seeds, args.steps))
    print(f"\nmachine: {results['machine']}")
    print(
        f"\n{len(seeds)} agent loops of {args.steps} model calls, budget "
        f"{AGENT_LOOP_BUDGET:,} tokens. Billed: input tokens at full price, plus the cached "
        "prefix at the share shown; x: against the reference"
    )
    base = results["ctxkit reference"]
    prices = "".join(f"{f'billed @{p:.0%} cached':>26}" for p in CACHED_PRICES)
    print(f"{'manager':<28}{'views':>6}{'view tokens':>13}{'prefix kept':>13}{prices}")
    for name in MANAGERS:
        row = results[name]
        if isinstance(row, str):
            print(f"{name:<28}  {row}")
            continue
        billed = "".join(
            f"{row[f'billed_at_{p}']:>18,} {row[f'billed_at_{p}'] / base[f'billed_at_{p}']:>6.2f}x"
            for p in CACHED_PRICES
        )
        print(f"{name:<28}{row['views']:>6}{row['view_tokens']:>13,}{row['share']:>12.1%}{billed}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
