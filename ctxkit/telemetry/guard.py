"""The guard: what to do with a view a provider would reject, for a wrapped manager
(``instrument(manager, on_violation=...)``) and for a function over the message list
(:func:`guard`), which frameworks call where they would call the function itself.

A guard checks only what a provider checks on one request (tool pairs, and the thinking
blocks and reasoning items that must travel with a call); ``"raise"`` refuses such a view
with :class:`ViewRefused`, ``"repair"`` returns the smallest change that makes it valid
(:func:`ctxkit.shapes.repair.repair`), ``"log"`` reports it and lets it through. Either way it
publishes what it found on an :class:`~ctxkit.events.EventBus` (``ctxkit:invariant_violation``
per break, ``ctxkit:view_guarded`` per view acted on), so the same metrics count it.
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from ctxkit import events
from ctxkit.conformance.judge.invariants import Violation, check_attachments, check_tool_pairs
from ctxkit.events import EventBus
from ctxkit.shapes.repair import Change, repair

__all__ = ["ON_VIOLATION", "OnViolation", "Verdict", "ViewRefused", "guard", "judge_view"]

log = logging.getLogger(__name__)

OnViolation = Literal["log", "raise", "repair"]
ON_VIOLATION: tuple[OnViolation, ...] = ("log", "raise", "repair")
"""What :func:`instrument` does with a view that breaks a provider's per-view rules."""


class ViewRefused(RuntimeError):
    """A guarded manager returned a view its provider would refuse (``on_violation="raise"``,
    or ``"repair"`` when no repair makes it valid). The wrapped manager is left as it was.

    Attributes: ``rule`` (the first provider rule broken, e.g. ``openai.calls_answered``;
    ``""`` when the break names none, such as a view entry that is not a message dict),
    ``provider_error`` (the error text the provider answers it with), ``rules`` (every rule
    broken), ``ids`` (the call ids involved), ``violations`` (each break as the checks found
    it: a sentence naming the view's message indices)."""

    def __init__(
        self, manager: str, violations: Sequence[Violation], *, repaired: bool = False
    ) -> None:
        self.violations = tuple(violations)
        self.rules = tuple(dict.fromkeys(v.rule for v in self.violations if v.rule))
        self.rule = self.rules[0] if self.rules else ""
        first = next((v for v in self.violations if v.rule == self.rule), self.violations[0])
        self.ids = tuple(dict.fromkeys(i for v in self.violations for i in v.ids))
        self.provider_error = _filled(first) if first.rule else ""
        what = "could not repair a view" if repaired else "refused a view"
        broke = f", breaking {self.rule}" if self.rule else ""
        answer = (
            f" (the provider answers: {self.provider_error})"
            if self.provider_error and first.provider_error not in first.message
            else ""
        )
        more = len(self.violations) - 1
        super().__init__(
            f"instrument() {what} of {manager} that the provider would reject{broke}: "
            f"{first.message}{answer}" + (f"; and {more} more" if more else "")
        )


