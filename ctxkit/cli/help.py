"""``ctxkit help [COMMAND [TOPIC]]``: what a command's ``--help`` leaves out to fit a screen.

Each command's ``--help`` is its options and a few examples; the explanations (what a TARGET
may be, the forms, containment, the figures) are topics of their own, named at the end of
``--help``; ``options`` lists every option, the rarely needed ones too."""

from __future__ import annotations

import argparse
from typing import Any

from ctxkit.cli.errors import EXIT_OK, UsageError

__all__ = ["add_parser"]


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "help",
        help="a command's longer help, by topic: ctxkit help COMMAND [TOPIC]",
        description="A command's longer help: its topics, or one of them.",
        epilog="examples:\n  ctxkit help conformance\n  ctxkit help conformance forms",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("subject", nargs="?", metavar="COMMAND", help="the command")
    parser.add_argument("topic", nargs="?", metavar="TOPIC", help="one of its topics")
    parser.set_defaults(run=run, root=commands)


def run(args: argparse.Namespace) -> int:
    subparsers = args.root.choices
    if args.subject is None:
        commands = ", ".join(name for name in subparsers if name != "help")
        print(f"ctxkit help COMMAND [TOPIC]: the commands are {commands}")
        return EXIT_OK
    command = subparsers.get(args.subject)
    if command is None:
        known = ", ".join(subparsers)
        raise UsageError(f"help {args.subject}: no such command; the commands: {known}")
    topics: dict[str, str] = getattr(command, "topics", {})
    if args.topic is None:
        print(f"ctxkit help {args.subject} TOPIC, the topics:")
        for name, text in [*topics.items(), ("options", "every option, the rarely needed too")]:
            print(f"  {name:<14}{text.strip().splitlines()[0]}")
        return EXIT_OK
    if args.topic == "options":
        print(command.format_help(every_option=True), end="")
        return EXIT_OK
    if args.topic not in topics:
        known = ", ".join([*topics, "options"])
        raise UsageError(f"help {args.subject} {args.topic}: no such topic; the topics: {known}")
    print(topics[args.topic].rstrip())
    return EXIT_OK
