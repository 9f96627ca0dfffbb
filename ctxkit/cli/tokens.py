"""``ctxkit tokens``: where the tokens of a conversation go, and what one view keeps.

Through ctxkit's reference manager by default, or through one's own (``--manager``, any form
``ctxkit conformance`` takes), measured by :func:`ctxkit.telemetry.instrument`, which counts
any manager's views exactly as the reference counts its own."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from ctxkit.cli.errors import EXIT_FOUND_PROBLEM, EXIT_OK, UsageError
from ctxkit.cli.options import DEFAULT_SEED, config_from_json, shape_list
from ctxkit.forms import FORMS
from ctxkit.wording import plural

__all__ = ["add_parser"]

DEFAULT_STRATEGIES = ["truncate_outputs", "truncate"]
SYNTHETIC_SHAPES = {("openai",): "openai", ("anthropic",): "anthropic"}
"""The shapes the synthetic conversation is written in; both at once is ``mixed``."""


def _synthetic_shape(shapes: tuple[str, ...]) -> str:
    """``--shapes`` as the synthetic conversation's shape: openai, anthropic, or mixed."""
    if set(shapes) == {"openai", "anthropic"}:
        return "mixed"
    if tuple(shapes) in SYNTHETIC_SHAPES:
        return SYNTHETIC_SHAPES[tuple(shapes)]
    raise UsageError(
        f"--shapes {','.join(shapes)}: the synthetic conversation is written in openai, "
        "anthropic or both (openai,anthropic); give a FILE of messages in another shape"
    )


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """The ``tokens`` subcommand."""
    usage = commands.add_parser(
        "tokens",
        help="show where the tokens of a conversation go, and what a view keeps",
        description=(
            "Feed a conversation through the reference manager (or your own, --manager), ask "
            "for one view under a budget, and report tokens, compaction and the breakdown by "
            "category; then replay it as an agent made it (a view before each assistant "
            "message) and report how much of each view repeats the previous one's start, what "
            "a prompt cache can serve. Without FILE, a seeded synthetic agent conversation is "
            "used."
        ),
        epilog=(
            "examples:\n"
            "  ctxkit tokens                             # synthetic conversation, 128k budget\n"
            "  ctxkit tokens chat.json --budget 32000    # a JSON list of messages\n"
            "  ctxkit tokens chat.jsonl --json           # JSON Lines in, JSON out\n"
            "  ctxkit tokens --messages 5000 --shapes anthropic --strategies truncate summarize\n"
            "  ctxkit tokens chat.json --manager mypkg.ctx:Window --config '{\"limit\": 50}'\n"
            "  ctxkit tokens --manager langchain:trim_messages --budget 8000"
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
        metavar="NAME",
        help="the reference manager's compaction strategies: truncate_outputs truncate "
        f"importance hierarchical summarize ({' '.join(DEFAULT_STRATEGIES)})",
    )
    usage.add_argument(
        "--manager",
        metavar="TARGET",
        help="your own manager instead of the reference: module:Class, a factory, a mount "
        "function, a function over the message list, a session, path/to/file.py[:attr], an "
        "adapter's name, ./manager.mjs (as ctxkit conformance takes it)",
    )
    usage.add_argument(
        "--config",
        default="{}",
        metavar="JSON",
        help="--manager's keyword arguments, as a JSON object ({})",
    )
    usage.add_argument(
        "--form",
        choices=FORMS,
        help="what --manager names, when detecting it guesses wrong",
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
        "--shapes",
        type=shape_list,
        default=("openai",),
        metavar="SHAPES",
        help="the synthetic conversation's message shapes: openai, anthropic, or both "
        "(openai,anthropic: mixed) (openai)",
    )
    usage.add_argument("--json", action="store_true", help="print the snapshot as JSON")
    usage.set_defaults(run=_run_tokens)


MAX_INPUT_BYTES = 256 * 1024 * 1024
"""The largest conversation file ``tokens`` reads (it reads it whole): far above a real one,
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
            "tokens can read whole; is it the right file?"
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
    except ValueError as exc:  # JSONDecodeError, or an integer past Python's digit limit
        raise UsageError(f"{path}: not valid JSON ({exc})") from exc
    except RecursionError:
        raise UsageError(f"{path}: nests too deeply to be a list of messages") from None
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        return data["messages"]
    if not isinstance(data, list):
        raise UsageError(f"{path}: expected a list of messages or {{'messages': [...]}}")
    return data


def _run_tokens(args: argparse.Namespace) -> int:
    from ctxkit.messages import InvalidMessage
    from ctxkit.reference import ConfigError, ContextBudgetExceeded, ReferenceContextManager

    if args.budget <= 0:
        raise UsageError(f"--budget must be positive, got {args.budget}")
    if args.manager is None and (args.config != "{}" or args.form is not None):
        raise UsageError("--config and --form describe --manager; name your manager with it")
    if args.manager is not None and args.strategies is not None:
        raise UsageError(
            "--strategies configures the reference manager; give your manager's own options "
            "with --config"
        )
    messages, source = _conversation(args)
    if args.manager is not None:
        return _run_target(args, messages, source)
    strategies = args.strategies or DEFAULT_STRATEGIES
    try:
        manager = ReferenceContextManager(
            max_tokens=args.budget, encoding=args.encoding, strategies=strategies
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
    replay = ReferenceContextManager(
        max_tokens=args.budget,
        encoding=args.encoding,
        strategies=strategies,
        on_overflow="best_effort",
    )
    snapshot["cache"] = asyncio.run(_cache_stability(replay, messages, args.budget))
    _show(snapshot, args)
    return EXIT_OK


def _conversation(args: argparse.Namespace) -> tuple[list[Any], str]:
    """The messages to measure (FILE's, or a synthetic conversation's) and where they come
    from, in words."""
    if args.file is not None:
        return _load_messages(args.file), str(args.file)
    from ctxkit.workload import conversation

    if args.messages < 0:
        raise UsageError(f"--messages must be >= 0, got {args.messages}")
    shape = _synthetic_shape(args.shapes)
    messages = conversation(args.messages, seed=args.seed, shape=shape)
    return messages, f"synthetic {shape} conversation, seed {args.seed}"


def _show(snapshot: dict[str, Any], args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps(snapshot, indent=2))
    else:
        _print_usage(snapshot)


def _run_target(args: argparse.Namespace, messages: list[Any], source: str) -> int:
    """``--manager``: the conversation through one's own manager, built as ``ctxkit
    conformance`` builds it and measured by :func:`~ctxkit.telemetry.instrument`. Exit 1
    when the manager raises on the conversation."""
    from ctxkit.messages import InvalidMessage, validate_history

    config = config_from_json(args.config)
    try:
        validate_history(messages)  # a bad file is the file's fault, whatever the manager
    except InvalidMessage as exc:
        raise UsageError(f"{source}: {exc}") from exc
    try:
        snapshot = asyncio.run(_measure_target(args, config, messages))
    except TargetRaised as exc:
        print(f"ctxkit: {args.manager}: {exc}", file=sys.stderr)
        return EXIT_FOUND_PROBLEM
    snapshot["source"] = source
    _show(snapshot, args)
    return EXIT_OK


class TargetRaised(Exception):
    """The manager under ``--manager`` raised on the conversation: what it is for."""


async def _measure_target(
    args: argparse.Namespace, config: dict[str, Any], messages: list[Any]
) -> dict[str, Any]:
    from ctxkit import events
    from ctxkit.tokens import CATEGORIES

    manager = await _open(args, config)
    seen: dict[str, Any] = {"compactions": 0, "view": None}

    def watch(event: events.Event) -> None:
        if event.name == events.POST_COMPACT:
            seen["compactions"] += 1
        elif event.name == events.VIEW:
            seen["view"] = event.data

    manager.bus.subscribe(watch)
    doing = "adding message 0"
    try:
        for number, message in enumerate(messages):
            doing = f"adding message {number}"
            await manager.add_message(message)
        doing = "returning a view"
        await manager.get_messages_for_request(token_budget=args.budget)
    except Exception as exc:
        raise TargetRaised(f"{doing} raised {type(exc).__name__}: {exc}") from exc
    finally:
        _close(manager)
    view = seen["view"]
    tokens, budget = view["token_count"], args.budget
    breakdown = {category: view["breakdown"].get(category, 0) for category in CATEGORIES}
    breakdown["room"] = max(0, budget - tokens)
    replay = await _open(args, config)
    try:
        cache = await _cache_stability(replay, messages, budget)
    finally:
        _close(replay)
    return {
        "target": args.manager,
        "encoding": args.encoding,
        "budget": budget,
        "tokens": tokens,
        "messages": view["message_count"],
        "ratio": round(tokens / budget, 6),
        "history_messages": view["history_messages"],
        "history_tokens": view["history_tokens"],
        "room_until_limit": max(0, budget - tokens),
        "compactions": seen["compactions"],
        "breakdown": breakdown,
        "view": dict(view["kinds"]),
        "cache": cache,
    }


async def _open(args: argparse.Namespace, config: dict[str, Any]) -> Any:
    """A fresh manager from ``--manager``, instrumented; a UsageError for one that cannot be
    found or built."""
    from ctxkit.conformance.replay import open_manager
    from ctxkit.conformance.targets.load import ContractError, LoadError, config_hint
    from ctxkit.conformance.targets.routes import RouteError
    from ctxkit.telemetry import instrument

    try:
        manager, _ = await open_manager(args.manager, config, form=args.form)
    except (LoadError, ContractError, RouteError) as exc:
        raise UsageError(str(exc)) from None
    except Exception as exc:
        raise UsageError(
            f"{args.manager}: building the manager raised {type(exc).__name__}: {exc}"
            + config_hint(str(exc))
        ) from None
    return instrument(manager, encoding=args.encoding, max_tokens=args.budget)


def _close(manager: Any) -> None:
    """Stop a manager in a process of its own (a JavaScript target); others need nothing."""
    inner = getattr(manager, "manager", None)
    close = getattr(inner, "close", None)
    if type(inner).__name__ == "RemoteManager" and callable(close):
        close()


async def _cache_stability(manager: Any, messages: list[Any], budget: int) -> dict[str, Any]:
    """The conversation replayed as an agent made it, through ``manager`` (fresh, with the
    same options, publishing ctxkit's events on ``.bus``): a view before each assistant
    message, each measured (by its view event) against the one before: the tokens a prompt
    cache could serve (ctxkit.prefix)."""
    from ctxkit import events
    from ctxkit.prefix import steps_of

    seen = {"kept_tokens": 0, "view_tokens": 0, "views": 0}

    def count(event: events.Event) -> None:
        if event.name == events.VIEW:
            seen["kept_tokens"] += event.data["prefix_tokens"]
            seen["view_tokens"] += event.data["token_count"]
            seen["views"] += 1

    manager.bus.subscribe(count)
    try:
        for step in steps_of(messages):
            for message in step:
                await manager.add_message(message)
            await manager.get_messages_for_request(token_budget=budget)
    except Exception as exc:
        raise TargetRaised(
            f"replaying the conversation (view {seen['views'] + 1}) raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    views = seen["view_tokens"]
    return {"share": round(seen["kept_tokens"] / views, 4) if views else 0.0, **seen}


def _print_usage(s: dict[str, Any]) -> None:
    from ctxkit.cli.output import print_table

    print(f"source     {s['source']}")
    if "target" in s:
        print(f"manager    {s['target']}")
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
    if "compact_at_tokens" in s:
        print(
            f"room       {s['room_until_compaction']:,} tokens until compaction at "
            f"{s['compact_at_tokens']:,}; {s['room_until_limit']:,} until the limit"
        )
    else:  # one's own manager: when it compacts is its own business
        print(f"room       {s['room_until_limit']:,} tokens until the limit")
    cache = s["cache"]
    if cache["views"]:
        print(
            f"cache      {cache['share']:.1%} of view tokens cacheable (the previous view's "
            f"start; {plural(cache['views'], 'view')} replayed)"
        )
    print(f"encoding   {s['encoding']} (exact)")
    print("breakdown")
    budget = s["budget"]
    print_table(
        ("category", "tokens", "of budget"),
        [
            (name, f"{tokens:,}", f"{tokens / budget if budget else 0:.1%}")
            for name, tokens in s["breakdown"].items()
        ],
        right={1, 2},
        show_header=False,
        indent=2,
    )
