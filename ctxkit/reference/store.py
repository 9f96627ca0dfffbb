"""The stored history: every message as added, with its cost and units kept up to date.

Each message is validated, copied and counted once, when it arrives, so a request for a view
never re-encodes or regroups the history. Nothing in here ever removes or edits a message
except ``replace`` and ``clear``, which the contract asks for, and ``load``, which restoring a
checkpoint uses.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from ctxkit.messages import (
    InvalidMessage,
    MessageInfo,
    Unit,
    UnitGrouper,
    check_new_call_ids,
    copy_message,
    inspect_message,
    validate_history,
)
from ctxkit.tokens import MessageCost, TokenCounter

__all__ = ["History", "Recorder"]


class Recorder(Protocol):
    """Told of every change under the history's lock, before it is made; raising stops it."""

    def added(self, message: dict[str, Any], cost: MessageCost, at: float) -> None: ...

    def replaced(
        self, messages: list[dict[str, Any]], costs: list[MessageCost], at: float
    ) -> None: ...

    def cleared(self, at: float) -> None: ...


class History:
    """An append-only list of messages with per-message costs, arrival times and units.

    ``generation`` changes whenever the history is replaced or cleared, so plans built on an
    older history know to start again. A ``recorder`` (the timeline, which writes the history
    file) sees each change in the order it is made.
    """

    def __init__(
        self,
        counter: TokenCounter,
        *,
        clock: Callable[[], float] = time.time,
        recorder: Recorder | None = None,
        max_message_bytes: int | None = None,
    ) -> None:
        self.counter = counter
        self.clock = clock
        self.recorder = recorder
        self.max_message_bytes = max_message_bytes
        self._lock = threading.Lock()
        self._reset([], [], [], [])
        self.generation = 0

    def _reset(
        self,
        messages: list[dict[str, Any]],
        infos: list[MessageInfo],
        costs: list[MessageCost],
        times: list[float],
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
        self.times = times
        self.tokens = sum(cost.total for cost in costs)
        self._sizes: list[int] = []
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
        info, stored = self.prepare(message)
        return self.add(info, stored, self.counter.message_cost(stored))

    def prepare(self, message: Mapping[str, Any]) -> tuple[MessageInfo, dict[str, Any]]:
        """Validate and copy one message, not yet counted or stored (:meth:`add` stores it).

        Raises :class:`~ctxkit.messages.InvalidMessage` if it is invalid or larger than
        ``max_message_bytes``.
        """
        info = inspect_message(message, len(self.messages))
        self._check_size(info, len(self.messages))
        return info, copy_message(dict(message))

    def add(self, info: MessageInfo, stored: dict[str, Any], cost: MessageCost) -> int:
        """Store a message :meth:`prepare` returned, with its cost; returns its index."""
        with self._lock:
            index = len(self.messages)
            check_new_call_ids(info, index, self._first_use)
            at = self.clock()
            if self.recorder is not None:
                self.recorder.added(stored, cost, at)
            for call_id in info.call_ids:
                self._first_use[call_id] = index
            self.messages.append(stored)
            self.infos.append(info)
            self.costs.append(cost)
            self.times.append(at)
            self.tokens += cost.total
            self._grouper.push(info)
        return index

    def replace(self, messages: Sequence[Any]) -> None:
        """Replace the whole history, all or nothing."""
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
            raise TypeError(f"set_messages needs a list of messages, got {type(messages).__name__}")
        messages = list(messages)
        infos = validate_history(messages)
        for index, info in enumerate(infos):
            self._check_size(info, index)
        stored = [copy_message(dict(message)) for message in messages]
        costs = [self.counter.message_cost(message) for message in stored]
        with self._lock:
            at = self.clock()
            if self.recorder is not None:
                self.recorder.replaced(stored, costs, at)
            self._reset(stored, infos, costs, [at] * len(stored))
            self.generation += 1

    def _check_size(self, info: MessageInfo, index: int) -> None:
        limit = self.max_message_bytes
        if limit is not None and info.size > limit:
            raise InvalidMessage(
                f"holds {info.size:,} bytes of text, over max_message_bytes ({limit:,}); "
                "store large documents elsewhere and add a reference, or raise the limit",
                index=index,
            )

    def clear(self) -> None:
        with self._lock:
            if self.recorder is not None:
                self.recorder.cleared(self.clock())
            self._reset([], [], [], [])
            self.generation += 1

    def load(
        self,
        messages: list[dict[str, Any]],
        costs: list[MessageCost],
        times: list[float],
        *,
        change: Callable[[], None] | None = None,
    ) -> None:
        """Become a history known to be whole (read from its file, or a checkpoint's): the
        messages are validated and grouped again but neither copied nor counted. ``change``
        runs under the lock first (to record it); raising stops it."""
        infos = validate_history(messages)
        with self._lock:
            if change is not None:
                change()
            self._reset(messages, infos, costs, times)
            self.generation += 1

    def locked(self) -> threading.Lock:
        """The lock every change takes, for a change the recorder makes on its own."""
        return self._lock

    def unit_cost(self, unit: Unit) -> int:
        return sum(cost.total for cost in self.costs[unit.start : unit.stop])

    def size(self, index: int) -> int:
        """Bytes of message ``index`` as compact JSON (what ``retain_bytes`` counts).

        Encoded on first asking, then cached for the generation: only managers with a size
        limit pay for it, and none pays twice.
        """
        sizes = self._sizes
        if index >= len(sizes):
            encode = json.dumps
            for message in self.messages[len(sizes) : index + 1]:
                text = encode(message, separators=(",", ":"), default=repr)
                sizes.append(len(text.encode("utf-8", "surrogatepass")))
        return sizes[index]
