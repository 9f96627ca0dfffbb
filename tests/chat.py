"""Small message builders for tests of the reference manager, in the OpenAI shape."""

from __future__ import annotations

import asyncio
from typing import Any


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
