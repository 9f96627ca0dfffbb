"""Managers for the replay tests, as function targets: one that keeps everything (a replay
through it must reproduce a recording that never compacted), and a last-N window that splits
tool pairs (its breaks must show at the requests they happen)."""

from __future__ import annotations

from typing import Any

WINDOW = 4


def everything(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(messages)


def last_four(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The system prompt and the newest four messages, cut wherever that falls."""
    system = [m for m in messages[:1] if m.get("role") == "system"]
    rest = messages[len(system) :]
    return system + rest[-WINDOW:]
