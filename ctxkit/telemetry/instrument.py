"""``instrument()``: the reference manager's events and metrics for any context manager.

The wrapper passes every call through and returns exactly what the manager returned. Beside
it, it keeps its own copy of what was added (each message's exact token cost and fingerprint
computed once), so that for each view it can tell, in time that follows the view:

* the view's exact tokens (ctxkit's counter) and its breakdown by category;
* whether the manager compacted: more history messages left out or altered than in the
  previous view (a manager that drops one message per turn compacts every turn; one that
  summarizes once and then appends compacts once);
* optionally, the required conformance properties, each violation published as a
  ``ctxkit:invariant_violation`` event (counted by the Prometheus and OTel subscribers) and
  logged with the call ids involved;
* optionally, the view message by message with the history it left out (``listing``).

The one exception to "exactly what the manager returned" is a guard (``on_violation="raise"``
or ``"repair"``): it checks the provider's per-view rules before the view is returned, and
refuses or repairs a view a provider would reject (:func:`ctxkit.shapes.repair.repair`).

Events reach every subscriber before a call returns, the deferred ones too (Prometheus,
OpenTelemetry, the event stream): a counter read right after ``get_messages_for_request``
counts that view. It is the same work the event loop would do when the caller next yields,
done earlier: on the demo's agent loop, about 10 us a view for Prometheus, 16 us for the event
stream and 50 us for OpenTelemetry, beside some 270 us of the wrapper's own analysis.
"""

from __future__ import annotations

import inspect
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ctxkit import events
from ctxkit.conformance.judge.invariants import (
    HistoryIndex,
    Violation,
    check_attachments,
    check_lifecycle,
    check_non_destructive,
    check_ordering,
    check_tool_pairs,
)
from ctxkit.events import LISTING_ROWS, EventBus
from ctxkit.forms import FORMS, Form, as_manager, detect_form
from ctxkit.messages import copy_message, text_of
from ctxkit.prefix import PrefixTracker
from ctxkit.reference.manager import provider_budget
from ctxkit.reference.planner import Spans
from ctxkit.telemetry.guard import (
    ON_VIOLATION,
    OnViolation,
    ViewRefused,
    judge_view,
    violation_event,
)
from ctxkit.telemetry.names import REQUIRED_PROPERTIES
from ctxkit.tokens import DEFAULT_ENCODING, REPLY_PRIMING, MessageCost, TokenCounter

__all__ = ["ON_VIOLATION", "InstrumentedManager", "OnViolation", "ViewRefused", "instrument"]

log = logging.getLogger(__name__)

STRATEGY = "external"
"""The ``strategy`` of compactions detected in a wrapped manager."""

_SYNTHETIC_COSTS_KEPT = 256


