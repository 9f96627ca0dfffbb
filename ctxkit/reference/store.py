"""The stored history: every message as added, with its cost and units kept up to date.

Each message is validated, copied and counted once, when it arrives, so a request for a view
never re-encodes or regroups the history. Nothing in here ever removes or edits a message
except ``replace`` and ``clear``, which the contract asks for.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxkit.messages import (
    MessageInfo,
    Unit,
    UnitGrouper,
    check_new_call_ids,
    copy_message,
    inspect_message,
    validate_history,
)
from ctxkit.tokens import MessageCost, TokenCounter

__all__ = ["History"]


class History:
    """An append-only list of messages with per-message costs and units.

    ``generation`` changes whenever the history is replaced or cleared, so plans built on an
    older history know to start again.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._lock = threading.Lock()
        self._reset([], [], [])
        self.generation = 0

    def _reset(
        self, messages: list[dict[str, Any]], infos: list[MessageInfo], costs: list[MessageCost]
    ) -> None:
        grouper = UnitGrouper()
        first_use: dict[str, int] = {}
        for index, info in enumerate(infos):
            grouper.push(info)
            for call_id in info.call_ids:
                first_use[call_id] = index
        self.messages = messages
        self.infos = infos
        self.costs = costs
        self.tokens = sum(cost.total for cost in costs)
        self._grouper = grouper
        self._first_use = first_use

    @property
    def units(self) -> list[Unit]:
        return self._grouper.units

    def __len__(self) -> int:
        return len(self.messages)

    def append(self, message: Mapping[str, Any]) -> int:
        """Validate, copy, count and store one message; returns its index.

        Raises :class:`~ctxkit.messages.InvalidMessage` and stores nothing if it is invalid.
        """
        info = inspect_message(message, len(self.messages))
        stored = copy_message(dict(message))
        cost = self.counter.message_cost(stored)
        with self._lock:
            index = len(self.messages)
            check_new_call_ids(info, index, self._first_use)
            for call_id in info.call_ids:
                self._first_use[call_id] = index
            self.messages.append(stored)
            self.infos.append(info)
            self.costs.append(cost)
            self.tokens += cost.total
            self._grouper.push(info)
        return index

    def replace(self, messages: Sequence[Any]) -> None:
        """Replace the whole history, all or nothing."""
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
            raise TypeError(f"set_messages needs a list of messages, got {type(messages).__name__}")
        messages = list(messages)
        infos = validate_history(messages)
        stored = [copy_message(dict(message)) for message in messages]
        costs = [self.counter.message_cost(message) for message in stored]
        with self._lock:
            self._reset(stored, infos, costs)
            self.generation += 1

    def clear(self) -> None:
        with self._lock:
            self._reset([], [], [])
            self.generation += 1

    def unit_cost(self, unit: Unit) -> int:
        return sum(cost.total for cost in self.costs[unit.start : unit.stop])