class _Blanks(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _filled(violation: Violation) -> str:
    """The provider's error for a violation, with the call ids and the message index it
    names filled in where the text has a place for them."""
    at = re.search(r"view\[(\d+)\]", violation.message)
    first = violation.ids[0] if violation.ids else None
    known = {
        "ids": ", ".join(violation.ids) or None,
        "id": first,
        "call_id": first,
        "index": at.group(1) if at else None,
    }
    return violation.provider_error.format_map(
        _Blanks({k: v for k, v in known.items() if v is not None})
    )


@dataclass(frozen=True)
class Verdict:
    """What a guard makes of one view: the view to send, what it broke, and what was done
    (``None``: nothing was wrong; ``"logged"``, ``"repaired"`` or ``"refused"``)."""

    view: Any
    found: tuple[Violation, ...] = ()
    action: Literal["logged", "repaired", "refused"] | None = None
    changes: tuple[Change, ...] = ()
    repair_failed: bool = False
    """A repair was tried and the view it made still breaks a rule (a message it cannot
    read): the view is refused."""

    def event(self, messages_before: int) -> dict[str, Any]:
        """The ``ctxkit:view_guarded`` event's data for a view repaired or refused."""
        dropped = [c for c in self.changes if c.action == "dropped"]
        return {
            "action": self.action,
            "rules": list(dict.fromkeys(v.rule for v in self.found if v.rule)),
            "violations": len(self.found),
            "ids": list(dict.fromkeys(i for v in self.found for i in v.ids)),
            "changes": [c.as_dict() for c in self.changes],
            "dropped_calls": sum(c.what == "call" for c in dropped),
            "dropped_results": sum(c.what == "result" for c in dropped),
            "dropped_messages": len({c.index for c in dropped if c.whole}),
            "restored": sum(c.action == "restored" for c in self.changes),
            "messages_before": messages_before,
            "message_count": len(self.view) if isinstance(self.view, Sequence) else 0,
        }


def _broken(history: Sequence[Any], view: Sequence[Any]) -> list[Violation]:
    return check_tool_pairs(view) + check_attachments(history, view)


def judge_view(view: Any, history: Sequence[Any], on_violation: OnViolation) -> Verdict:
    """What a guard in mode ``on_violation`` does with ``view``, taken from ``history`` (the
    messages the thinking blocks and reasoning items a call needs are put back from). Pure:
    it publishes and raises nothing."""
    if not isinstance(view, Sequence) or isinstance(view, str | bytes):
        return Verdict(view)  # not a list of messages: nothing to check it as
    found = tuple(_broken(history, view))
    if not found:
        return Verdict(view)
    if on_violation == "log":
        return Verdict(view, found, "logged")
    if on_violation == "repair":
        fixed = repair(view, history)
        if not _broken(history, fixed.view):
            return Verdict(fixed.view, found, "repaired", tuple(fixed.changes))
        return Verdict(view, found, "refused", repair_failed=True)
    return Verdict(view, found, "refused")


def violation_event(violation: Violation) -> dict[str, Any]:
    """The ``ctxkit:invariant_violation`` event's data for one break."""
    return {
        "property": violation.property,
        "message": violation.message,
        "ids": list(violation.ids),
    }


F = TypeVar("F", bound=Callable[..., Any])


def guard(
    function: F,
    *,
    on_violation: OnViolation = "repair",
    bus: EventBus | None = None,
    conversation_id: str | None = None,
) -> F:
    """Guard a function over the message list (``trim(messages)``, ``f(messages,
    token_budget=...)``, sync or async): the returned function takes the same arguments,
    calls ``function`` and checks the view it returns against the messages it was given
    (its first argument), then raises :class:`ViewRefused`, returns the repaired view, or
    logs, as ``on_violation`` says. Use it wherever the function itself was used::

        safe_trim = guard(trim, on_violation="repair")  # never sends a split pair
        view = safe_trim(history)

    Events go to ``bus`` (a new one by default, as ``safe_trim.bus``), carrying
    ``conversation_id``; ``safe_trim.repaired`` and ``safe_trim.refused`` count the views
    acted on. A sync function's guard delivers to sync subscribers (``PrometheusMetrics``,
    ``EventStream``) before it returns; an async subscriber is awaited only by an async
    function's guard (from a sync one it is skipped, with a warning).
    """
    if on_violation not in ON_VIOLATION:
        raise ValueError(
            f"on_violation must be one of {', '.join(map(repr, ON_VIOLATION))}, "
            f"not {on_violation!r}"
        )
    if not callable(function):
        raise TypeError(f"guard() takes a function over the message list, not {function!r}")
    bus = bus or EventBus()
    conversation = conversation_id or uuid.uuid4().hex[:12]
    name = getattr(function, "__qualname__", type(function).__name__)

    def judged(messages: Any, view: Any) -> tuple[Verdict, list[tuple[str, dict[str, Any]]]]:
        history = list(messages) if isinstance(messages, Sequence) else []
        try:
            verdict = judge_view(view, history, on_violation)
        except Exception:  # a bug in a check must not break the agent
            log.warning("guard(): could not check a view of %s", name, exc_info=True)
            return Verdict(view), []
        published = []
        for violation in verdict.found:
            log.warning(
                "%s broke %s (conversation %s): %s",
                name,
                violation.property,
                conversation,
                violation.message,
            )
            published.append((events.INVARIANT_VIOLATION, violation_event(violation)))
        if verdict.action in ("repaired", "refused"):
            setattr(wrapper, verdict.action, getattr(wrapper, verdict.action) + 1)
            published.append((events.VIEW_GUARDED, verdict.event(len(view))))
        for _, data in published:
            data["conversation_id"] = conversation
        return verdict, published

    def outcome(verdict: Verdict) -> Any:
        bus.flush()
        if verdict.action == "refused":
            raise ViewRefused(name, verdict.found, repaired=verdict.repair_failed)
        return verdict.view

    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def guarded_async(messages: Any, *args: Any, **kwargs: Any) -> Any:
            verdict, published = judged(messages, await function(messages, *args, **kwargs))
            for event, data in published:
                await bus.publish(event, data)
            return outcome(verdict)

        wrapper: Any = guarded_async
    else:

        @functools.wraps(function)
        def guarded(messages: Any, *args: Any, **kwargs: Any) -> Any:
            verdict, published = judged(messages, function(messages, *args, **kwargs))
            for event, data in published:
                _publish_now(bus, event, data)
            return outcome(verdict)

        wrapper = guarded
    wrapper.bus = bus
    wrapper.conversation_id = conversation
    wrapper.repaired = 0
    wrapper.refused = 0
    return wrapper  # type: ignore[no-any-return]


def _publish_now(bus: EventBus, name: str, data: dict[str, Any]) -> None:
    """Publish from sync code, inside an event loop or not: with sync subscribers the
    publication completes on its first step; one that would wait (an async subscriber that
    suspends) is closed, and the skip logged."""
    publication = bus.publish(name, data)
    try:
        publication.send(None)
    except StopIteration:
        return
    publication.close()
    log.warning("guard(): an async event subscriber cannot be awaited from a sync function")
