"""``ctxkit conformance``: its options, its progress lines and its report.

Kept apart from ``cli.py`` so the suite (and Hypothesis) is imported only when this command
runs.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

EXIT_PASS = 0
EXIT_REQUIRED_FAILED = 1
EXIT_CANNOT_LOAD = 2
MIN_MEMORY_LIMIT = 64 << 20

DESCRIPTION = """\
Check a context manager against the conformance properties with property-based tests.
The target runs in a child process; each operation gets --timeout seconds. A failure shows
the property, one plain sentence, and the shrunk calls as a script that reproduces it.

TARGET is one of:
  module:attr         a class or zero-argument factory (called with --config as keywords),
                      or a mount(coordinator, config) function
  module              a module with a mount() function
  ep:NAME             an installed amplifier.modules entry point
  path/to/file.py[:attr]
  (nothing)           ctxkit's reference manager
"""

EPILOG = """\
relaxations (--allow, repeatable):
  hoisted-system      ordering: system messages may move to the front of the view
  dropped-system      preservation: system messages may be dropped from a view
  budget-tolerance=R  budget: a view may exceed the budget by the ratio R (e.g. 0.05)

containment: the target runs in a process of its own under a supervisor; anything it starts
(children, double-forked daemons) ends with it, and with ctxkit, however ctxkit ends. Its
output is kept to the first and last MiB. Its address space is capped: --memory-limit SIZE
(4G by default; e.g. 2G, 512M; 0 or none for no cap); a target past the cap is reported as
exceeding the memory limit, not as a hang or a crash.

exit codes: 0 every required property holds; 1 a required property failed or could not be
checked (a hang, a crash); 2 the target could not be loaded, or bad usage.

examples:
  ctxkit conformance                                  # the reference manager
  ctxkit conformance mypkg.context:SlidingWindow --config '{"max_tokens": 8000}'
  ctxkit conformance ep:context-simple --profile thorough --report-json report.json
  ctxkit conformance ./my_manager.py --seed 42 --format anthropic --junit junit.xml
"""


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "conformance",
        help="check any context manager against the conformance properties",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("target", nargs="?", metavar="TARGET", help="what to check (see above)")
    parser.add_argument(
        "--config", default="{}", metavar="JSON", help="keyword arguments or mount() config"
    )
    parser.add_argument("--seed", type=int, help="Hypothesis seed (default: random, printed)")
    parser.add_argument("--max-examples", type=int, metavar="N", help="runs per search")
    parser.add_argument(
        "--profile",
        choices=["quick", "default", "thorough"],
        default="default",
        help="how hard to search (default: default)",
    )
    parser.add_argument(
        "--timeout", type=float, default=10.0, metavar="S", help="seconds per operation (10)"
    )
    parser.add_argument(
        "--memory-limit",
        type=_memory_limit,
        metavar="SIZE",
        help="cap on the target's address space, e.g. 2G, 512M; 0 or none: no cap (4G)",
    )
    parser.add_argument(
        "--format",
        choices=["openai", "anthropic", "both"],
        default="both",
        help="message shapes to generate (both)",
    )
    parser.add_argument(
        "--allow", action="append", default=[], metavar="RELAXATION", help="see below"
    )
    parser.add_argument("--report-json", type=Path, metavar="PATH", help="write the JSON report")
    parser.add_argument("--junit", type=Path, metavar="PATH", help="write a JUnit XML report")
    parser.set_defaults(run=run_conformance)


def _memory_limit(text: str) -> int:
    """``--memory-limit`` in bytes; 0 for no cap."""
    from ctxkit.conformance.sandbox import format_size, parse_size

    try:
        size = parse_size(text) or 0
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if 0 < size < MIN_MEMORY_LIMIT:
        raise argparse.ArgumentTypeError(
            f"{text!r} ({format_size(size)}) is too little to start Python; give at least "
            f"{format_size(MIN_MEMORY_LIMIT)}, or 0 or none for no cap"
        )
    return size


def run_conformance(args: argparse.Namespace) -> int:
    from ctxkit.cli import UsageError, config_from_json

    config = config_from_json(args.config)
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout}")
    if args.max_examples is not None and args.max_examples < 1:
        raise UsageError(f"--max-examples must be at least 1, got {args.max_examples}")

    from ctxkit.conformance.report import reproducer_script, summary, write_json, write_junit
    from ctxkit.conformance.runner import RunOptions, SetupError, run
    from ctxkit.conformance.sandbox import DEFAULT_MEMORY_LIMIT, SandboxUnavailable, require_linux
    from ctxkit.conformance.target import DEFAULT_TARGET

    try:
        require_linux()
    except SandboxUnavailable as exc:
        raise UsageError(str(exc)) from None

    seed = args.seed if args.seed is not None else random.randrange(1, 2**31)
    options = RunOptions(
        target=args.target,
        config=config,
        seed=seed,
        profile=args.profile,
        max_examples=args.max_examples,
        timeout=args.timeout,
        shapes=("openai", "anthropic") if args.format == "both" else (args.format,),
        allow=list(args.allow),
        memory_limit=(
            DEFAULT_MEMORY_LIMIT if args.memory_limit is None else args.memory_limit or None
        ),
    )
    ticker = _Ticker() if sys.stderr.isatty() else None
    name = args.target or "ctxkit.reference:mount (the reference manager)"
    print(f"ctxkit conformance: checking {name}, seed {seed}", file=sys.stderr, flush=True)
    try:
        report = run(
            options,
            progress=lambda line: _line(f"  {line}", ticker),
            tick=ticker,
            reproducer=lambda result, failure: reproducer_script(
                options.target or DEFAULT_TARGET, config, seed, result, failure
            ),
        )
    except SetupError as exc:
        print(f"ctxkit: cannot check: {exc}", file=sys.stderr)
        return EXIT_CANNOT_LOAD
    _line("", ticker)
    print(summary(report))
    if args.report_json:
        write_json(report, args.report_json)
    if args.junit:
        write_junit(report, args.junit)
    return exit_code(report.verdict)


def exit_code(verdict: str) -> int:
    """0 when every required property holds; 1 when one failed or could not be checked."""
    return EXIT_PASS if verdict == "pass" else EXIT_REQUIRED_FAILED


class _Ticker:
    """A live 'runs, steps, seconds' counter on a terminal, redrawn at most 5 times a second."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.shown = 0.0
        self.active = False

    def __call__(self, runs: int, steps: int) -> None:
        now = time.monotonic()
        if now - self.shown < 0.2:
            return
        self.shown = now
        self.active = True
        sys.stderr.write(f"\r    {runs:,} runs, {steps:,} steps, {now - self.started:.0f} s ")
        sys.stderr.flush()


def _line(text: str, ticker: _Ticker | None) -> None:
    """Print a progress line, first clearing a live counter if one is shown."""
    if ticker is not None and ticker.active:
        sys.stderr.write("\r" + " " * 60 + "\r")
        ticker.active = False
    if text:
        print(text, file=sys.stderr, flush=True)
