"""Deterministic event streams for the inspector's screen tests: the JSON lines a producer
writes (see :mod:`ctxkit.telemetry.stream`), at fixed times, so figures and snapshots never
depend on the clock.

The story: conversation ``beta`` (budget 100,000) talks first; then ``alpha`` (budget 20,000,
compacting at 70%) rises to the threshold, compacts once, and ends at 11,000 tokens (55.0%)
with a listing of its view. ``alpha`` is the most recently active, so the screen follows it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from ctxkit import events
from ctxkit.tui.model import Inspector

T0 = 1_763_700_000.0
"""2025-11-21 04:40:00 UTC: the first event's time."""
ALPHA_BUDGET = 20_000
BETA_BUDGET = 100_000
ALPHA_PERCENT = "55.0%"
BETA_PERCENT = "41.0%"
MALFORMED = '{"v": 1, "ts": 1763700000, "event": "ctxkit:view", "data": [not json'

LISTING = [
    {"index": 0, "count": 1, "role": "system", "tokens": 103, "fate": "kept"},
    {"index": 1, "count": 12, "role": "mixed", "tokens": 4_210, "fate": "dropped"},
    {"index": None, "count": 1, "role": "user", "tokens": 380, "fate": "summary"},
    {"index": 13, "count": 28, "role": "mixed", "tokens": 18_344, "fate": "summarized"},
    {"index": 41, "count": 1, "role": "user", "tokens": 42, "fate": "kept"},
    {"index": 42, "count": 1, "role": "assistant", "tokens": 310, "fate": "kept"},
    {"index": 43, "count": 1, "role": "tool", "tokens": 900, "fate": "truncated"},
    {"index": 44, "count": 1, "role": "assistant", "tokens": 2_090, "fate": "kept"},
]
"""Alpha's view after its compaction: one row per message kept, one per run left out."""


def on_event_loop(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an ``async`` test (a Pilot session) with ``asyncio.run``: the project's tests need
    no async plugin."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


def use_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clock times on screen in UTC, whatever the machine's zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


def line(event: str, data: dict[str, Any], ts: float) -> str:
    """One stream line, as :class:`~ctxkit.telemetry.stream.EventStream` writes it."""
    return json.dumps({"v": 1, "ts": ts, "event": event, "data": data})


def view(
    tokens: int,
    *,
    ts: float,
    conversation: str = "alpha",
    budget: int = ALPHA_BUDGET,
    threshold: float | None = 0.7,
    compacted: bool = False,
    listing: list[dict[str, Any]] | None = None,
) -> str:
    """A ``ctxkit:view`` line whose breakdown adds up to ``tokens``."""
    system = min(103, tokens)
    user, assistant, tool_calls = tokens // 10, tokens // 5, tokens // 20
    breakdown = {
        "system": system,
        "user": user,
        "assistant": assistant,
        "tool_calls": tool_calls,
        "tool_results": max(0, tokens - system - user - assistant - tool_calls),
    }
    data: dict[str, Any] = {
        "message_count": max(2, tokens // 200),
        "token_count": tokens,
        "budget": budget,
        "history_messages": max(2, tokens // 150),
        "history_tokens": tokens * 2,
        "compacted": compacted,
        "compact_threshold": threshold,
        "breakdown": breakdown,
        "kinds": {"kept": max(2, tokens // 200) - 1, "shortened": 1, "summary": 0},
        "duration_s": 0.0002,
        "conversation_id": conversation,
    }
    if listing is not None:
        data |= {"listing": listing, "listing_omitted": 0}
    return line(events.VIEW, data, ts)


def compaction(
    *,
    ts: float,
    before: int,
    after: int,
    messages_before: int,
    messages_after: int,
    conversation: str = "alpha",
    budget: int = ALPHA_BUDGET,
) -> list[str]:
    """A ``pre_compact`` and ``post_compact`` pair 3.1 ms apart."""
    strategy = "truncate_outputs+summarize"
    pre = {
        "message_count": messages_before,
        "token_count": before,
        "budget": budget,
        "strategy": strategy,
        "conversation_id": conversation,
    }
    post = {
        "message_count": messages_after,
        "token_count": after,
        "budget": budget,
        "strategy": strategy,
        "tokens_before": before,
        "tokens_saved": before - after,
        "duration_s": 0.0031,
        "units_dropped": 2,
        "units_truncated": 3,
        "units_summarized": 6,
        "conversation_id": conversation,
    }
    return [
        line(events.PRE_COMPACT, pre, ts),
        line(events.POST_COMPACT, post, ts + 0.0031),
    ]


def beta_lines(start: float = T0) -> list[str]:
    """Beta's two views: 41.0% of its budget at the end."""
    return [
        view(30_000, ts=start, conversation="beta", budget=BETA_BUDGET, threshold=0.8),
        view(41_000, ts=start + 5, conversation="beta", budget=BETA_BUDGET, threshold=0.8),
    ]


def alpha_lines(start: float = T0 + 60) -> list[str]:
    """Alpha rises to its threshold, compacts once, and ends at 55.0% with a listing."""
    lines = [view(tokens, ts=start + i) for i, tokens in enumerate((2_000, 5_000, 8_000))]
    lines += [view(11_000, ts=start + 3), view(13_500, ts=start + 4)]
    lines += compaction(
        ts=start + 5, before=15_200, after=9_800, messages_before=64, messages_after=45
    )
    lines.append(view(9_800, ts=start + 5.01, compacted=True, listing=LISTING))
    lines.append(view(10_400, ts=start + 6, listing=LISTING))
    lines.append(view(11_000, ts=start + 7, listing=LISTING))
    return lines


def stream_lines() -> list[str]:
    """Both conversations, beta first, so alpha is the most recently active."""
    return beta_lines() + alpha_lines()


def fed_inspector(lines: list[str] | None = None, source: str = "events.jsonl") -> Inspector:
    """An inspector fed ``lines`` (default: :func:`stream_lines`)."""
    inspector = Inspector(source)
    inspector.feed_lines(stream_lines() if lines is None else lines)
    return inspector
