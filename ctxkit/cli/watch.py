"""``ctxkit watch``: receive OTLP from running agents and audit every request as it arrives."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import Any

from ctxkit.cli.audit import add_window_option
from ctxkit.cli.errors import UsageError
from ctxkit.cli.options import check_writable_file
from ctxkit.extras import MissingExtra
from ctxkit.wording import plural

__all__ = ["add_parser", "address"]

DESCRIPTION = """\
Receive OpenTelemetry traces and logs over OTLP/HTTP, and over OTLP/gRPC with --otlp-grpc
(as an agent's exporter or a Collector sends them), and audit every model request as it
arrives, as 'ctxkit audit' audits files:
findings are printed (never message content), counted on /metrics with the same fleet
figures as the reference manager (views, compactions, prompt-cache prefix kept, conversations
near their context window, required-property violations) plus the audit's own
(ctxkit_audit_requests_total, ctxkit_audit_violations_total{property,level}), and written to
--events for 'ctxkit inspect --follow'.

Point an agent at it with OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 (and its
instrumentation's content setting: see 'ctxkit audit --help'), or a Collector's otlp
exporter at --otlp-grpc 127.0.0.1:4317.
"""

EPILOG = """\
Never slows the agent: exports are queued and answered at once; when the queue is full the
answer is 503 with Retry-After (gRPC: UNAVAILABLE), which OTLP exporters retry. Several
instances can share a fleet when each conversation goes to one of them (the Collector's
load-balancing exporter, routing by trace or by gen_ai.conversation.id); Prometheus sums
them.

exit codes: 0 stopped (Ctrl-C or SIGTERM) with no required property failing; 1 stopped after
a required property failed; 2 bad usage (a port in use, an unwritable file).

examples:
  ctxkit watch
  ctxkit watch --otlp-http 127.0.0.1:4318 --metrics-port 9465 --events audit.jsonl
  ctxkit watch --otlp-grpc 127.0.0.1:4317     # OTLP/gRPC too: pip install 'ctxkit-llm[grpc]'
  ctxkit watch --record traces.jsonl          # keep what arrives; later: ctxkit audit traces.jsonl
"""


def address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``PORT``."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (a port from 0 to 65535)")
    return host or "127.0.0.1", int(port)


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "watch",
        help="receive OTLP from running agents and audit each request as it arrives",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument(
        "--otlp-http",
        type=address,
        default=("127.0.0.1", 4318),
        metavar="HOST:PORT",
        help="where to receive OTLP/HTTP (default 127.0.0.1:4318; port 0: any free port)",
    )
    parser.add_argument(
        "--otlp-grpc",
        type=address,
        metavar="HOST:PORT",
        help="also receive OTLP/gRPC there (4317 by convention; port 0: any free port; "
        "needs grpcio: pip install 'ctxkit-llm[grpc]')",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="P",
        help="serve Prometheus metrics on 127.0.0.1:P/metrics (0: any free port)",
    )
    parser.add_argument("--events", type=Path, metavar="F", help="append events as JSON Lines")
    parser.add_argument(
        "--report-json", type=Path, metavar="F", help="write the audit's JSON report on exit"
    )
    parser.add_argument(
        "--record",
        type=Path,
        metavar="F",
        help=(
            "append every export received to F as the OpenTelemetry Collector's file exporter "
            "writes it (OTLP/JSON, one export a line), while auditing it: a recording 'ctxkit "
            "audit F' reads again, made without a Collector"
        ),
    )
    add_window_option(parser)
    parser.add_argument(
        "--settle",
        type=float,
        default=5.0,
        metavar="S",
        help=(
            "seconds to hold what arrives before auditing it in time order, so that a span's "
            "log records and batches delivered out of order find their place (default 5, an "
            "OpenTelemetry batch processor's export delay); a request that arrives later "
            "than a newer one of its conversation is checked alone"
        ),
    )
    parser.add_argument(
        "--queue", type=int, default=1024, metavar="N", help="exports held at most (default 1024)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from prometheus_client import CollectorRegistry

    from ctxkit.audit.auditor import Auditor
    from ctxkit.audit.publish import AuditMetrics
    from ctxkit.audit.receiver import Watch
    from ctxkit.audit.report import Outcome, write_json
    from ctxkit.audit.terminal import printable
    from ctxkit.events import EventBus
    from ctxkit.telemetry.prometheus import MetricsPortInUse, PrometheusMetrics, serve_metrics

    for option, path in (
        ("--events", args.events),
        ("--report-json", args.report_json),
        ("--record", args.record),
    ):
        if path is not None:
            check_writable_file(option, path)
    if args.settle < 0 or args.queue < 1:
        raise UsageError("--settle must be 0 or more and --queue at least 1")
    registry = CollectorRegistry()
    bus = EventBus()
    bus.subscribe(PrometheusMetrics(registry))
    stream = None
    if args.events is not None:
        from ctxkit.telemetry.stream import EventStream

        stream = EventStream(args.events)
        bus.subscribe(stream)

    def show(audit: Any, request: Any, found: list[Any]) -> None:
        for finding in found:
            print(
                printable(
                    f"{audit.key} request {finding.request}: {finding.property} "
                    f"({finding.level}): {finding.message}"
                ),
                flush=True,
            )

    host, port = args.otlp_http
    try:
        watch = Watch(
            bus=bus,
            metrics=AuditMetrics(registry),
            auditor=Auditor(windows=dict(args.window)),
            host=host,
            port=port,
            queue_size=args.queue,
            settle_s=args.settle,
            on_finding=show,
            grpc_address=args.otlp_grpc,
        )
    except ImportError as exc:
        raise UsageError(str(MissingExtra("--otlp-grpc", "grpc", str(exc)))) from None
    except OSError as exc:
        raise UsageError(
            str(exc)
            if exc.strerror is None
            else f"cannot receive OTLP/HTTP on {host}:{port}: {exc.strerror}"
        ) from None
    metrics_server = None
    if args.metrics_port is not None:
        try:
            metrics_server, metrics_port = serve_metrics(registry, port=args.metrics_port)
        except (MetricsPortInUse, OSError) as exc:
            raise UsageError(str(exc)) from None
        print(f"metrics on http://127.0.0.1:{metrics_port}/metrics", flush=True)
    if watch.grpc_receiver is not None:
        grpc_host = args.otlp_grpc[0]
        print(f"receiving OTLP/gRPC on {grpc_host}:{watch.grpc_receiver.port}", flush=True)
    print(f"receiving OTLP/HTTP on http://{host}:{watch.port} (Ctrl-C to stop)", flush=True)

    # Opened once nothing can fail for the user's reasons: a port in use leaves no file.
    record = args.record.open("a", encoding="utf-8") if args.record is not None else None
    watch.record = record

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, watch.stop)
        await watch.run()

    try:
        asyncio.run(main())
    finally:
        if metrics_server is not None:
            metrics_server.shutdown()
        if stream is not None:
            stream.close()
        if record is not None:
            with contextlib.suppress(OSError):  # a failed write was said when it failed
                record.close()
    dropped = watch.duplicates.note()
    outcome = Outcome.of(watch.auditor, watch.problems, notes=[dropped] if dropped else [])
    if args.report_json is not None:
        write_json(outcome, args.report_json)
    auditor = watch.auditor
    print(
        f"stopped: {plural(auditor.requests, 'request')} in "
        f"{plural(len(auditor.conversations), 'conversation')}",
        file=sys.stderr,
    )
    if not auditor.requests:
        print(f"ctxkit: {outcome.nothing_audited()}", file=sys.stderr)
    return outcome.exit_code
