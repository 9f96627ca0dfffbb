"""``ctxkit demo``: a synthetic agent driving a context manager, with telemetry switched on.

It is what the dashboards and ``ctxkit inspect`` are shown on: seeded agent turns (a user ask,
tool rounds, a reply) go through the reference manager, or through any ``--manager`` wrapped by
:func:`ctxkit.telemetry.instrument`, asking for a view before every assistant message as an
agent would, at a steady rate, under a small budget so that compactions happen. It stops by
itself after ``--duration`` seconds and prints a summary.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ctxkit import events
from ctxkit.events import Event, Subscriber
from ctxkit.wording import plural

__all__ = ["DemoOptions", "DemoResult", "check_workload", "run_demo"]

DEFAULT_BUDGET = 20_000
TOOL_OUTPUT_BYTES = 6_000
"""Tool outputs are capped so that a 20k budget holds any single unit."""
SHORTENED_OUTPUT_BYTES = 2_000
"""The reference shortens tool outputs past this in a compacted view, so the demo shows
truncations too."""


@dataclass(frozen=True, slots=True)
class DemoOptions:
    target: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    events_path: Path | None = None
    include_text: bool = False
    otlp: bool = False
    otlp_timeout: float = 5.0
    """Seconds the OTLP exporters get, at the end, to send what is left."""
    duration: float = 30.0
    rate: float = 2.0
    seed: int = 1
    budget: int = DEFAULT_BUDGET
    conversations: int = 1
    check_invariants: bool = True
    turns: int | None = None
    """Stop after this many agent turns (over all conversations), whatever the duration."""
    first_conversation: int = 1
    """The number of the first conversation (``demo-<n>``): unique ids across a fleet."""
    budgets: tuple[int, ...] = ()
    """A mix of budgets, one per conversation in turn (empty: ``budget`` for all)."""
    near_limit: int = 0
    """How many conversations, the first ones, are constructed near their limit: the
    reference manager compacting late (at 99% of a 64k budget, down to 95%), filled past
    90% before the demo starts, then left idle there, live: what a fleet's near-limit gauge
    and alert must count exactly."""


@dataclass(slots=True)
class DemoResult:
    """What the demo did, counted from the events it published."""

    seconds: float = 0.0
    turns: int = 0
    views: int = 0
    compactions: int = 0
    tokens_saved: int = 0
    violations: int = 0
    last_view: dict[str, Any] = field(default_factory=dict)
    metrics_url: str | None = None
    events_written: int = 0
    events_dropped: int = 0
    otlp: str | None = None
    """What the OTLP export sent and dropped, in a line (see OtlpTally.describe)."""

    def __call__(self, event: Event) -> None:
        """Counts events as an inline subscriber."""
        data = event.data
        if event.name == events.VIEW:
            self.views += 1
            self.last_view = dict(data)
        elif event.name == events.POST_COMPACT:
            self.compactions += 1
            self.tokens_saved += max(0, data.get("tokens_saved", 0))
        elif event.name == events.INVARIANT_VIOLATION:
            self.violations += 1

    def summary(self, conversations: int) -> str:
        view = self.last_view
        lines = [
            f"ran {self.seconds:.1f} s: {plural(conversations, 'conversation')}, "
            f"{plural(self.turns, 'turn')}, {plural(self.views, 'view')}, "
            f"{plural(self.compactions, 'compaction')}, "
            f"{plural(self.tokens_saved, 'token')} saved",
        ]
        if view:
            ratio = view["token_count"] / view["budget"] if view.get("budget") else 0.0
            lines.append(
                f"latest view: {view['message_count']:,} messages, {view['token_count']:,} of "
                f"{view['budget']:,} tokens ({ratio:.1%}); history "
                f"{view.get('history_messages', 0):,} messages"
            )
        lines.append(f"invariant violations: {self.violations}")
        if self.metrics_url:
            lines.append(f"metrics: served on {self.metrics_url} while running")
        if self.events_written or self.events_dropped:
            lines.append(f"events: {self.events_written:,} written ({self.events_dropped} dropped)")
        if self.otlp:
            lines.append(self.otlp)
        return "\n".join(lines)


def agent_turns(seed: int) -> Iterator[list[list[dict[str, Any]]]]:
    """Endless turns, each cut into the steps an agent adds between two model calls.

    A model call comes before every assistant message, so a turn ``[system?, user, (assistant
    call, results)..., assistant reply]`` is cut before each assistant message.
    """
    from ctxkit.workload import Workload

    workload = Workload(seed=seed, shape="mixed", max_output_bytes=TOOL_OUTPUT_BYTES)
    for turn in workload.turns():
        steps: list[list[dict[str, Any]]] = [[]]
        for message in turn:
            if message["role"] == "assistant" and steps[-1]:
                steps.append([])
            steps[-1].append(message)
        yield steps


NEAR_LIMIT_BUDGET = 64_000
NEAR_LIMIT_CONFIG = {"compact_threshold": 0.99, "target_ratio": 0.95}
"""A conversation built to sit near its limit: it compacts only at 99% of its budget, and
its units are small beside 64k tokens, so no view of it falls back under 90%."""


def budget_of(options: DemoOptions, index: int) -> int:
    """The budget of the process's ``index``-th conversation (0-based)."""
    if index < options.near_limit:
        return NEAR_LIMIT_BUDGET
    return options.budgets[index % len(options.budgets)] if options.budgets else options.budget


