"""``ctxkit demo``: its options; the demo itself is :mod:`ctxkit.demo`."""

from __future__ import annotations

import argparse
import asyncio
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
from ctxkit.cli.signals import terminated_as_interrupt
from ctxkit.demo import DEFAULT_BUDGET, DemoOptions, check_workload, run_demo
from ctxkit.extras import extra_for
from ctxkit.fleet import budget_mix

__all__ = ["add_parser"]

DESCRIPTION = """\
Drive a context manager with a synthetic agent and switch its telemetry on: Prometheus
metrics on /metrics, a JSON Lines event stream for 'ctxkit inspect', OpenTelemetry over OTLP.
Seeded agent turns (a user ask, tool rounds, a reply) go through the reference manager, or
through --manager wrapped by ctxkit.telemetry.instrument(), which counts tokens exactly, detects
compactions and checks the required conformance properties on every view. Stops by itself
after --duration seconds and prints a summary."""

EPILOG = """\
examples:
  ctxkit demo                                          # 30 s, summary only
  ctxkit demo --metrics-port 9464 --duration 600       # scrape it with Prometheus
  ctxkit demo --events events.jsonl                    # follow it with ctxkit inspect
  ctxkit demo --otlp                                   # OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT
  ctxkit demo --manager my_pkg.context:MyManager --conversations 3
  ctxkit demo --processes 3 --conversations 200 --metrics-port 9464 \\
              --prometheus-config fleet.yml --duration 600   # a fleet for a dashboard

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
        "--manager",
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
        help="with --manager: do not check the required properties on every view",
    )
    fleet = parser.add_argument_group("a fleet (many processes, many conversations)")
    fleet.add_argument(
        "--processes",
        type=int,
        default=1,
        metavar="N",
        help="run N processes sharing --conversations; with --metrics-port P they serve "
        "ports P to P+N-1 (1)",
    )
    fleet.add_argument(
        "--near-limit",
        type=int,
        metavar="K",
        help="construct the first K conversations near their limit (past 90%% of the "
        "budget, then idle there); default: a twentieth of them with --processes",
    )
    fleet.add_argument(
        "--prometheus-config",
        type=Path,
        metavar="FILE",
        help="write a Prometheus configuration that scrapes every process",
    )
    parser.add_argument("--fleet-first", type=int, default=None, help=argparse.SUPPRESS)
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
    check_seconds("--otlp-timeout", args.otlp_timeout)
    near_limit = args.near_limit or 0
    if not 0 <= near_limit <= args.conversations:
        raise ValueError(f"--near-limit must be 0 to --conversations, got {near_limit}")
    if near_limit and args.manager is not None:
        raise ValueError("--near-limit constructs reference managers; leave out --manager")
    in_fleet = args.fleet_first is not None
    return DemoOptions(
        target=args.manager,
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
        first_conversation=args.fleet_first if in_fleet else 1,
        budgets=budget_mix(args.budget) if in_fleet else (),
        near_limit=near_limit,
    )


def run_from_args(args: argparse.Namespace) -> int:
    """The ``demo`` subcommand's body: exit code 0, or 1 if the target broke a property."""
    from ctxkit.conformance.targets.load import ContractError, LoadError
    from ctxkit.reference import ConfigError
    from ctxkit.telemetry import CannotServeMetrics, MetricsPortInUse

    if args.processes != 1 or args.prometheus_config is not None:
        return _run_fleet(args)
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
        if extra_for(error.name):  # said with the extra's install line (ctxkit.cli.main)
            raise
        raise UsageError(str(error)) from error
    print(result.summary(options.conversations))
    return EXIT_FOUND_PROBLEM if result.violations else EXIT_OK


def _run_fleet(args: argparse.Namespace) -> int:
    """``--processes N``: check what the processes share, write the Prometheus
    configuration, then run them (each is a ``ctxkit demo`` of its own)."""
    from ctxkit.fleet import plan, prometheus_config, run_fleet

    processes = args.processes
    if not 1 <= processes <= 64:
        raise UsageError(f"--processes must be 1-64, got {processes}")
    if args.conversations < processes:
        raise UsageError(
            f"--conversations ({args.conversations}) must be at least --processes ({processes})"
        )
    if args.events is not None:
        raise UsageError("--events takes one process's stream; leave it out with --processes")
    port = args.metrics_port
    if port is not None and (port == 0 or not 1 <= port <= 65_536 - processes):
        raise UsageError(
            f"--metrics-port must be a port P from 1 to {65_536 - processes}: the processes "
            f"serve P to P+{processes - 1}"
        )
    if args.prometheus_config is not None:
        if port is None:
            raise UsageError("--prometheus-config needs --metrics-port: it lists their ports")
        check_writable_file("--prometheus-config", args.prometheus_config)
    near_limit = args.conversations // 20 if args.near_limit is None else args.near_limit
    if not 0 <= near_limit <= args.conversations:
        raise UsageError(f"--near-limit must be 0 to --conversations, got {near_limit}")
    members = plan(args.conversations, processes, near_limit, port)
    for member in members:  # each process checks its own options the same way
        try:
            check_workload(rate=args.rate, budget=args.budget, conversations=member.conversations)
        except ValueError as error:
            raise UsageError(f"{error} (per process)") from error
    host = args.metrics_host or "127.0.0.1"
    if args.prometheus_config is not None and port is not None:
        ports = [member.port for member in members if member.port is not None]
        args.prometheus_config.write_text(prometheus_config(host, ports), encoding="utf-8")
        print(f"ctxkit demo: wrote {args.prometheus_config}", file=sys.stderr)
    shown = f" on {host}:{port}-{port + processes - 1}" if port is not None else ""
    print(
        f"ctxkit demo: {processes} processes, {args.conversations} conversations "
        f"({near_limit} near their limit){shown}",
        file=sys.stderr,
    )
    with terminated_as_interrupt():  # so that stopping the fleet stops every process of it
        return run_fleet(members, _child_args(args))


def _child_args(args: argparse.Namespace) -> list[str]:
    """The options every process of a fleet runs with (its share is added per process)."""
    child = [
        "--duration", str(args.duration), "--rate", str(args.rate), "--seed", str(args.seed),
        "--budget", str(args.budget), "--config", args.config,
        "--otlp-timeout", str(args.otlp_timeout),
    ]  # fmt: skip
    if args.metrics_host is not None:
        child += ["--metrics-host", args.metrics_host]
    if args.manager is not None:
        child += ["--manager", args.manager]
    for flag, on in (
        ("--otlp", args.otlp),
        ("--include-text", args.include_text),
        ("--no-invariants", args.no_invariants),
    ):
        if on:
            child.append(flag)
    return child
