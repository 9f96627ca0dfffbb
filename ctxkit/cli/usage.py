"""``ctxkit usage``: where the tokens of a conversation go, and what one view keeps."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from ctxkit.cli.errors import EXIT_FOUND_PROBLEM, EXIT_OK, UsageError
from ctxkit.cli.options import DEFAULT_SEED
from ctxkit.wording import plural

__all__ = ["add_parser"]


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """The ``usage`` subcommand."""
    usage = commands.add_parser(
        "usage",
        help="show where the tokens of a conversation go, and what a view keeps",
        description=(
            "Feed a conversation through the reference manager, ask for one view under a "
            "budget, and report tokens, compaction and the breakdown by category; then replay "
            "it as an agent made it (a view before each assistant message) and report how "
            "much of each view repeats the previous one's start, what a prompt cache can "
            "serve. Without FILE, a seeded synthetic agent conversation is used."
        ),
        epilog=(
            "examples:\n"
            "  ctxkit usage                              # synthetic conversation, 128k budget\n"
            "  ctxkit usage chat.json --budget 32000     # a JSON list of messages\n"
            "  ctxkit usage chat.jsonl --json            # JSON Lines in, JSON out\n"
            "  ctxkit usage --messages 5000 --shape anthropic --strategies truncate summarize"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    usage.add_argument(
        "file", nargs="?", type=Path, help="messages as a JSON list or JSON Lines (default: none)"
    )
    usage.add_argument("--budget", type=int, default=128_000, help="token budget (128000)")
    usage.add_argument(
        "--encoding",
        default="o200k_base",
        choices=["o200k_base", "cl100k_base"],
        help="tiktoken encoding (o200k_base)",
    )
    usage.add_argument(
        "--strategies",
        nargs="+",
        default=["truncate_outputs", "truncate"],
        metavar="NAME",
        help="compaction strategies: truncate_outputs truncate importance summarize",
    )
    usage.add_argument(
        "--messages", type=int, default=2_000, help="synthetic messages without FILE (2000)"
    )
    usage.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help=f"synthetic conversation seed ({DEFAULT_SEED})",
    )
    usage.add_argument(
        "--shape",
        default="openai",
        choices=["openai", "anthropic", "mixed"],
        help="synthetic message shape (openai)",
    )
    usage.add_argument("--json", action="store_true", help="print the usage snapshot as JSON")
    usage.set_defaults(run=_run_usage)


MAX_INPUT_BYTES = 256 * 1024 * 1024
"""The largest conversation file ``usage`` reads (it reads it whole): far above a real one,
and a bound on what a wrong path (``/dev/zero``, a disk image) can cost."""


def _load_messages(path: Path) -> list[Any]:
    """The messages of a JSON list, ``{"messages": [...]}`` or JSON Lines file; a clear
    UsageError for anything else (binary, not UTF-8, too deep, too large, not there)."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(data) > MAX_INPUT_BYTES:
        raise UsageError(
            f"{path}: larger than {MAX_INPUT_BYTES >> 20} MiB, which is not a conversation "
            "usage can read whole; is it the right file?"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{path}: not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x}); "
            "give a JSON file of messages, saved as UTF-8"
        ) from None
    try:
        if path.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})") from exc
    except RecursionError:
        raise UsageError(f"{path}: nests too deeply to be a list of messages") from None
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        return data["messages"]
    if not isinstance(data, list):
        raise UsageError(f"{path}: expected a list of messages or {{'messages': [...]}}")
    return data