async def _build_managers(options: DemoOptions) -> list[Any]:
    numbers = range(options.first_conversation, options.first_conversation + options.conversations)
    if options.target is None:
        from ctxkit.reference import ReferenceContextManager

        return [
            ReferenceContextManager.from_config(
                {
                    "max_tokens": budget_of(options, index),
                    "on_overflow": "best_effort",
                    "tool_output_max_bytes": SHORTENED_OUTPUT_BYTES,
                    "conversation_id": f"demo-{number}",
                    # ctxkit inspect's View pane lists each view message by message.
                    "view_listing": True,
                    **(NEAR_LIMIT_CONFIG if index < options.near_limit else {}),
                    **options.config,
                }
            )
            for index, number in enumerate(numbers)
        ]
    from ctxkit.conformance.targets.load import EventRecorder, load_target
    from ctxkit.telemetry import instrument

    target = load_target(options.target, options.config)
    managers = []
    for number in numbers:
        manager = await target.build(EventRecorder())
        managers.append(
            instrument(
                manager,
                check_invariants=options.check_invariants,
                max_tokens=options.budget,
                conversation_id=f"demo-{number}",
                view_listing=True,
            )
        )
    return managers


async def run_demo(
    options: DemoOptions,
    progress: TextIO | None = None,
    *,
    subscribers: Sequence[Subscriber] = (),
) -> DemoResult:
    """Run the demo to its end (or until cancelled) and return what it did.

    ``subscribers`` also get every event (``ctxkit inspect --demo`` feeds its screen so).

    Raises :class:`~ctxkit.conformance.targets.load.LoadError` /
    ``ContractError`` for a bad target and
    :class:`~ctxkit.telemetry.CannotServeMetrics` (``MetricsPortInUse`` for a taken port)
    when the metrics server cannot listen, before any work starts.
    """
    from ctxkit.telemetry import EventStream, PrometheusMetrics, serve_metrics

    result = DemoResult()
    managers = await _build_managers(options)
    closers: list[Any] = []
    attached: list[Any] = [result, *subscribers]
    stream = None
    try:
        if options.metrics_port is not None:
            metrics = PrometheusMetrics()
            server, port = serve_metrics(
                metrics.registry, port=options.metrics_port, host=options.metrics_host
            )
            closers.append(server.shutdown)
            closers.append(server.server_close)
            result.metrics_url = f"http://{options.metrics_host}:{port}/metrics"
            attached.append(metrics)
            if progress is not None:
                print(f"ctxkit demo: metrics on {result.metrics_url}", file=progress)
        if options.events_path is not None:
            stream = EventStream(options.events_path, include_text=options.include_text)
            closers.append(stream.close)
            attached.append(stream)
        if options.otlp:
            from ctxkit.telemetry import OpenTelemetry
            from ctxkit.telemetry.otlp import start_otlp

            export = start_otlp(service_name="ctxkit-demo")

            def close_otlp() -> None:
                result.otlp = export.shutdown(options.otlp_timeout).describe()

            closers.append(close_otlp)
            attached.append(
                OpenTelemetry(
                    tracer_provider=export.tracer_provider,
                    meter_provider=export.meter_provider,
                    include_text=options.include_text,
                )
            )
        for manager in managers:
            for subscriber in attached:
                manager.bus.subscribe(subscriber)
        await _drive(managers, options, result, progress)
    finally:
        for manager in managers:
            manager.bus.flush()
        for close in closers:
            close()
        if stream is not None:
            result.events_written, result.events_dropped = stream.written, stream.dropped
    return result


