"""A replay candidate held as ``ctxkit conformance`` holds a target: in a worker process of its
own, through the conformance protocol (:class:`~ctxkit.conformance.targets.worker_client.Child`),
contained by the sandbox.

Each call gets ``--timeout`` seconds (the candidate's first slow call a grace, as a run's
does: a busy machine answers late, a hang not at all), the address space is capped, and what
the candidate prints is kept apart. Whatever it does (exit, be killed, hang, raise
``BaseException``, close its stdout, print megabytes) costs that candidate that conversation,
said in one sentence, and a fresh worker serves its next one: never the replay, never the
other candidates' figures. The worker builds, calls and closes the manager by the same code
as a conformance run (``reset`` closes the last manager and builds the next).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from ctxkit.conformance.targets.routes import RouteError, route_for
from ctxkit.conformance.targets.sandbox import DEFAULT_MEMORY_LIMIT
from ctxkit.conformance.targets.worker_client import (
    Child,
    TargetUnusable,
    first_grace,
    first_line,
)

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_TIMEOUT",
    "LOAD_TIMEOUT",
    "Candidate",
    "CandidateRaised",
    "CannotLoad",
    "Limits",
    "TargetUnusable",
]

DEFAULT_TIMEOUT = 10.0
"""Seconds a candidate's call may take (``--timeout``), as in a conformance run."""

LOAD_TIMEOUT = 120.0
"""Seconds loading (importing) a candidate may take (``--load-timeout``)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What a candidate's worker is held to."""

    timeout: float = DEFAULT_TIMEOUT
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT
    load_timeout: float = LOAD_TIMEOUT


class CannotLoad(Exception):
    """The candidate cannot be loaded or built (a wrong TARGET or ``--config``): the user's
    to fix, said before any conversation is replayed."""


class CandidateRaised(Exception):
    """The manager raised (an exception of its own, ``CancelledError`` included) or answered
    what is no view: the conversation stops there, and the worker serves the next one."""


class Candidate:
    """One candidate's worker: started on first use, restarted after the candidate broke it.

    ``target``, ``config`` and ``form`` are ``--manager``, ``--config`` and ``--form``."""

    def __init__(
        self,
        target: str,
        config: dict[str, Any] | None = None,
        form: str | None = None,
        limits: Limits = Limits(),
    ) -> None:
        try:
            self.route = route_for(target)
        except RouteError as exc:
            raise CannotLoad(str(exc)) from None
        self.target, self.config, self.form, self.limits = target, dict(config or {}), form, limits
        self.timeout = limits.timeout
        self.patient = True
        """The next call past its timeout gets a grace: only the first such call."""
        self._child: Child | None = None
        self._fresh = False
        """The worker's manager is built and unused (by :meth:`check`): the first
        conversation takes it, so building it once more costs nothing a candidate does."""

    def _worker(self) -> Child:
        from ctxkit.conformance.judge.invariants import ANNOTATION_KEYS

        if self._child is not None and self._child.alive:
            return self._child
        try:
            child = Child(
                self.route.command, timeout=self.timeout, memory_limit=self.limits.memory_limit
            )
        except OSError as exc:
            raise CannotLoad(self.route.cannot_start(exc)) from None
        try:
            hello = child.hello(
                self.route.target,
                self.config,
                ANNOTATION_KEYS,
                timeout=self.limits.load_timeout,
                form=self.form,
                digests=False,  # a replay never checks one: they would cost what calls cost
            )
        except TargetUnusable as exc:
            raise CannotLoad(f"loading it: {exc.message}{self.route.hint}") from None
        if not hello.ok:
            child.close()
            raise CannotLoad((hello.message or hello.error) + self.route.hint)
        self._child = child
        return child

    def check(self) -> None:
        """Load the candidate and build it once, before any conversation: a wrong TARGET or
        ``--config`` is the user's to fix (:class:`CannotLoad`), said at once."""
        from ctxkit.conformance.targets.load import config_hint

        try:
            self.begin()
            self._fresh = True
        except CandidateRaised as exc:
            raise CannotLoad(f"building the manager raised {exc}{config_hint(str(exc))}") from None
        except TargetUnusable as exc:
            raise CannotLoad(f"building the manager: {exc.message}") from None

    def begin(self) -> None:
        """A fresh manager for the next conversation (the last one closed)."""
        if not self._fresh:
            self._call("reset")
        self._fresh = False

    def turn(self, messages: list[Any], budget: int | None) -> list[Any]:
        """One model call: ``messages`` added in order, then the view at ``budget``, given
        both as ``token_budget`` and as a provider's window (a manager may read either), or
        neither when no budget is known. One round trip to the worker."""
        provider = None if budget is None else {"context_window": budget, "max_output_tokens": 0}
        view = self._call("turn", messages=messages, token_budget=budget, provider=provider)
        if not isinstance(view, list):
            raise CandidateRaised(
                f"get_messages_for_request returned {_kind(view)}, not a list of messages"
            )
        return view

    def _call(self, op: str, **args: Any) -> Any:
        self._fresh = False
        child = self._worker()
        grace = first_grace(self.timeout, math.inf) if self.patient else 0.0
        began = time.monotonic()
        try:
            reply = child.call(op, timeout=self.timeout, grace=grace, **args)
        except TargetUnusable:
            self.patient = False
            self._child = None  # the call ended it: the next conversation gets a fresh one
            raise
        if grace and time.monotonic() - began > self.timeout:  # slowed, not hung
            self.patient, self.timeout = False, self.timeout + grace
        if not reply.ok:
            raise CandidateRaised(reply.error)
        return reply.value

    def close(self) -> None:
        """End the worker (its last manager closed, its ``atexit`` handlers run)."""
        if self._child is not None:
            self._child.close()
            self._child = None


def _kind(value: Any) -> str:
    """What came back instead of a list, as a sentence names it (anything that is not JSON
    data crosses the protocol as its ``repr``, a str)."""
    if value is None:
        return "None"
    if isinstance(value, str):
        return f"a str ({first_line(value)[:60]!r})"
    return f"a {type(value).__name__}"
