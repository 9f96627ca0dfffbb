"""``ctxkit demo``: its options; the demo itself is :mod:`ctxkit.demo`."""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from pathlib import Path
from typing import Any

from ctxkit.cli.errors import EXIT_FOUND_PROBLEM, EXIT_OK, UsageError
from ctxkit.cli.options import (
    DEFAULT_SEED,
    check_seconds,
    check_writable_file,
    config_from_json,
)
from ctxkit.demo import DEFAULT_BUDGET, DemoOptions, check_workload, run_demo

__all__ = ["add_parser"]

DESCRIPTION = """\
Drive a context manager with a synthetic agent and switch its telemetry on: Prometheus
metrics on /metrics, a JSON Lines event stream for 'ctxkit inspect', OpenTelemetry over OTLP.
Seeded agent turns (a user ask, tool rounds, a reply) go through the reference manager, or
through --target wrapped by ctxkit.telemetry.instrument(), which counts tokens exactly, detects
compactions and checks the required conformance properties on every view. Stops by itself
after --duration seconds and prints a summary."""

EPILOG = """\
examples:
  ctxkit demo                                          # 30 s, summary only
  ctxkit demo --metrics-port 9464 --duration 600       # scrape it with Prometheus
  ctxkit demo --events events.jsonl                    # follow it with ctxkit inspect
  ctxkit demo --otlp                                   # OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT
  ctxkit demo --target my_pkg.context:MyManager --conversations 3

OTLP export reads the standard variables: OTEL_EXPORTER_OTLP_ENDPOINT (default
http://localhost:4318), OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TIMEOUT,
OTEL_SERVICE_NAME. Message text is never exported unless --include-text. At the end the
exporters get --otlp-timeout seconds to send what is left; the summary says what was sent
and what was dropped.

exit codes: 0 done, 1 the target broke a required property, 2 bad usage (bad target, port in
use), 3 internal error, 130 interrupted."""


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """The ``demo`` subcommand."""
    parser = commands.add_parser(
        "demo",
        help="run a synthetic agent with metrics, events and traces switched on",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument(
        "--target",
        metavar="TARGET",
        help="a manager to drive instead of the reference (module:attr, as for conformance)",
    )
    parser.add_argument(
        "--config", default="{}", metavar="JSON", help="keyword arguments or mount() config"
    )
    parser.add_argument(
        "--metrics-port", type=int, metavar="PORT", help="serve /metrics here (0: any free port)"
    )
    parser.add_argument(
        "--metrics-host",
        metavar="HOST",
        help="bind address of --metrics-port (127.0.0.1)",
    )
    parser.add_argument("--events", type=Path, metavar="PATH", help="append events here (JSONL)")
    parser.add_argument("--otlp", action="store_true", help="export spans and metrics over OTLP")
    parser.add_argument(
        "--otlp-timeout",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="at the end, time OTLP gets to send what is left; then it is dropped (5)",
    )
    parser.add_argument(
        "--include-text", action="store_true", help="put message text in events and spans"
    )
    parser.add_argument(
        "--duration", type=float, default=30.0, metavar="SECONDS", help="run time (30)"
    )
    parser.add_argument(
        "--rate", type=float, default=2.0, metavar="TURNS_PER_SECOND", help="agent turns (2)"
    )
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"workload seed ({DEFAULT_SEED})"
    )
    parser.add_argument(
        "--budget", type=int, default=DEFAULT_BUDGET, metavar="TOKENS", help="token budget (20000)"
    )
    parser.add_argument(
        "--conversations", type=int, default=1, metavar="N", help="conversations at once (1)"
    )
    parser.add_argument(
        "--no-invariants",
        action="store_true",
        help="with --target: do not check the required properties on every view",
    )
    parser.set_defaults(run=run_from_args)


def options_from_args(args: argparse.Namespace) -> DemoOptions:
    """Checked options; raises UsageError or ValueError with a message for the user."""
    config = config_from_json(args.config)
    check_seconds("--duration", args.duration)
    if args.metrics_host is not None and args.metrics_port is None:
        raise ValueError(
            "--metrics-host says where --metrics-port listens: give --metrics-port too"
        )
    check_workload(rate=args.rate, budget=args.budget, conversations=args.conversations)
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65_535:
        raise ValueError(f"--metrics-port must be 0-65535, got {args.metrics_port}")
    if args.events is not None:
        check_writable_file("--events", args.events)
    if not math.isfinite(args.otlp_timeout) or args.otlp_timeout <= 0:
        raise ValueError(
            f"--otlp-timeout must be a positive number of seconds, got {args.otlp_timeout}"
        )
    return DemoOptions(
        target=args.target,
        config=config,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host or "127.0.0.1",
        events_path=args.events,
        include_text=args.include_text,
        otlp=args.otlp,
        otlp_timeout=args.otlp_timeout,
        duration=args.duration,
        rate=args.rate,
        seed=args.seed,
        budget=args.budget,
        conversations=args.conversations,
        check_invariants=not args.no_invariants,
    )


def run_from_args(args: argparse.Namespace) -> int:
    """The ``demo`` subcommand's body: exit code 0, or 1 if the target broke a property."""
    from ctxkit.conformance.target import ContractError, LoadError
    from ctxkit.reference import ConfigError
    from ctxkit.telemetry import CannotServeMetrics, MetricsPortInUse

    try:
        options = options_from_args(args)
        result = asyncio.run(run_demo(options, progress=sys.stderr))
    except MetricsPortInUse as error:
        raise UsageError(f"{error.strerror} (--metrics-port; 0 picks a free one)") from error
    except CannotServeMetrics as error:
        raise UsageError(f"{error.strerror} (--metrics-host)") from error
    except (ValueError, LoadError, ContractError, ConfigError) as error:
        raise UsageError(str(error)) from error
    except ImportError as error:
        raise UsageError(str(error)) from error
    print(result.summary(options.conversations))
    return EXIT_FOUND_PROBLEM if result.violations else EXIT_OK
