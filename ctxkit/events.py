"""Event names, their payload keys, and the bus that carries them to subscribers.

The reference manager publishes here; Amplifier hooks, telemetry exporters and the event stream
subscribe. Publishing never fails because a subscriber did: a raising subscriber is logged and
the request goes on.

Subscribers that only record (metrics, spans, a file) can be *deferred*: the request then pays
for appending the event to a list, and the event loop delivers the batch as soon as the
caller's task yields (in an agent, while it waits for the model). Each event is delivered in a
copy of the publisher's context, so a span current at the request stays the parent. A
subscriber asks for this with a ``deferred = True`` attribute (ctxkit's telemetry subscribers
do) or ``subscribe(..., deferred=True)``; :meth:`EventBus.flush` delivers at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AUDIT_WRITE_FAILED",
    "BUDGET_EXCEEDED",
    "INCLUDE",
    "INVARIANT_VIOLATION",
    "KNOWN",
    "LISTING_FATES",
    "LISTING_ROWS",
    "POST_COMPACT",
    "PRE_COMPACT",
    "USAGE",
    "VIEW",
    "VIEW_GUARDED",
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
``units_truncated``, ``units_summarized``.

With the ``hierarchical`` strategy (:mod:`ctxkit.reference.levels`), three more:
``units_by_level`` (``{"full", "paragraph", "line"}``: how many of the view's units are shown
at each level), ``tokens_saved_by_level`` (``{"paragraph", "line"}``: what the units at that
level would cost shown full, with outputs shortened where ``truncate_outputs`` is on, minus
what they cost as shown) and ``level_ranges`` (``[[start, stop, level], ...]``: the history
messages ``[start, stop)`` each run of consecutive units shown as a paragraph or one line
stands for, in history order; a kept unit in no run is shown full).

With ``recall`` configured, ``units_recalled``: how many units of the view a recall brought
back (see :data:`VIEW`)."""
INCLUDE = "context:include"
"""A synthetic message entered the view: ``source`` (``summary``) and ``content``."""

# ctxkit's own.
VIEW = "ctxkit:view"
"""Every view returned: ``message_count``, ``token_count``, ``budget``, ``history_messages``,
``history_tokens``, ``compacted`` (a compaction happened for this view), ``compact_threshold``
(share of the budget, or None if unknown), ``breakdown`` (tokens by category), ``kinds``
(messages kept whole, shortened, synthetic), ``prefix_tokens`` (tokens of the longest
common prefix, message by message, with this conversation's previous view: what a provider's
prompt cache can serve; see :mod:`ctxkit.prefix`), ``previous_tokens`` (the previous view's
message tokens; 0 for a conversation's first view, and after its history was replaced),
``duration_s``; with the ``hierarchical`` strategy also ``units_by_level`` and
``tokens_saved_by_level`` (as in :data:`POST_COMPACT`); with ``recall`` configured
(:mod:`ctxkit.reference.recall`) also ``units_recalled`` (how many units the view holds
because the newest user message asked about them: units it had left out, or shown as a
paragraph or line) and ``recalled_ranges`` (``[[start, stop], ...]``: the history messages of
each run of consecutive recalled units, in history order). A view with recalled units is not
contiguous: they stand where they stood in the history, between the runs left out.

Opt-in (``view_listing=True`` on the reference manager or on ``instrument()``), two more keys
list the view message by message, with the history it left out:

* ``listing``: rows ``{"index", "count", "role", "tokens", "fate"}`` in view order. ``fate``
  is one of :data:`LISTING_FATES`: ``kept`` (a history message, unchanged or in an
  equivalent shape), ``truncated`` (a history message with changed content, such as a
  shortened tool output), ``summary`` (a message that comes from no history
  message; ``index`` is None; a ``hierarchical`` unit's paragraph or line adds ``level``,
  ``paragraph`` or ``line``, and ``stands_for``, the history messages ``[start, stop)`` of
  its unit), ``recalled`` (a history message of a unit a recall brought back into the view,
  whole, or with its outputs shortened as for ``truncated`` when only that fitted), each one
  row per message (``count`` 1); ``dropped`` and
  ``summarized`` (history messages left out, plainly or stood for by the summary), one row per
  run of consecutive history messages ``[index, index + count)`` with the same fate, placed
  where they stood in the history (before the next message kept from after them, and before
  a summary placed there). ``role`` is
  the message's, or for a run the first's, or ``mixed``; ``tokens`` is exact: for view rows
  what the message costs in the view (their sum plus the reply priming is ``token_count``),
  for a run what its messages cost whole.
* ``listing_omitted``: how many rows at the start were left out to keep the newest
  :data:`LISTING_ROWS`.
"""
LISTING_ROWS = 200
"""At most this many rows in a view's ``listing``: the newest; the earlier ones are counted in
``listing_omitted``. Bounds the bytes a view event takes whatever the view or history size."""
LISTING_FATES = ("kept", "truncated", "summary", "dropped", "summarized", "recalled")
"""What became of the messages in a ``listing`` row (see :data:`VIEW`)."""
BUDGET_EXCEEDED = "ctxkit:budget_exceeded"
"""The pinned content alone exceeds the budget: ``budget``, ``pinned_tokens``, ``raised``."""
AUDIT_WRITE_FAILED = "ctxkit:audit_write_failed"
"""An audit entry could not be written to the history file (a full disk): ``error``, and
``unwritten``, the entries now kept in memory. The view was returned all the same; the
entries go first with the next write. Published once per run of failures."""
INVARIANT_VIOLATION = "ctxkit:invariant_violation"
"""A live check found a required property broken in a view: ``property``, ``message``,
``ids`` (the tool call ids involved)."""
VIEW_GUARDED = "ctxkit:view_guarded"
"""A guard (``instrument(..., on_violation="raise" | "repair")``) acted on a view a provider
would reject, after publishing each violation as :data:`INVARIANT_VIOLATION`: ``action``
(``repaired``: the repaired view was returned; ``refused``: ``ViewRefused`` was raised),
``rules`` (the provider rule ids broken, from ``conformance/rules/``, each once),
``violations`` (how many), ``ids`` (the call ids involved), ``changes`` (what the repair did,
each ``{"action": "dropped" | "restored", "what": "call" | "result" | "reasoning" |
"thinking", "index", "ids", "rule", "whole"}``, ``index`` in the view as the manager returned
it; empty when refused), ``dropped_calls``, ``dropped_results``, ``dropped_messages`` (messages
that went whole), ``restored`` (thinking or reasoning put back from the history),
``messages_before`` (the view as returned) and ``message_count`` (as sent)."""
USAGE = "ctxkit:usage"
"""The provider's usage of a model call, as given to ``record_usage()``: ``input_tokens``,
``output_tokens``, and ``estimated_tokens``, ctxkit's exact count of the latest view (the
input the provider billed; None before the first view)."""

