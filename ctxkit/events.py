"""Event names, their payload keys, and the bus that carries them to subscribers.

The reference manager publishes here; Amplifier hooks, telemetry exporters and the event stream
subscribe. Publishing never fails because a subscriber did: a raising subscriber is logged and
the request goes on.

Subscribers that only record (metrics, spans, a file) can run off the caller's thread: the
caller then pays for a queue put, not for formatting and I/O. A subscriber says so with a
``background = True`` attribute (ctxkit's telemetry subscribers do), or ``subscribe(...,
background=True)``. One daemon thread per process delivers them in publishing order, inside a
copy of the publisher's context (so a span current at the request stays the parent).
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BUDGET_EXCEEDED",
    "INCLUDE",
    "INVARIANT_VIOLATION",
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
``history_tokens``, ``compacted`` (a compaction happened for this view), ``compact_threshold``
(share of the budget, or None if unknown), ``breakdown`` (tokens by category), ``kinds``
(messages kept whole, shortened, synthetic), ``duration_s``."""
BUDGET_EXCEEDED = "ctxkit:budget_exceeded"
"""The pinned content alone exceeds the budget: ``budget``, ``pinned_tokens``, ``raised``."""
INVARIANT_VIOLATION = "ctxkit:invariant_violation"
"""A live check found a required property broken in a view: ``property``, ``message``,
``ids`` (the tool call ids involved)."""


@dataclass(frozen=True, slots=True)
class Event:
    """One published event: its name, payload and wall-clock time (Unix seconds)."""

    name: str
    data: Mapping[str, Any]
    time: float = field(default_factory=time.time)


Subscriber = Callable[[Event], Awaitable[None] | None]


class _Dispatcher:
    """The process's one background thread, delivering events to background subscribers."""

    MAX_PENDING = 100_000
    """Past this many undelivered events, new ones are dropped (and counted): a stuck
    subscriber must not grow memory without bound."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def submit(self, bus: EventBus, subscribers: list[Subscriber], event: Event) -> None:
        if self._queue.qsize() >= self.MAX_PENDING:
            bus.dropped += 1
            return
        if self._thread is None:
            self._start()
        self._queue.put((contextvars.copy_context(), bus, subscribers, event))

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="ctxkit-events", daemon=True)
                thread.start()
                self._thread = thread

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far is delivered; False on timeout."""
        if self._thread is None:
            return True
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            context, bus, subscribers, event = item
            for subscriber in subscribers:
                try:
                    context.run(subscriber, event)
                except Exception:
                    bus.failures += 1
                    log.warning(
                        "event subscriber %r failed on %s", subscriber, event.name, exc_info=True
                    )


_dispatcher = _Dispatcher()


class EventBus:
    """Delivers each event to every subscriber, in subscription order, isolating failures."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []
        self._background: list[Subscriber] = []
        self._lock = threading.Lock()
        self.failures = 0
        """How many times a subscriber raised. Exposed so tests and telemetry can see it."""
        self.dropped = 0
        """Events background subscribers never got because the queue was full."""

    def subscribe(
        self, subscriber: Subscriber, *, background: bool | None = None
    ) -> Callable[[], None]:
        """Add a subscriber (sync or async callable taking an :class:`Event`).

        ``background``: deliver on ctxkit's event thread instead of in the request (sync
        subscribers only); by default, the subscriber's own ``background`` attribute.
        Returns a function that removes it again.
        """
        if background is None:
            background = bool(getattr(subscriber, "background", False))
        if background and inspect.iscoroutinefunction(subscriber):
            raise TypeError("an async subscriber runs in the request; pass background=False")
        with self._lock:
            if background:
                self._background = [*self._background, subscriber]
            else:
                self._subscribers = [*self._subscribers, subscriber]

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers = [s for s in self._subscribers if s is not subscriber]
                self._background = [s for s in self._background if s is not subscriber]

        return unsubscribe

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until background subscribers have every event published so far.

        Returns False if ``timeout`` seconds passed first.
        """
        return _dispatcher.flush(timeout)

    async def publish(self, name: str, data: Mapping[str, Any]) -> Event:
        """Deliver an event to every subscriber and return it."""
        event = Event(name, data)
        if self._background:
            _dispatcher.submit(self, self._background, event)
        for subscriber in self._subscribers:
            try:
                result = subscriber(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                self.failures += 1
                log.warning("event subscriber %r failed on %s", subscriber, name, exc_info=True)
        return event
