"""The advisory property ``cache_stability``: how much of each view a prompt cache could serve.

Not a Hypothesis search: after the required and recommended properties, the target is built
afresh and driven as an agent drives it, a view before each model call over a long loop
(:func:`ctxkit.prefix.agent_loop_stability`). The figure is the share of view tokens that
repeat, message by message, the start of the previous view; the verdict compares it with
:data:`ctxkit.prefix.STABILITY_THRESHOLD` and never fails the run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

# What the loop imports late (its workload, and the shapes it converts to) is imported with
# this module, before any search: the loop may run in a thread beside a search, and a module
# imported during a search would change what the search draws (Hypothesis reads constants
# from the modules loaded) and, under pytest, which parses ctxkit's modules with ast to
# rewrite them, break Python 3.11's ast, which two threads cannot use at once.
import ctxkit.shapes.convert
import ctxkit.workload  # noqa: F401
from ctxkit.conformance.targets.remote import RemoteError, RemoteManager
from ctxkit.conformance.targets.worker_client import Child, TargetUnusable
from ctxkit.prefix import (
    AGENT_LOOP_STEPS,
    STABILITY_THRESHOLD,
    Stability,
    agent_loop_stability,
    agent_steps,
)
from ctxkit.shapes.rules import system_in_messages

__all__ = ["MIN_VIEWS", "measure_stability"]

PROPERTY = "cache_stability"
MIN_VIEWS = 20
"""Fewer views than this (a short loop, or the deadline came first) give no verdict."""


def measure_stability(
    child: Child,
    result: Any,
    *,
    steps: int = AGENT_LOOP_STEPS,
    shapes: tuple[str, ...],
    deadline: Callable[[], float],
    count_message: Callable[[dict[str, Any]], int],
    say: Callable[[str], None],
) -> None:
    """Run the agent loop on a fresh manager in ``child`` and fill ``result`` (the
    property's PropertyResult): passed or failed against the threshold, with the figure;
    skipped when the target cannot be driven or ``deadline()`` (read before each step: the
    runner brings it forward when the searches end) leaves too little time."""
    say(f"{PROPERTY}: an agent loop of {steps} model calls")
    chat = [s for s in shapes if s in ("openai", "anthropic")]
    shape = "mixed" if len(chat) == 2 else chat[0] if chat else shapes[0]
    manager = RemoteManager(child)
    try:
        reset = child.call("reset")
        if not reset.ok:
            raise RemoteError(reset.type, reset.message)
        measured = asyncio.run(
            agent_loop_stability(
                manager,
                _until(deadline, _sendable(agent_steps(steps, shape=shape), shape)),
                count_message=count_message,
            )
        )
    except TargetUnusable as exc:
        _skip(result, f"the agent loop stopped: {exc.message}")
        return
    except RemoteError as exc:
        _skip(result, f"the agent loop stopped: the target raised {exc}")
        return
    except ValueError as exc:  # a view that is not a list of messages has no prefix
        _skip(result, f"not measured: {exc}")
        return
    if measured.views < MIN_VIEWS:
        _skip(
            result,
            f"only {measured.views} views before the time it had ran out (the searches' own, "
            f"as the slowest of its views took); {MIN_VIEWS} needed",
        )
        return
    _judge(result, measured)


def _judge(result: Any, measured: Stability) -> None:
    result.figure = round(measured.share, 4)
    result.status = "passed" if measured.share >= STABILITY_THRESHOLD else "below"
    result.message = measured.describe()


def _skip(result: Any, why: str) -> None:
    result.status = "skipped"
    result.message = why


def _sendable(steps: Iterator[list[dict[str, Any]]], shape: str) -> Iterator[Any]:
    """The loop's steps without system messages where the shape's API keeps the system prompt
    beside the messages (as the search does: :func:`.conversations.holds_system`)."""
    if shape == "mixed" or system_in_messages(shape):
        yield from steps
        return
    for step in steps:
        yield [m for m in step if m.get("role") != "system"]


def _until(
    deadline: Callable[[], float],
    steps: Iterator[list[dict[str, Any]]],
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Any]:
    """The steps that can end by the deadline: none is begun once the time left is shorter
    than the longest step so far (a view that takes 3 s, begun a second before the deadline,
    ended the run 2 s past it)."""
    longest = 0.0
    for step in steps:
        began = clock()
        if began + longest >= deadline():
            return
        yield step
        longest = max(longest, clock() - began)