def instrument(
    manager: Any,
    *,
    bus: EventBus | None = None,
    encoding: str = DEFAULT_ENCODING,
    check_invariants: bool | Collection[str] = False,
    max_tokens: int | None = None,
    compact_threshold: float | None = None,
    conversation_id: str | None = None,
    view_listing: bool = False,
    form: Form | None = None,
    on_violation: OnViolation = "log",
) -> InstrumentedManager:
    """Wrap a context manager so that it publishes ctxkit's events on ``bus``.

    Parameters:
        manager: any object with the context protocol's async methods; or a function over
            the message list (``trim(messages)``, a pydantic-ai history processor), wrapped in
            a :class:`~ctxkit.forms.FunctionManager`; or an OpenAI Agents SDK ``Session``,
            wrapped in a :class:`~ctxkit.forms.SessionManager`. Then ``.manager`` is the
            wrapper (the function or session is its ``.function`` or ``.session``).
        bus: where events go (subscribe :class:`~ctxkit.telemetry.PrometheusMetrics`,
            :class:`~ctxkit.telemetry.EventStream`, ...); a new one by default, as ``.bus``.
        encoding: the tiktoken encoding for exact counts.
        check_invariants: check the required conformance properties on every view: ``True``
            for all of ``tool_pair_integrity``, ``ordering``, ``non_destructive``,
            ``lifecycle``, or a collection of those ids. ``non_destructive`` reads the whole
            history back on every view (a cost that grows with the history); the others
            follow the view.
        max_tokens: the budget when a request names none and no provider tells one (else the
            manager's own ``max_tokens`` attribute, if it has one).
        compact_threshold: the manager's compaction threshold as a share of the budget, if
            known, for "room left until compaction".
        conversation_id: carried in every event; a random one by default.
        view_listing: add ``listing`` and ``listing_omitted`` to every ``ctxkit:view`` event
            (see :data:`~ctxkit.events.VIEW`): each view message is ``kept`` (matched to a
            history message it is equivalent to), ``truncated`` (matched to a history message
            whose content it changes) or ``summary`` (matched to none),
            and the history messages no view message comes from are ``dropped`` (a wrapped
            manager's summaries are not traced back to what they stand for, so nothing is
            ``summarized``). Off by default: it costs work that follows the view per request,
            and up to :data:`~ctxkit.events.LISTING_ROWS` rows of bytes in every view event.
        form: ``"contract"``, ``"function"`` or ``"session"``: what ``manager`` is, if
            :func:`~ctxkit.forms.detect_form` would guess wrong.
        on_violation: what to do with a view a provider would reject. ``"log"``: check as
            ``check_invariants`` says, publish and log each violation, return the view as
            it is. ``"raise"``: refuse it, raising :class:`ViewRefused` (naming the provider
            rule, its error and the call ids); the manager is left as it was. ``"repair"``:
            return the smallest change that makes it valid (:func:`ctxkit.shapes.repair.
            repair`: orphaned results and unanswered calls dropped, thinking blocks and
            reasoning items a call needs put back from the history); a view no repair
            makes valid (an entry that is not a message dict) is refused as ``"raise"``
            does. Both publish :data:`~ctxkit.events.VIEW_GUARDED`, and publish and log
            each violation as ``"log"`` does, so ``ctxkit_invariant_violations_total``
            counts the manager's breaks in every mode. A guard checks only the rules a
            provider applies to one request, before the view is returned:
            ``tool_pair_integrity``, pairs and what travels with a call (found in the
            wrapper's own copy of what was added: nothing is read back from the manager).
            It implies that check whatever ``check_invariants`` says; ``ordering``,
            ``non_destructive`` and ``lifecycle`` compare views with the history, a
            provider takes views that break them, and they stay checks that log.

    Returns an :class:`InstrumentedManager`; use it where you used the manager.

    Example::

        manager = instrument(TheirManager(), check_invariants=True)
        manager.bus.subscribe(PrometheusMetrics(registry))

        guarded = instrument(TheirManager(), on_violation="repair")  # never sends a broken view
    """
    if check_invariants is True:
        checked = frozenset(REQUIRED_PROPERTIES)
    elif check_invariants is False:
        checked = frozenset()
    else:
        checked = frozenset(check_invariants)
        unknown = sorted(checked - set(REQUIRED_PROPERTIES))
        if unknown:
            raise ValueError(
                f"check_invariants: unknown properties {unknown}; choose from "
                f"{', '.join(REQUIRED_PROPERTIES)}"
            )
    if on_violation not in ON_VIOLATION:
        raise ValueError(
            f"on_violation must be one of {', '.join(map(repr, ON_VIOLATION))}, "
            f"not {on_violation!r}"
        )
    if on_violation != "log":
        checked |= {"tool_pair_integrity"}
    if not isinstance(view_listing, bool):
        raise TypeError(f"view_listing must be True or False, got {view_listing!r}")
    if form is not None and form not in FORMS:
        raise ValueError(f"form must be one of {', '.join(FORMS)}, not {form!r}")
    if (form or detect_form(manager)) != "contract":
        manager = as_manager(manager, form or detect_form(manager))
    for method in ("add_message", "get_messages_for_request", "get_messages"):
        if not callable(getattr(manager, method, None)):
            raise TypeError(
                f"{type(manager).__name__} has no {method}(): instrument() wraps objects with "
                "the context protocol (add_message, get_messages_for_request, get_messages, "
                "set_messages, clear), functions over the message list and Agents SDK "
                "sessions (add_items, get_items, pop_item, clear_session)"
            )
    if max_tokens is None:
        own = getattr(manager, "max_tokens", None)
        max_tokens = own if isinstance(own, int) and not isinstance(own, bool) else None
    return InstrumentedManager(
        manager,
        bus=bus or EventBus(),
        counter=TokenCounter(encoding),
        checked=checked,
        max_tokens=max_tokens,
        compact_threshold=compact_threshold,
        conversation_id=conversation_id or uuid.uuid4().hex[:12],
        view_listing=view_listing,
        on_violation=on_violation,
    )


