"""The two message shapes, read by the suite itself: tool calls, tool results, user turns.

The suite must not trust the code it checks, so this reads the OpenAI and Anthropic shapes
again, independently of ``ctxkit.messages``, and strictly. Stdlib only: production code that
checks live views imports it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["blocks", "calls", "is_result", "newest_user_message", "results", "tool_ids"]


def blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The dict blocks of a message's list content (none for string content)."""
    content = message.get("content")
    if isinstance(content, list):
        return [b for b in content if isinstance(b, Mapping)]
    return []


def calls(message: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(OpenAI call ids, Anthropic tool_use ids) of a message."""
    if message.get("role") != "assistant":
        return [], []
    openai = [
        str(call.get("id")) for call in message.get("tool_calls") or () if isinstance(call, Mapping)
    ]
    anthropic = [str(b.get("id")) for b in blocks(message) if b.get("type") == "tool_use"]
    return openai, anthropic


def results(message: Mapping[str, Any]) -> list[str]:
    """Call ids a message answers: ``role: tool``, or ``tool_result`` blocks in any message."""
    if message.get("role") == "tool":
        return [str(message.get("tool_call_id"))]
    return [str(b.get("tool_use_id")) for b in blocks(message) if b.get("type") == "tool_result"]


def tool_ids(message: Mapping[str, Any]) -> tuple[str, ...]:
    """Every call and result id a message carries, calls first."""
    openai, anthropic = calls(message)
    return (*openai, *anthropic, *results(message))


def is_result(message: Mapping[str, Any]) -> bool:
    """The message answers a tool call (``role: tool``, or ``tool_result`` blocks)."""
    return bool(results(message))


def newest_user_message(history: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the newest user message that is the user's turn, not only tool results."""
    return next(
        (
            i
            for i in range(len(history) - 1, -1, -1)
            if history[i].get("role") == "user" and not results(history[i])
        ),
        None,
    )
