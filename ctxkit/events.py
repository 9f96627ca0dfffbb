"""Event names, their payload keys, and the bus that carries them to subscribers.

The reference manager publishes here; Amplifier hooks, telemetry exporters and the event stream
subscribe. Publishing never fails because a subscriber did: a raising subscriber is logged and
the request goes on.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BUDGET_EXCEEDED",
    "INCLUDE",
    "POST_COMPACT",
    "PRE_COMPACT",
    "VIEW",
    "Event",
    "EventBus",
    "Subscriber",
]

log = logging.getLogger(__name__)

# Amplifier's context contract names these three.
PRE_COMPACT = "context:pre_compact"
"""Before a compaction: ``message_count`` and ``token_count`` of the view as it would have been,
``budget``, ``strategy``."""
POST_COMPACT = "context:post_compact"
"""After a compaction: ``message_count`` and ``token_count`` of the view returned, ``budget``,
``strategy``, ``tokens_before``, ``tokens_saved``, ``duration_s``, ``units_dropped``,
``units_truncated``, ``units_summarized``."""
INCLUDE = "context:include"
"""A synthetic message entered the view: ``source`` (``summary``) and ``content``."""

# ctxkit's own.
VIEW = "ctxkit:view"
"""Every view returned: ``message_count``, ``token_count``, ``budget``, ``history_messages``,
``history_tokens``, ``compacted`` (a compaction happened for this view), ``duration_s``."""
BUDGET_EXCEEDED = "ctxkit:budget_exceeded"
"""The pinned content alone exceeds the budget: ``budget``, ``pinned_tokens``, ``raised``."""


@dataclass(frozen=True, slots=True)
class Event:
    """One published event: its name, payload and wall-clock time (Unix seconds)."""

    name: str
    data: Mapping[str, Any]
    time: float = field(default_factory=time.time)


Subscriber = Callable[[Event], Awaitable[None] | None]


class EventBus:
    """Delivers each event to every subscriber, in subscription order, isolating failures."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self.failures = 0
        """How many times a subscriber raised. Exposed so tests and telemetry can see it."""

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Add a subscriber (sync or async callable taking an :class:`Event`).

        Returns a function that removes it again.
        """
        with self._lock:
            self._subscribers = [*self._subscribers, subscriber]

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers = [s for s in self._subscribers if s is not subscriber]

        return unsubscribe

    async def publish(self, name: str, data: Mapping[str, Any]) -> Event:
        """Deliver an event to every subscriber and return it."""
        event = Event(name, data)
        for subscriber in self._subscribers:
            try:
                result = subscriber(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                self.failures += 1
                log.warning("event subscriber %r failed on %s", subscriber, name, exc_info=True)
        return event
