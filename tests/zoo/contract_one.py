"""Managers of Amplifier's first context contract: ``add_message``, ``get_messages``,
``should_compact()``, ``compact()``, ``clear()``. The orchestrator asked ``should_compact()``
before each model call, called ``compact()`` if so, and sent ``get_messages()``: compaction
rewrites the stored history by that contract. One compacts in whole units (correct), its twin
message by message (a call loses its results).

Stdlib only, and nothing of ctxkit; the planning is the zoo's own (tests/zoo/base.py).
"""

from __future__ import annotations

from typing import Any

from tests.zoo.base import FILL, GoodManager, clone, total, validate


class CompactsWholeUnits:
    """Compacts past 90% of ``max_tokens`` down to half of it, keeping system messages, the
    newest user message and the newest whole units: a call never loses its results."""

    def __init__(self, *, max_tokens: int = 4000) -> None:
        self.max_tokens = max_tokens
        self._messages: list[Any] = []
        self._planner = GoodManager(max_tokens=max_tokens)  # its unit planning, not its store

    async def add_message(self, message: dict) -> None:
        validate(message)
        self._messages.append(clone(message))

    async def get_messages(self) -> list[dict]:
        return clone(self._messages)

    async def should_compact(self) -> bool:
        return total(self._messages) > self.max_tokens * FILL

    async def compact(self) -> None:
        kept = self._kept(self._messages, self.max_tokens // 2)
        self._messages = [self._messages[i] for i in kept]

    async def clear(self) -> None:
        self._messages = []

    def _kept(self, history: list[Any], limit: int) -> list[int]:
        return self._planner._plan(history, limit)


class CompactsMessages(CompactsWholeUnits):
    """Compacts by dropping the oldest messages one by one until the rest fit: a tool call
    can go while its results stay."""

    def _kept(self, history: list[Any], limit: int) -> list[int]:
        start = 0
        while start < len(history) - 1 and total(history[start:]) > limit:
            start += 1
        return list(range(start, len(history)))
