"""What telemetry costs the agent loop: every subscriber on against all off, side by side.

The loop of ``agent_loop.py`` (add a tool round, ask for a view under a 128k budget) on a
10k-message history, run by six managers in lockstep: no subscriber (twice, to show the noise
floor), each subscriber alone, and all three. Each step runs on every manager, in rotating
order, so drift on a shared machine hits all alike. The subscribers: Prometheus metrics, the
JSON Lines event stream (to a real file) and OpenTelemetry (SDK tracer and meter providers,
spans batched to an exporter that drops them, so no network is measured).

After each step the loop yields to the event loop once, as an agent does when it calls the
model; that is when deferred subscribers (all of ctxkit's) run. Three figures per mode, each
the median over rounds:

* request latency: median seconds to add the step's messages and get the view, what the
  agent waits for before it can call the model;
* throughput: mean seconds per step including the yield, so the deferred work counts
  (compaction steps included);
* CPU: process CPU seconds per step, deferred work included.

    python benchmarks/telemetry_overhead.py              # about a minute
    python benchmarks/telemetry_overhead.py --rounds 2 --steps 50
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent_loop import BUDGET, history_of, loop_steps, machine

from ctxkit.reference import ReferenceContextManager
from ctxkit.telemetry import EventStream, OpenTelemetry, PrometheusMetrics


def otel_subscriber() -> tuple[OpenTelemetry, Any]:
    """The OTel subscriber on real SDK providers whose exporter drops what it gets."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Drop()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    subscriber = OpenTelemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    return subscriber, tracer_provider


MODES = ("off", "off again", "prometheus", "stream", "otel", "all")
"""``off again`` is a second manager with no subscriber: its difference from ``off`` is the
noise floor of the run."""


def subscribers(mode: str, folder: Path) -> tuple[list[Any], list[Any]]:
    """The subscribers of a mode, and what to close after the round."""
    chosen: list[Any] = []
    closers: list[Any] = []
    if mode in ("prometheus", "all"):
        chosen.append(PrometheusMetrics())
    if mode in ("stream", "all"):
        stream = EventStream(folder / f"{mode}.jsonl")
        chosen.append(stream)
        closers.append(stream.close)
    if mode in ("otel", "all"):
        otel, provider = otel_subscriber()
        chosen.append(otel)
        closers.append(provider.shutdown)
    return chosen, closers


async def one_round(
    history: list[dict[str, Any]], steps: list[list[dict[str, Any]]], folder: Path
) -> dict[str, dict[str, float]]:
    """One manager per mode, in lockstep: each loop step runs on every manager, in an order
    that rotates, so all see the same moment of a noisy machine."""
    managers: dict[str, ReferenceContextManager] = {}
    closers: list[Any] = []
    for mode in random.sample(MODES, len(MODES)):  # creation order varies between rounds
        manager = managers[mode] = ReferenceContextManager(max_tokens=BUDGET)
        chosen, to_close = subscribers(mode, folder)
        closers += to_close
        for subscriber in chosen:
            manager.bus.subscribe(subscriber)
        await manager.set_messages(history)
        await manager.get_messages_for_request(token_budget=BUDGET)
    gc.collect()
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    walls: dict[str, list[float]] = {mode: [] for mode in MODES}
    cpu = dict.fromkeys(MODES, 0.0)
    for number, step in enumerate(steps):
        shift = number % len(MODES)
        for mode in MODES[shift:] + MODES[:shift]:
            manager = managers[mode]
            c0, t0 = time.process_time(), time.perf_counter()
            for message in step:
                await manager.add_message(message)
            await manager.get_messages_for_request(token_budget=BUDGET)
            t1 = time.perf_counter()
            # The agent now calls the model: its task yields, and deferred subscribers run.
            await asyncio.sleep(0)
            times[mode].append(t1 - t0)
            walls[mode].append(time.perf_counter() - t0)
            cpu[mode] += time.process_time() - c0
    for close in closers:
        close()
    return {
        mode: {
            "latency": statistics.median(times[mode]),
            "throughput": sum(walls[mode]) / len(steps),
            "cpu": cpu[mode] / len(steps),
        }
        for mode in MODES
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--history", type=int, default=10_000, help="messages (10000)")
    parser.add_argument("--steps", type=int, default=400, help="loop steps per round (400)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds (7)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    history = history_of(args.history)
    steps = loop_steps(args.steps)
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as folder:
        for number in range(args.rounds):
            for mode, figures in asyncio.run(one_round(history, steps, Path(folder))).items():
                runs[mode].append(figures)
            print(f"round {number + 1}/{args.rounds} done", file=sys.stderr)
    print(f"machine: {machine()}")
    print(
        f"history {len(history):,} messages, budget {BUDGET:,}, {args.steps} steps x "
        f"{args.rounds} rounds, all modes in lockstep; medians over rounds\n"
    )
    header = (
        f"{'subscribers':<12} {'request us':>11} {'step us':>9} {'CPU us/step':>12} "
        f"{'overhead (request / step / CPU)':>33}"
    )
    print(header)
    print("-" * len(header))
    results: dict[str, Any] = {"machine": machine(), "history": len(history), "modes": {}}
    figures = ("latency", "throughput", "cpu")
    base = {f: statistics.median(r[f] for r in runs["off"]) for f in figures}
    for mode in MODES:
        values = {f: statistics.median(r[f] for r in runs[mode]) for f in figures}
        overhead = {f: values[f] / base[f] - 1 for f in figures}
        results["modes"][mode] = {"seconds": values, "overhead": overhead}
        shown = " / ".join(f"{overhead[f]:+.1%}" for f in figures)
        print(
            f"{mode:<12} {values['latency'] * 1e6:>11.1f} {values['throughput'] * 1e6:>9.1f} "
            f"{values['cpu'] * 1e6:>12.1f} {'-' if mode == 'off' else shown:>33}"
        )
    print("\ngoal: request overhead <= 5 % (the deferred work is the step and CPU columns)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