def _run_usage(args: argparse.Namespace) -> int:
    from ctxkit.messages import InvalidMessage
    from ctxkit.reference import ConfigError, ContextBudgetExceeded, ReferenceContextManager

    if args.budget <= 0:
        raise UsageError(f"--budget must be positive, got {args.budget}")
    if args.file is not None:
        messages = _load_messages(args.file)
        source = str(args.file)
    else:
        from ctxkit.workload import conversation

        if args.messages < 0:
            raise UsageError(f"--messages must be >= 0, got {args.messages}")
        messages = conversation(args.messages, seed=args.seed, shape=args.shape)
        source = f"synthetic {args.shape} conversation, seed {args.seed}"
    try:
        manager = ReferenceContextManager(
            max_tokens=args.budget, encoding=args.encoding, strategies=args.strategies
        )
    except ConfigError as exc:
        raise UsageError(str(exc)) from exc

    if len(messages) >= 10_000:
        print(f"ctxkit: counting {len(messages):,} messages exactly...", file=sys.stderr)

    async def view() -> list[dict[str, Any]]:
        await manager.set_messages(messages)
        return await manager.get_messages_for_request()

    try:
        asyncio.run(view())
    except InvalidMessage as exc:
        raise UsageError(f"{source}: {exc}") from exc
    except ContextBudgetExceeded as exc:
        print(f"ctxkit: {exc}", file=sys.stderr)
        return EXIT_FOUND_PROBLEM
    snapshot = manager.usage()
    snapshot["source"] = source
    snapshot["cache"] = _cache_stability(messages, args)
    if args.json:
        print(json.dumps(snapshot, indent=2))
    else:
        _print_usage(snapshot)
    return EXIT_OK


def _cache_stability(messages: list[Any], args: argparse.Namespace) -> dict[str, Any]:
    """The conversation replayed as an agent made it, through a fresh manager with the same
    options: a view before each assistant message, each measured (by the manager's own view
    events) against the one before: the tokens a prompt cache could serve (ctxkit.prefix)."""
    from ctxkit import events
    from ctxkit.prefix import steps_of
    from ctxkit.reference import ReferenceContextManager

    replay = ReferenceContextManager(
        max_tokens=args.budget,
        encoding=args.encoding,
        strategies=args.strategies,
        on_overflow="best_effort",
    )
    seen = {"kept_tokens": 0, "view_tokens": 0, "views": 0}

    def count(event: events.Event) -> None:
        if event.name == events.VIEW:
            seen["kept_tokens"] += event.data["prefix_tokens"]
            seen["view_tokens"] += event.data["token_count"]
            seen["views"] += 1

    replay.bus.subscribe(count)

    async def drive() -> None:
        for step in steps_of(messages):
            for message in step:
                await replay.add_message(message)
            await replay.get_messages_for_request()

    asyncio.run(drive())
    views = seen["view_tokens"]
    return {"share": round(seen["kept_tokens"] / views, 4) if views else 0.0, **seen}


def _print_usage(s: dict[str, Any]) -> None:
    print(f"source     {s['source']}")
    print(f"history    {s['history_messages']:,} messages, {s['history_tokens']:,} tokens")
    print(
        f"view       {s['messages']:,} messages, {s['tokens']:,} of {s['budget']:,} tokens "
        f"({s['ratio']:.1%}), {plural(s['compactions'], 'compaction')}"
    )
    kinds = s["view"]
    print(
        f"           {kinds.get('kept', 0)} kept, {kinds.get('shortened', 0)} shortened, "
        f"{kinds.get('summary', 0)} summary"
    )
    print(
        f"room       {s['room_until_compaction']:,} tokens until compaction at "
        f"{s['compact_at_tokens']:,}; {s['room_until_limit']:,} until the limit"
    )
    cache = s["cache"]
    if cache["views"]:
        print(
            f"cache      {cache['share']:.1%} of view tokens cacheable (the previous view's "
            f"start; {plural(cache['views'], 'view')} replayed)"
        )
    print(f"encoding   {s['encoding']} (exact)")
    print("breakdown")
    width = max(len(name) for name in s["breakdown"])
    for name, tokens in s["breakdown"].items():
        share = tokens / s["budget"] if s["budget"] else 0
        print(f"  {name:<{width}}  {tokens:>9,}  {share:6.1%}")
