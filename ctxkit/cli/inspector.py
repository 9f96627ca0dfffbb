"""``ctxkit inspect``: watch a context manager's tokens, budget and compactions live.

The screen lives in :mod:`ctxkit.tui`; this module turns options into a source, and prints
the ``--json`` snapshot without starting the screen.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
from pathlib import Path
from typing import Any

from ctxkit.cli.errors import EXIT_OK, UsageError
from ctxkit.demo import DemoOptions, check_workload

__all__ = ["add_parser"]

DEMO = DemoOptions()
"""The demo's defaults, which ``--demo`` shares."""

JSON_DEMO_TURNS = 100
"""Agent turns the demo runs, at full speed, for ``--demo --json`` without ``--turns``."""

DESCRIPTION = """\
A live terminal view of a context manager: how full the context is (tokens / budget, with
the compaction threshold and the limit marked), room left before compaction in tokens and
turns, tokens over time with every compaction marked, where the tokens go by category, a log
of compactions (before -> after, saved, strategy, duration) and the current view message by
message. It reads the JSON Lines event stream that ctxkit.telemetry.EventStream (or
'ctxkit demo --events') writes, or runs the demo itself."""

EPILOG = """\
sources (one of):
  --demo            the reference manager on a synthetic agent, in this process (default)
  --follow PATH     a stream another process is writing; waits for the file, keeps up as it
                    grows, survives truncation and rotation
  --play PATH       a recorded stream, at --speed times its pace; p pauses, + and - change speed

examples:
  ctxkit inspect                                    # the demo, nothing to set up
  ctxkit demo --events ev.jsonl --duration 600 &    # an agent writing events...
  ctxkit inspect --follow ev.jsonl                  # ...watched live
  ctxkit inspect --play ev.jsonl --speed 10
  ctxkit inspect --follow ev.jsonl --json           # one snapshot of the same figures, as JSON

keys: q quit, p pause, ? help, tab / 1-4 panes, c next conversation, + / - play speed.

exit codes: 0 ok, 2 bad usage or an unreadable file, 3 internal error, 130 interrupted."""


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """The ``inspect`` subcommand."""
    parser = commands.add_parser(
        "inspect",
        help="watch tokens, budget and compactions live in the terminal",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    sources = parser.add_mutually_exclusive_group()
    sources.add_argument("--follow", type=Path, metavar="PATH", help="follow a live stream")
    sources.add_argument("--play", type=Path, metavar="PATH", help="play back a recorded stream")
    sources.add_argument("--demo", action="store_true", help="run the demo in process (default)")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one snapshot as JSON and exit (a file as it is now; the demo after --turns)",
    )
    parser.add_argument(
        "--conversation", metavar="ID", help="show this conversation (default: the latest active)"
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=1.0,
        metavar="X",
        help="--play pace: X times as fast as recorded, 0 for at once (1)",
    )
    parser.add_argument(
        "--from-end", action="store_true", help="--follow: skip what the file holds already"
    )
    parser.add_argument(
        "--refresh",
        type=float,
        default=10.0,
        metavar="PER_SECOND",
        help="most screen updates per second, 0.5-10 (10)",
    )
    demo = parser.add_argument_group("demo options")
    demo.add_argument(
        "--rate", type=float, default=DEMO.rate, help=f"agent turns per second ({DEMO.rate:g})"
    )
    demo.add_argument(
        "--budget", type=int, default=DEMO.budget, help=f"token budget ({DEMO.budget})"
    )
    demo.add_argument("--seed", type=int, default=DEMO.seed, help=f"workload seed ({DEMO.seed})")
    demo.add_argument(
        "--conversations",
        type=int,
        default=DEMO.conversations,
        metavar="N",
        help=f"conversations at once ({DEMO.conversations})",
    )
    demo.add_argument(
        "--turns",
        type=int,
        metavar="N",
        help=f"stop the demo after N turns (default: run until q; {JSON_DEMO_TURNS} with --json)",
    )
    parser.set_defaults(run=run_from_args)