def _role(message: Mapping[str, Any]) -> str:
    role = message.get("role")
    return role if isinstance(role, str) else "?"


def _row(index: int | None, role: str, tokens: int, fate: str) -> dict[str, Any]:
    return {"index": index, "count": 1, "role": role, "tokens": tokens, "fate": fate}


async def _call(function: Any, *args: Any, **kwargs: Any) -> Any:
    result = function(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


class InstrumentedManager:
    """A context manager seen through ctxkit: same answers (unless a guard refuses or repairs
    one), plus events. Made by :func:`instrument`; attributes it does not define are the
    wrapped manager's."""

    def __init__(
        self,
        manager: Any,
        *,
        bus: EventBus,
        counter: TokenCounter,
        checked: frozenset[str],
        max_tokens: int | None,
        compact_threshold: float | None,
        conversation_id: str,
        view_listing: bool = False,
        on_violation: OnViolation = "log",
    ) -> None:
        self.manager = manager
        self.bus = bus
        self.counter = counter
        self.checked = checked
        self.max_tokens = max_tokens
        self.compact_threshold = compact_threshold
        self.conversation_id = conversation_id
        self.view_listing = view_listing
        self.on_violation = on_violation
        self.violations = 0
        """Invariant violations found so far."""
        self.repaired = 0
        """Views a guard repaired so far (``on_violation="repair"``)."""
        self.refused = 0
        """Views a guard refused so far (raising :class:`ViewRefused`)."""
        self._reset()
        self._synthetic_costs: OrderedDict[str, MessageCost] = OrderedDict()

    def _reset(self) -> None:
        self._index = HistoryIndex()
        self._costs: list[MessageCost] = []
        self._history_tokens = 0
        self._left_out = 0
        """History messages the previous view left out or altered."""
        self._previous_tokens = 0
        self._previous_messages = 0
        self._added_tokens = 0
        self._added_messages = 0
        """What was added since the previous view: 'the view before compaction' is the
        previous view plus these."""
        self._synthetic_seen: set[str] = set()
        self._prefix = PrefixTracker()
        """The previous view, as fingerprints, for the prefix the next one keeps."""
        self._spans = Spans()
        """Running totals of what was added, brought up to date when a listing needs them."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.manager, name)

    # -- the contract, passed through ----------------------------------------------------------

    async def add_message(self, message: dict[str, Any]) -> Any:
        result = await _call(self.manager.add_message, message)
        self._remember(message)
        return result

    async def get_messages(self) -> Any:
        return await _call(self.manager.get_messages)

    async def set_messages(self, messages: list[dict[str, Any]]) -> Any:
        result = await _call(self.manager.set_messages, messages)
        self._reset()
        for message in messages:
            self._remember(message)
        if "lifecycle" in self.checked:
            await self._check_stored(check_lifecycle)
            self.bus.flush()
        return result

    async def clear(self) -> Any:
        result = await _call(self.manager.clear)
        self._reset()
        if "lifecycle" in self.checked:
            await self._check_stored(check_lifecycle)
            self.bus.flush()
        return result

    async def get_messages_for_request(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        view = await _call(self.manager.get_messages_for_request, *args, **kwargs)
        duration = time.perf_counter() - started
        try:
            guarded = False
            if self.on_violation != "log":
                view, guarded = await self._guard(view)  # may raise ViewRefused
            try:
                await self._observe(view, await self._budget(args, kwargs), duration, guarded)
            except Exception:  # seeing must never break the agent
                log.warning("instrument(): could not analyse a view", exc_info=True)
        finally:
            self.bus.flush()  # counters read right after the call count this view
        return view

    # -- bookkeeping ---------------------------------------------------------------------------

    def _remember(self, message: Any) -> None:
        if not isinstance(message, Mapping):
            return
        stored = copy_message(message)  # what was added, whatever the caller does later
        cost = self.counter.message_cost(stored)
        self._index.append(stored)
        self._costs.append(cost)
        self._history_tokens += cost.total
        self._added_tokens += cost.total
        self._added_messages += 1

    async def _budget(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
        budget = kwargs.get("token_budget", args[0] if args else None)
        if isinstance(budget, int) and not isinstance(budget, bool):
            return budget
        provider = kwargs.get("provider", args[1] if len(args) > 1 else None)
        if provider is not None:
            from_provider = await provider_budget(provider, 0)
            if from_provider is not None:
                return from_provider
        return self.max_tokens or 0

    def _synthetic_cost(self, message: Mapping[str, Any], fingerprint: str) -> MessageCost:
        cost = self._synthetic_costs.get(fingerprint)
        if cost is None:
            cost = self._synthetic_costs[fingerprint] = self.counter.message_cost(message)
            if len(self._synthetic_costs) > _SYNTHETIC_COSTS_KEPT:
                self._synthetic_costs.popitem(last=False)
        return cost

    async def _observe(self, view: Any, budget: int, duration: float, guarded: bool) -> None:
        if not isinstance(view, Sequence):
            view = []
        index = self._index
        prints = [index.fingerprint(m) if isinstance(m, Mapping) else None for m in view]
        matches = index.match(view, prints)
        tokens = REPLY_PRIMING
        breakdown: dict[str, int] = {}
        kinds = {"kept": 0, "shortened": 0, "summary": 0}
        verbatim = 0
        new_synthetic: list[Mapping[str, Any]] = []
        rows: list[dict[str, Any]] | None = [] if self.view_listing else None
        seen: list[str] = []
        costs: list[int] = []
        for message, source, fingerprint in zip(view, matches, prints, strict=True):
            if fingerprint is None:
                continue
            exact = source is not None and fingerprint == index.prints[source]
            cost = self._costs[source] if exact else self._synthetic_cost(message, fingerprint)
            if exact or (source is not None and index.equivalent(message, source)):
                verbatim += 1  # kept whole, perhaps in another shape that says the same
                kinds["kept"] += 1
                fate = "kept"
            else:
                kinds["shortened" if source is not None else "summary"] += 1
                fate = "truncated" if source is not None else "summary"
                if source is None and fingerprint not in self._synthetic_seen:
                    self._synthetic_seen.add(fingerprint)
                    new_synthetic.append(message)
            if rows is not None:
                rows.append(_row(source, _role(message), cost.total, fate))
            seen.append(fingerprint)
            costs.append(cost.total)
            tokens += cost.total
            if source is None:
                breakdown["summaries"] = breakdown.get("summaries", 0) + cost.total
            else:
                for category, part in cost.parts:
                    breakdown[category] = breakdown.get(category, 0) + part
        kept = self._prefix.observe(seen, costs, tokens - REPLY_PRIMING)
        left_out = len(index) - verbatim
        compacted = left_out > self._left_out
        if compacted:
            await self._publish_compaction(view, tokens, budget, duration, left_out, kinds)
            for message in new_synthetic:
                await self._publish(events.INCLUDE, source="synthetic", content=text_of(message))
        self._left_out = left_out
        self._previous_tokens, self._previous_messages = tokens, len(view)
        self._added_tokens = self._added_messages = 0
        listing: dict[str, Any] = {}
        if rows is not None:
            shown, omitted = self._listing(rows)
            listing = {"listing": shown, "listing_omitted": omitted}
        await self._publish(
            events.VIEW,
            message_count=len(view),
            token_count=tokens,
            budget=budget,
            history_messages=len(index),
            history_tokens=self._history_tokens,
            compacted=compacted,
            compact_threshold=self.compact_threshold,
            breakdown=breakdown,
            kinds=kinds,
            prefix_tokens=kept.tokens,
            previous_tokens=kept.previous,
            duration_s=duration,
            **listing,
        )
        if self.checked:
            await self._check_view(view, matches, guarded)

    def _listing(self, view_rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
        """The view's rows with a ``dropped`` row for each run of history messages no view
        message comes from, placed before the first view message from after the run (and
        before synthetic messages right before that one); the newest
        :data:`~ctxkit.events.LISTING_ROWS` rows and how many were omitted before them.
        Runs are found between the matched indices and summed with running totals, so the
        work follows the view, not the history."""
        spans = self._spans
        known, now = len(spans), min(len(self._costs), len(self._index))
        if now > known:
            spans.extend(
                (cost.total for cost in self._costs[known:now]),
                map(_role, self._index.messages[known:now]),
            )
        matched = sorted(row["index"] for row in view_rows if row["index"] is not None)
        runs: list[tuple[int, int]] = []
        previous = -1
        for source in [*matched, now]:
            if source > previous + 1:
                runs.append((previous + 1, source))
            previous = source
        runs.reverse()  # popped from the end, oldest first
        rows: list[dict[str, Any]] = []
        # Synthetic rows wait for the next matched row and go after the runs before it, as
        # the reference manager places its summary: left-out runs, then what stands for them.
        waiting: list[dict[str, Any]] = []
        for row in view_rows:
            source = row["index"]
            if source is None:
                waiting.append(row)
                continue
            while runs and runs[-1][0] < source:
                rows.append(spans.row(*runs.pop(), "dropped"))
            if waiting:
                rows += waiting
                waiting = []
            rows.append(row)
        rows += [spans.row(*run, "dropped") for run in reversed(runs)]
        rows += waiting
        shown = rows[-LISTING_ROWS:]
        return shown, len(rows) - len(shown)

    async def _publish_compaction(
        self,
        view: Sequence[Any],
        tokens: int,
        budget: int,
        duration: float,
        left_out: int,
        kinds: Mapping[str, int],
    ) -> None:
        before_tokens = self._previous_tokens + self._added_tokens
        before_messages = self._previous_messages + self._added_messages
        await self._publish(
            events.PRE_COMPACT,
            message_count=before_messages,
            token_count=before_tokens,
            budget=budget,
            strategy=STRATEGY,
        )
        await self._publish(
            events.POST_COMPACT,
            message_count=len(view),
            token_count=tokens,
            budget=budget,
            strategy=STRATEGY,
            tokens_before=before_tokens,
            tokens_saved=max(0, before_tokens - tokens),
            duration_s=duration,
            units_dropped=max(0, left_out - self._left_out),
            units_truncated=kinds["shortened"],
            units_summarized=0,
        )

    # -- live invariants -------------------------------------------------------------------------

    async def _check_view(self, view: Any, matches: list[int | None], guarded: bool) -> None:
        found: list[Violation] = []
        if "tool_pair_integrity" in self.checked and not guarded:
            found += check_tool_pairs(view)
            found += check_attachments(self._index.messages, view)
        if "ordering" in self.checked:
            found += check_ordering(self._index.messages, view, matches=matches)
        await self._report(found)
        if "non_destructive" in self.checked:
            await self._check_stored(check_non_destructive)

    async def _guard(self, view: Any) -> tuple[Any, bool]:
        """The view a guard lets through, and whether it checked it (:func:`~ctxkit.telemetry.
        guard.judge_view`). A view that breaks a provider's per-view rules is reported as in
        ``"log"`` mode, then refused (:class:`ViewRefused`) or repaired."""
        if not isinstance(view, Sequence) or isinstance(view, str | bytes):
            return view, False  # not a list of messages: nothing to check it as
        try:
            verdict = judge_view(view, self._index.messages, self.on_violation)
        except Exception:  # a bug in a check must not break the agent
            log.warning("instrument(): could not check a view", exc_info=True)
            return view, False
        if verdict.action is None:
            return view, True
        await self._report(list(verdict.found))
        if verdict.action == "repaired":
            self.repaired += 1
        else:
            self.refused += 1
        await self._publish(events.VIEW_GUARDED, **verdict.event(len(view)))
        if verdict.action == "refused":
            raise ViewRefused(
                type(self.manager).__name__, verdict.found, repaired=verdict.repair_failed
            )
        return verdict.view, True

    async def _check_stored(self, check: Any) -> None:
        stored = await _call(self.manager.get_messages)
        expected = self._index.messages
        if isinstance(stored, list) and stored == expected:
            return  # the common case, compared in C
        await self._report(check(expected, stored, self._index.ignore))

    async def _report(self, found: list[Violation]) -> None:
        for violation in found:
            self.violations += 1
            log.warning(
                "context manager %s broke %s (conversation %s)%s: %s",
                type(self.manager).__name__,
                violation.property,
                self.conversation_id,
                f" ids {', '.join(violation.ids)}" if violation.ids else "",
                violation.message,
            )
            await self._publish(events.INVARIANT_VIOLATION, **violation_event(violation))

    async def _publish(self, name: str, **data: Any) -> None:
        data["conversation_id"] = self.conversation_id
        await self.bus.publish(name, data)
