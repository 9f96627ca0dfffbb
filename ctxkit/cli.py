"""The ``ctxkit`` command line.

Subcommands import what they need when they run, so ``ctxkit --help`` stays fast.

Exit codes: 0 success; 1 the job ran and found a problem (e.g. the budget cannot hold the
pinned content); 2 bad usage or unreadable input; 3 an internal error (a bug: please report
it with the ``--debug`` traceback); 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_FOUND_PROBLEM = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


def config_from_json(text: str) -> dict[str, Any]:
    """The ``--config JSON`` option of a subcommand: a JSON object of keyword arguments."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--config is not valid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise UsageError("""--config must be a JSON object, e.g. '{"max_tokens": 8000}'""")
    return config


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxkit",
        description=(
            "Make LLM context managers observable and testable: check any manager with "
            "'ctxkit conformance', or use ctxkit's reference manager, which never splits a "
            "tool call from its result and counts tokens exactly, offline."
        ),
        epilog=(
            "exit codes: 0 ok, 1 the job found a problem, 2 bad usage or input, "
            "3 internal error, 130 interrupted. Add --debug to see tracebacks."
        ),
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors"
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    usage = commands.add_parser(
        "usage",
        help="show where the tokens of a conversation go, and what a view keeps",
        description=(
            "Feed a conversation through the reference manager, ask for one view under a "
            "budget, and report tokens, compaction and the breakdown by category. Without "
            "FILE, a seeded synthetic agent conversation is used."
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
    usage.add_argument("--seed", type=int, default=0, help="synthetic conversation seed (0)")
    usage.add_argument(
        "--shape",
        default="openai",
        choices=["openai", "anthropic", "mixed"],
        help="synthetic message shape (openai)",
    )
    usage.add_argument("--json", action="store_true", help="print the usage snapshot as JSON")
    usage.set_defaults(run=_run_usage)
    _add_conformance(commands, common)
    _add_demo(commands, common)
    _add_inspect(commands, common)
    _add_contexts(commands, common)
    _add_survey(commands, common)
    return parser


def _add_conformance(commands: Any, common: argparse.ArgumentParser) -> None:
    from ctxkit.conformance_cli import add_parser

    add_parser(commands, common)


def _add_survey(commands: Any, common: argparse.ArgumentParser) -> None:
    from ctxkit.survey.cli import add_parser

    add_parser(commands, common)


def _add_demo(commands: Any, common: argparse.ArgumentParser) -> None:
    from ctxkit.demo import add_parser

    add_parser(commands, common)


def _add_inspect(commands: Any, common: argparse.ArgumentParser) -> None:
    from ctxkit.inspect_cli import add_parser

    add_parser(commands, common)


def _add_contexts(commands: Any, common: argparse.ArgumentParser) -> None:
    from ctxkit.contexts_cli import add_parser

    add_parser(commands, common)


def _load_messages(path: Path) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        if path.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})") from exc
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
    if args.json:
        print(json.dumps(snapshot, indent=2))
    else:
        _print_usage(snapshot)
    return EXIT_OK


def _print_usage(s: dict[str, Any]) -> None:
    print(f"source     {s['source']}")
    print(f"history    {s['history_messages']:,} messages, {s['history_tokens']:,} tokens")
    print(
        f"view       {s['messages']:,} messages, {s['tokens']:,} of {s['budget']:,} tokens "
        f"({s['ratio']:.1%}), {s['compactions']} compaction(s)"
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
    print(f"encoding   {s['encoding']} (exact)")
    print("breakdown")
    width = max(len(name) for name in s["breakdown"])
    for name, tokens in s["breakdown"].items():
        share = tokens / s["budget"] if s["budget"] else 0
        print(f"  {name:<{width}}  {tokens:>9,}  {share:6.1%}")


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush into a closed pipe does
    not print a second error."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.version:
        from ctxkit import __version__

        print(f"ctxkit {__version__}")
        return EXIT_OK
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print("ctxkit: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `ctxkit ... | head`: the reader has all it wanted
        _quiet_stdout()
        return EXIT_OK
    except UsageError as exc:
        if args.debug:
            raise
        print(f"ctxkit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        if args.debug:
            raise
        print(
            f"ctxkit: internal error: {type(exc).__name__}: {exc} (run with --debug for details)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    # `python -m ctxkit.cli` runs this file as __main__, a second copy of the module: the
    # commands raise ctxkit.cli's errors, so run ctxkit.cli's main, which knows them.
    from ctxkit.cli import main as canonical_main

    sys.exit(canonical_main())