async def _drive(
    managers: list[Any], options: DemoOptions, result: DemoResult, progress: TextIO | None
) -> None:
    first = options.first_conversation - 1  # conversation demo-1 has the seed itself
    conversations = [agent_turns(options.seed + first + n) for n in range(len(managers))]
    budgets = [budget_of(options, index) for index in range(len(managers))]
    talking = list(range(options.near_limit, len(managers)))
    if len(managers) > 1 or options.near_limit:
        await _start_fleet(managers, conversations, budgets, options.near_limit, result)
    started = time.monotonic()
    deadline = started + options.duration
    interval = 1.0 / options.rate
    next_turn = started
    last_progress = 0.0
    for number in itertools.cycle(talking or [None]):
        now = time.monotonic()
        if now >= deadline or result.turns == options.turns or number is None:
            break
        if next_turn > now:
            await asyncio.sleep(min(next_turn, deadline) - now)
            now = time.monotonic()
            if now >= deadline:
                break
        next_turn += interval
        await _turn(managers[number], conversations[number], budgets[number])
        result.turns += 1
        if progress is not None and now - last_progress >= 0.5:
            last_progress = now
            _show_progress(progress, now - started, result)
    result.seconds = time.monotonic() - started
    if progress is not None and progress.isatty():
        print(file=progress)


async def _turn(manager: Any, turns: Iterator[list[list[dict[str, Any]]]], budget: int) -> None:
    """One agent turn: each step's messages, then a view, as before each model call; then the
    event loop runs what waits on it (a stop, a screen). The reference manager never waits, so
    a demo behind its pace, or a fleet's start, would otherwise never let them run."""
    for step in next(turns):
        for message in step:
            await manager.add_message(message)
        await manager.get_messages_for_request(token_budget=budget)
        _report_usage(manager)
    await asyncio.sleep(0)


PROVIDER_OVERHEAD_TOKENS = 150
"""Input tokens the simulated provider bills beyond the view (its tool definitions): the
offset the dashboard's token-estimate panel shows for a real provider too."""
ANSWER_TOKENS = 60


def _report_usage(manager: Any) -> None:
    """What a provider would report for the model call, given to the reference manager's
    ``record_usage()`` as an agent does (a wrapped target has no such method of ctxkit's)."""
    from ctxkit.reference import ReferenceContextManager

    if isinstance(manager, ReferenceContextManager):
        billed = manager.usage()["tokens"] + PROVIDER_OVERHEAD_TOKENS
        manager.record_usage(input_tokens=billed, output_tokens=ANSWER_TOKENS)


async def _start_fleet(
    managers: list[Any],
    conversations: list[Iterator[list[list[dict[str, Any]]]]],
    budgets: list[int],
    near_limit: int,
    result: DemoResult,
) -> None:
    """Before the paced loop: every conversation speaks once, so all are live from the
    start; the first ``near_limit`` go on until their view passes 90% of the budget, and
    then wait there."""
    for index, manager in enumerate(managers):
        await _turn(manager, conversations[index], budgets[index])
        result.turns += 1
        if index >= near_limit:
            continue
        for _ in range(NEAR_LIMIT_TURNS):
            if manager.usage()["ratio"] > 0.9:
                break
            await _turn(manager, conversations[index], budgets[index])
            result.turns += 1
        else:
            raise RuntimeError(f"conversation {index} never passed 90% of its budget")


NEAR_LIMIT_TURNS = 500
"""Turns a near-limit conversation may take to pass 90% of its budget (about 30 do)."""


def _show_progress(out: TextIO, elapsed: float, result: DemoResult) -> None:
    view = result.last_view
    ratio = view["token_count"] / view["budget"] if view.get("budget") else 0.0
    line = (
        f"{elapsed:6.1f} s  turns {result.turns:,}  views {result.views:,}  "
        f"compactions {result.compactions:,}  context {ratio:.0%}"
    )
    if out.isatty():
        print("\r" + line, end="", file=out, flush=True)


def check_workload(*, rate: float, budget: int, conversations: int) -> None:
    """The checks ``ctxkit demo`` and ``ctxkit inspect --demo`` share; ValueError says which
    option is wrong."""
    if not math.isfinite(rate) or rate <= 0:
        raise ValueError(f"--rate must be a positive number, got {rate}")
    if budget <= 0:
        raise ValueError(f"--budget must be positive, got {budget}")
    if not 1 <= conversations <= 1_000:
        raise ValueError(f"--conversations must be 1-1000, got {conversations}")
