"""How long one large message stalls the event loop for the other conversations on it.

Two reference managers share one event loop, as conversations in an agent server do. One is
served requests back to back (a view, then ``asyncio.sleep(0)``), and every gap between two
of its views is timed; meanwhile the other is given one large message (50 MB by default).
The longest gap is how long every other conversation in the process waited. Side by side in
one run:

* **on the loop (before)**: counted where ``add_message`` was called, into a Python list of
  tokens, as ctxkit did before issue 14 (``COUNT_OFF_LOOP_BYTES`` set past the message's
  size, tiktoken's buffer encoder unused, no size limit);
* **worker thread**: counted by ``asyncio.to_thread`` into tiktoken's buffer (tiktoken lets
  the loop run meanwhile, and no list of tokens is built holding the GIL), no size limit;
* **refused (default limit)**: the default ``max_message_bytes`` (16 MiB) refuses the
  message before anything is copied or counted.

    python benchmarks/loop_stall.py                    # 50 MB of random printable text
    python benchmarks/loop_stall.py --megabytes 5 --text words
    python benchmarks/loop_stall.py --megabytes 16 --text repeated   # minutes: the worst case
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import string
import sys
import time
from pathlib import Path
from typing import Any

from agent_loop import history_of, machine

from ctxkit.messages import InvalidMessage
from ctxkit.reference import ReferenceContextManager
from ctxkit.reference import manager as manager_module
from ctxkit.tokens import load_encoding

MODES = ("on the loop (before)", "worker thread", "refused (default limit)")
WORDS = ("return", "value", "the", "error", "def", "x = 1", "{", "}", "path/to/file.py")


def large_text(megabytes: float, kind: str) -> str:
    """``megabytes`` of text: random printable characters (a dumped file, a base64 blob:
    few merges, many tokens), code-like words (many merges, few tokens), or one character
    repeated (tiktoken's slowest case: one pre-token as long as the text)."""
    size = int(megabytes * 1_000_000)
    rng = random.Random(14)
    if kind == "repeated":
        return "x" * size
    if kind == "random":
        alphabet = string.ascii_letters + string.digits + string.punctuation + " \n"
        block = "".join(rng.choice(alphabet) for _ in range(1 << 16))
    else:
        block = " ".join(rng.choice(WORDS) for _ in range(1 << 14))
    return (block * (size // len(block) + 1))[:size]


async def serve(manager: ReferenceContextManager, stop: asyncio.Event) -> list[float]:
    """Views back to back until ``stop``; the gaps between them, in seconds."""
    gaps = []
    last = time.perf_counter()
    while not stop.is_set():
        await manager.get_messages_for_request(token_budget=4_000)
        await asyncio.sleep(0)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    return gaps


async def one_run(mode: str, text: str) -> dict[str, Any]:
    other = ReferenceContextManager(max_tokens=4_000)
    for message in history_of(60):
        await other.add_message(message)
    limit = manager_module.DEFAULT_MAX_MESSAGE_BYTES if mode.startswith("refused") else None
    target = ReferenceContextManager(max_message_bytes=limit)
    if mode.startswith("on the loop"):
        target.counter._encode_buffer = None  # as before: tokens into a Python list
    message = {"role": "tool", "tool_call_id": "call_1", "content": text}
    stop = asyncio.Event()
    served = asyncio.create_task(serve(other, stop))
    await asyncio.sleep(0.2)  # the other conversation is being served
    started = time.perf_counter()
    outcome = "stored"
    try:
        await target.add_message(message)
    except InvalidMessage:
        outcome = "refused"
    took = time.perf_counter() - started
    await asyncio.sleep(0.2)
    stop.set()
    gaps = await served
    gaps.sort()
    return {
        "outcome": outcome,
        "add_s": round(took, 3),
        "longest_stall_ms": round(gaps[-1] * 1000, 1),
        "p99_gap_ms": round(gaps[int(len(gaps) * 0.99)] * 1000, 2),
        "views_served": len(gaps),
        "history_tokens": target.usage()["history_tokens"],
    }


def run_mode(mode: str, text: str) -> dict[str, Any]:
    saved = manager_module.COUNT_OFF_LOOP_BYTES
    if mode.startswith("on the loop"):
        manager_module.COUNT_OFF_LOOP_BYTES = sys.maxsize
    try:
        return asyncio.run(one_run(mode, text))
    finally:
        manager_module.COUNT_OFF_LOOP_BYTES = saved


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--megabytes", type=float, default=50, help="size of the message (50)")
    parser.add_argument("--text", choices=("random", "words", "repeated"), default="random")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    load_encoding()
    text = large_text(args.megabytes, args.text)
    results: dict[str, Any] = {
        "machine": machine(),
        "megabytes": args.megabytes,
        "text": args.text,
        "modes": {},
    }
    for mode in MODES:
        print(f"  {mode} ...", file=sys.stderr)
        results["modes"][mode] = run_mode(mode, text)
    print(f"\nmachine: {results['machine']}")
    print(f"\none {args.megabytes:g} MB message ({args.text} text) added beside a conversation")
    print("served views back to back on the same event loop")
    print(f"{'mode':<26}{'outcome':>9}{'add s':>9}{'longest stall ms':>18}{'p99 gap ms':>12}")
    for mode, row in results["modes"].items():
        print(
            f"{mode:<26}{row['outcome']:>9}{row['add_s']:>9}"
            f"{row['longest_stall_ms']:>18}{row['p99_gap_ms']:>12}"
        )
    before = results["modes"][MODES[0]]["longest_stall_ms"]
    after = results["modes"][MODES[1]]["longest_stall_ms"]
    print(f"longest stall, on the loop / worker thread: {before / after:.0f}x")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