KNOWN = frozenset(
    {
        PRE_COMPACT,
        POST_COMPACT,
        INCLUDE,
        VIEW,
        BUDGET_EXCEEDED,
        AUDIT_WRITE_FAILED,
        INVARIANT_VIOLATION,
        VIEW_GUARDED,
        USAGE,
    }
)
"""Every event ctxkit itself publishes: a reader that shows some of them knows the rest too
(the inspector counts only other names as unknown)."""


@dataclass(frozen=True, slots=True)
class Event:
    """One published event: its name, payload and wall-clock time (Unix seconds)."""

    name: str
    data: Mapping[str, Any]
    time: float = field(default_factory=time.time)


Subscriber = Callable[[Event], Awaitable[None] | None]


class EventBus:
    """Delivers each event to every subscriber, in subscription order, isolating failures."""

    MAX_PENDING = 10_000
    """Past this many undelivered events, the publisher delivers them itself: memory stays
    bounded when the caller's task never yields."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []
        self._deferred: list[Subscriber] = []
        self._pending: list[tuple[contextvars.Context, Event]] = []
        self._drain_scheduled = False
        self._lock = threading.Lock()
        self.failures = 0
        """How many times a subscriber raised. Exposed so tests and telemetry can see it."""

    def subscribe(
        self, subscriber: Subscriber, *, deferred: bool | None = None
    ) -> Callable[[], None]:
        """Add a subscriber (sync or async callable taking an :class:`Event`).

        ``deferred``: deliver when the caller's task yields rather than in the request (sync
        subscribers only); by default, the subscriber's own ``deferred`` attribute.
        Returns a function that removes it again.
        """
        if deferred is None:
            deferred = getattr(subscriber, "deferred", False) is True
        if deferred and inspect.iscoroutinefunction(subscriber):
            raise TypeError("an async subscriber is awaited in the request; use deferred=False")
        with self._lock:
            if deferred:
                self._deferred = [*self._deferred, subscriber]
            else:
                self._subscribers = [*self._subscribers, subscriber]

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers = [s for s in self._subscribers if s is not subscriber]
                self._deferred = [s for s in self._deferred if s is not subscriber]

        return unsubscribe

    def flush(self) -> None:
        """Deliver every pending event to the deferred subscribers now."""
        with self._lock:
            pending, self._pending = self._pending, []
            self._drain_scheduled = False
        subscribers = self._deferred
        for context, event in pending:
            for subscriber in subscribers:
                try:
                    context.run(subscriber, event)
                except Exception:
                    self._failed(subscriber, event)

    def _failed(self, subscriber: Subscriber, event: Event) -> None:
        self.failures += 1
        log.warning("event subscriber %r failed on %s", subscriber, event.name, exc_info=True)

    def _defer(self, event: Event) -> None:
        with self._lock:
            self._pending.append((contextvars.copy_context(), event))
            backlog = len(self._pending) >= self.MAX_PENDING
            schedule = not self._drain_scheduled
            self._drain_scheduled = True
        if backlog:
            self.flush()
        elif schedule:
            try:
                asyncio.get_running_loop().call_soon(self.flush)
            except RuntimeError:  # published outside an event loop: deliver now
                self.flush()

    async def publish(self, name: str, data: Mapping[str, Any]) -> Event:
        """Deliver an event to every subscriber and return it."""
        event = Event(name, data)
        if self._deferred:
            self._defer(event)
        for subscriber in self._subscribers:
            try:
                result = subscriber(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                self._failed(subscriber, event)
        return event
