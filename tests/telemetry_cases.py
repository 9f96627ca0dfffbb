"""Pieces the telemetry tests share: a manager that compacts in every way on a short
conversation, a conversation that carries a marker string, an agent loop driving a manager,
and an event recorder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxkit.events import Event, EventBus
from ctxkit.reference import ReferenceContextManager
from ctxkit.workload import Workload

MARKER = "zebra-quartz-MARKER-7781"
"""A string no telemetry name or number contains: if it shows up, message text leaked."""

STRATEGY = "truncate_outputs+truncate+summarize"


async def drive(target: Any, messages: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Add each message and ask for a view after each, as an agent loop does."""
    views = []
    for message in messages:
        await target.add_message(message)
        views.append(await target.get_messages_for_request())
    return views


TOOL_DEFINITIONS = 120
"""Input tokens a simulated provider bills beyond the messages (its tool schemas): what
ctxkit's count of the view cannot see."""


async def drive_reporting_usage(
    target: ReferenceContextManager, messages: Sequence[dict[str, Any]]
) -> list[tuple[int, int, int]]:
    """As :func:`drive`, with each model call's usage recorded as a provider reports it: the
    view's exact tokens plus :data:`TOOL_DEFINITIONS` in, a few tokens out. Returns
    ``(view tokens, input, output)`` per call."""
    calls = []
    for number, message in enumerate(messages):
        await target.add_message(message)
        view = await target.get_messages_for_request()
        tokens = target.counter.count_messages(view)
        billed, answered = tokens + TOOL_DEFINITIONS, 20 + number % 7
        target.record_usage(input_tokens=billed, output_tokens=answered)
        calls.append((tokens, billed, answered))
    return calls


def compacting_manager(**overrides: Any) -> ReferenceContextManager:
    """A manager with a small budget, so a short conversation compacts in every way."""
    options: dict[str, Any] = {
        "max_tokens": 4_000,
        "strategies": STRATEGY.split("+"),
        "tool_output_max_bytes": 300,
        "tool_output_head_lines": 4,
        "tool_output_tail_lines": 4,
        "conversation_id": "conv-telemetry-test",
    }
    return ReferenceContextManager(**(options | overrides))


def marked_conversation(n: int = 60, seed: int = 3) -> list[dict[str, Any]]:
    """A synthetic agent conversation whose first user message carries :data:`MARKER`."""
    messages = Workload(seed=seed, max_output_bytes=3_000).messages(n)
    first_user = next(m for m in messages if m["role"] == "user")
    first_user["content"] = f"{MARKER} {first_user['content']}"
    return messages


class Recorder:
    """Every event published on a bus, in order (inline: a list's ``append`` has no
    ``deferred`` attribute, so no flush is needed to see them)."""

    def __init__(self, bus: EventBus) -> None:
        self.events: list[Event] = []
        bus.subscribe(self.events.append)

    def of(self, name: str) -> list[dict[str, Any]]:
        return [dict(e.data) for e in self.events if e.name == name]
