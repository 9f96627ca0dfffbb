"""Small messages for tests, in the OpenAI shape: builders and one short conversation."""

from __future__ import annotations

import asyncio
from typing import Any

CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "list files"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"},
    {"role": "assistant", "content": "Two files: a.py and b.py."},
]
"""A short conversation with one tool round, for files the CLI reads and writes."""


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def reply(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def call(*ids: str) -> dict[str, Any]:
    """An assistant message calling ``bash`` once per id (parallel calls)."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            for i in ids
        ],
    }


def result(call_id: str, text: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}