def _check(args: argparse.Namespace) -> None:

    if not (args.speed == 0 or (math.isfinite(args.speed) and args.speed > 0)):
        raise UsageError(f"--speed must be positive, or 0 for at once; got {args.speed}")
    if not 0.5 <= args.refresh <= 10:
        raise UsageError(f"--refresh must be 0.5-10 per second, got {args.refresh}")
    try:
        check_workload(rate=args.rate, budget=args.budget, conversations=args.conversations)
    except ValueError as error:
        raise UsageError(str(error)) from error
    if args.turns is not None and args.turns <= 0:
        raise UsageError(f"--turns must be positive, got {args.turns}")
    demo_only = [
        flag
        for flag, value, default in (
            ("--rate", args.rate, DEMO.rate),
            ("--budget", args.budget, DEMO.budget),
            ("--seed", args.seed, DEMO.seed),
            ("--conversations", args.conversations, DEMO.conversations),
            ("--turns", args.turns, None),
        )
        if value != default
    ]
    if (args.follow or args.play) and demo_only:
        raise UsageError(f"{', '.join(demo_only)} only apply to --demo")
    if args.speed != 1.0 and not args.play:
        raise UsageError("--speed only applies to --play")
    if args.from_end and not args.follow:
        raise UsageError("--from-end only applies to --follow")
    if args.play and not args.play.is_file():
        raise UsageError(f"cannot play {args.play}: no such file")


def _demo_source(args: argparse.Namespace, *, turns: int | None, rate: float) -> Any:
    from ctxkit.tui.sources import DemoSource

    options = DemoOptions(
        duration=math.inf,
        rate=rate,
        budget=args.budget,
        seed=args.seed,
        conversations=args.conversations,
        turns=turns,
    )
    return DemoSource(options)


def _print_json(args: argparse.Namespace) -> int:
    from ctxkit.tui.model import Inspector

    if args.follow or args.play:
        path = args.follow or args.play
        inspector = Inspector(str(path))
        try:
            from ctxkit.tui.sources import FollowSource

            FollowSource(path).read_all(inspector)
        except OSError as error:
            raise UsageError(f"cannot read {path}: {error.strerror or error}") from error
    else:
        source = _demo_source(args, turns=args.turns or JSON_DEMO_TURNS, rate=math.inf)
        inspector = Inspector("demo")
        source.run(inspector, threading.Event())
        if source.error is not None:
            raise source.error
    snapshot = inspector.snapshot()
    if args.conversation is not None:
        chosen = [c for c in snapshot["conversations"] if c["conversation_id"] == args.conversation]
        if not chosen:
            known = ", ".join(c["conversation_id"] for c in snapshot["conversations"]) or "none"
            raise UsageError(
                f"no conversation {args.conversation!r} in the stream (it has: {known})"
            )
        snapshot["conversations"] = chosen
    print(json.dumps(snapshot, indent=2))
    return EXIT_OK


def run_from_args(args: argparse.Namespace) -> int:
    """The ``inspect`` subcommand's body."""

    _check(args)
    if args.json:
        return _print_json(args)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("the inspector needs a terminal; use --json for a snapshot instead")
    from ctxkit.tui.app import InspectorApp
    from ctxkit.tui.model import Inspector
    from ctxkit.tui.sources import FollowSource, ReplaySource

    if args.follow:
        source: Any = FollowSource(args.follow, from_start=not args.from_end)
        label = str(args.follow)
    elif args.play:
        source = ReplaySource(args.play, speed=args.speed)
        label = str(args.play)
    else:
        source = _demo_source(args, turns=args.turns, rate=args.rate)
        label = "demo"
    app = InspectorApp(
        Inspector(label),
        source,
        conversation=args.conversation,
        refresh_per_second=args.refresh,
    )
    app.run()
    return EXIT_OK
