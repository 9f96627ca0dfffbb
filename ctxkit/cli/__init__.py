"""The ``ctxkit`` command line: the parser, and how errors become exit codes.

One module per command (``ctxkit.cli.conformance``, ``.tokens``, ``.demo``, ``.inspector``,
``.contexts``, ``.survey``), each importing only :mod:`ctxkit.cli.errors`,
:mod:`ctxkit.cli.options` and :mod:`ctxkit.cli.output` of the CLI, never this package: no
import circles. A command's heavy imports happen when it runs, so ``ctxkit --help`` stays
fast.

Exit codes: 0 success; 1 the job ran and found a problem (e.g. the budget cannot hold the
pinned content); 2 bad usage or unreadable input; 3 an internal error (a bug: please report
it with the ``--debug`` traceback); 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ctxkit.cli.errors import (
    EXIT_FOUND_PROBLEM,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
)
from ctxkit.cli.options import Parser, config_from_json

__all__ = [
    "EXIT_FOUND_PROBLEM",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "config_from_json",
    "main",
]

COMMANDS = (
    "conformance",
    "audit",
    "replay",
    "watch",
    "tokens",
    "demo",
    "inspector",
    "contexts",
    "survey",
    "help",
)
"""The command modules under ctxkit.cli, in the order ``--help`` lists them."""


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
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
    common.add_argument(  # every command answers it, as the bare command does
        "--version", action="version", version=_version(), help="print the version and exit"
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"ctxkit.cli.{name}").add_parser(commands, common)
    return parser


def _version() -> str:
    from ctxkit import __version__
    from ctxkit.extras import DISTRIBUTION

    return f"ctxkit {__version__} ({DISTRIBUTION})"


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
        print(_version())
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
        missing = _missing_extra(exc)
        if missing:
            print(f"ctxkit: {missing}", file=sys.stderr)
            return EXIT_USAGE
        print(
            f"ctxkit: internal error: {type(exc).__name__}: {exc} (run with --debug for details)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _missing_extra(exc: Exception) -> str | None:
    """What to install, when ``exc`` is a module that an extra brings and that is missing:
    the user's to add (exit 2), not ctxkit's bug."""
    from ctxkit.extras import MissingExtra, extra_for, install_line

    if isinstance(exc, MissingExtra):
        return str(exc)
    if isinstance(exc, ModuleNotFoundError):
        extra = extra_for(exc.name)
        if extra is not None:
            return (
                f"{exc.name} is not installed; it comes with the '{extra}' extra: "
                + install_line(extra)
            )
    return None
