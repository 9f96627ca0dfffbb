"""The Hypothesis state machine that drives a target and checks every property after each step.

The model is a plain list of the messages added. Each rule is one thing an agent loop does
(add a message, add a tool round, ask for a view, replace or clear the history, add from many
tasks at once, pass bad input, edit what it got back), performed in the worker process. After
each, the checks of
:mod:`ctxkit.conformance.judge.step_checks` run on what came back. A violation raises
an exception of its property's own type, so Hypothesis shrinks each property's failure
separately.

What the machine draws never depends on what the target answers: preconditions read only the
properties being checked in this search, which are fixed when the search starts, so a flaky
target is reported as a finding, never as a flaky test.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn

from hypothesis import currently_in_test_context, reject
from hypothesis import strategies as st
from hypothesis.errors import UnsatisfiedAssumption
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from ctxkit.conformance.judge import step_checks as checks
from ctxkit.conformance.judge.allow import Relaxations
from ctxkit.conformance.judge.catalogue import PROPERTIES
from ctxkit.conformance.judge.comes_from import semantic
from ctxkit.conformance.judge.invariants import (
    Violation,
    is_result,
    newest_user_message,
    normalized,
)
from ctxkit.conformance.judge.parts import is_call_item, reasoning_id
from ctxkit.conformance.judge.steps import Call, Check, Request
from ctxkit.conformance.search.conversations import (
    GROWTH_LINE,
    SHAPES,
    BadMessage,
    Budget,
    Conversation,
    RoundTemplate,
    Shape,
    bad_messages_of,
    budgets,
    conversation_plans,
    example_shapes,
    holds_system,
    in_shape,
    plain_messages,
    round_templates,
    texts,
)
from ctxkit.conformance.targets.protocol import RunningDigest
from ctxkit.conformance.targets.worker_client import (
    Child,
    Reply,
    TargetUnusable,
    during,
    first_grace,
)
from ctxkit.tokens import REPLY_PRIMING

__all__ = [
    "FAILURES",
    "ConformanceMachine",
    "DeadlineReached",
    "PropertyFailure",
    "RuleCall",
    "Session",
    "TargetStopped",
]

RuleCall = tuple[str, dict[str, Any]]
"""One rule the machine ran, by name, with its arguments: what the minimizer replays."""


class PropertyFailure(AssertionError):
    """A property does not hold. Carries the calls that show it and the check that failed."""

    def __init__(
        self,
        property_id: str,
        message: str,
        *,
        calls: list[Call],
        check: Check,
        history: int,
        rules: list[RuleCall],
    ) -> None:
        super().__init__(f"{property_id}: {message}")
        self.property_id = property_id
        self.message = message
        self.calls = calls
        self.check = check
        self.history = history
        self.rules = rules
        self.note = ""

    @property
    def size(self) -> tuple[int, int]:
        """How big the counterexample is: messages in the history, then calls."""
        return (self.history, len(self.calls))


def _abandon() -> NoReturn:
    """Drop the example: inside a Hypothesis test as a rejection it counts, outside one (a
    minimizer's or a reproducer's replay) as the same exception, without Hypothesis' warning
    about ``reject`` outside a test."""
    if currently_in_test_context():
        reject()
    raise UnsatisfiedAssumption("the example was abandoned")


DIVERGING = frozenset({"history", "raises", "stored_all"})
"""Kinds of check whose failure may leave the stored history unlike the model: a history
that differs, a call on it that raised, concurrent adds that lost or doubled a message."""


def _failure_type(property_id: str) -> type[PropertyFailure]:
    name = "".join(part.title() for part in property_id.split("_")) + "Failure"
    return type(name, (PropertyFailure,), {"__module__": __name__})


FAILURES = {p.id: _failure_type(p.id) for p in PROPERTIES}


class TargetStopped(BaseException):
    """The target hung, died or broke the protocol during a call. A ``BaseException`` so that
    Hypothesis does not try to shrink it by running it again: the runner ends the search,
    charges the property the call was made for, and starts a fresh worker."""

    def __init__(self, unusable: TargetUnusable, *, charge: str, calls: list[Call], history: int):
        super().__init__(unusable.message)
        self.unusable = unusable
        self.charge = charge
        self.calls = calls
        self.history = history


GROWTH_STEP = 2_000
"""Tokens the first turn of a grown history adds; each later turn doubles the history."""


def growth_turn_tokens(held: int, target: int) -> int:
    """Tokens the next turn of a grown history adds: as many as it holds (at least
    :data:`GROWTH_STEP`), so it doubles, but no more than ``target`` needs."""
    return min(max(held, GROWTH_STEP), target - held)


GROWN_SHARES = (0.95, 1.0, 1.1, 1.25, 1.5)
"""Where a :class:`SteeredMachine` starts, as shares of the size at which the target was seen
to compact (narrowed to within a few percent): just below it, so the search's own steps
cross it, at it, and past it, where it compacts again and again."""

GROWN_TURN = 1_000
"""Tokens at most of one turn of a :class:`SteeredMachine`'s starting history. A view past
the target's trigger cuts inside that history (the search's own steps add far less than it
holds), so its calls must lie close enough together for the cut to fall among them: a
manager that trims message by message splits a pair only where its cut lands on a call.
Grown by doubling, as the search for the trigger grows it, the history held a few huge logs
and almost no calls, and such a split was found on some seeds only."""

OWN_BUDGET = Budget(None, None, "none")
"""A request that names no budget: the manager's own decides."""


class DeadlineReached(BaseException):
    """The run's time is up; the search ends where it is."""


class _ExampleEnds(BaseException):
    """A failure noted while the search goes on (:attr:`Session.goes_on`) left the stored
    history unlike the model: the rest of the example would judge a history the manager does
    not hold, so its remaining steps start again on a fresh manager. Caught by the outermost
    rule."""


@dataclass
class Session:
    """What every example of one run shares: the worker, the counter, what is checked, the
    clock, and what has been seen so far."""

    child: Child
    count_message: Callable[[dict[str, Any]], int]
    relax: Relaxations
    ignore: frozenset[str]
    observes_events: bool
    shapes: tuple[Shape, ...] = ("openai", "anthropic")
    fallback_budget: int | None = None
    """The budget of a request that names none, where known (``--budget``)."""
    timeout: float = 10.0
    checking: frozenset[str] = frozenset()
    """The properties of the current search; fixed while it runs."""
    deadline: float = float("inf")
    """``time.monotonic()`` by which the current phase must end."""
    work_left: int | None = None
    """Bytes the current phase may still exchange with the target (requests and answers,
    :attr:`~ctxkit.conformance.targets.worker_client.Child.moved`); None: no limit. The
    minimizer's work is counted so, not in seconds, so a failure is made as small on a busy
    machine as on an idle one, and reads the same on every run. Bytes, not replays: a replay
    of a 700-message history of tool logs costs a thousand times one of ten short messages."""
    on_step: Callable[[], None] = lambda: None
    on_failure: Callable[[str], None] = lambda _property_id: None
    """Told each property's first failure, as it is seen."""
    started: float = field(default_factory=time.monotonic)
    first_failure: dict[str, float] = field(default_factory=dict)
    smallest: dict[str, PropertyFailure] = field(default_factory=dict)
    """The smallest failure seen per property: what stands if a search cannot finish."""
    examples: int = 0
    steps: int = 0
    largest_history: int = 0
    largest_history_tokens: int = 0
    """The most tokens a history held (its messages, as the run counts them)."""
    views: int = 0
    """Views returned as lists, and of those, the ones that were not the whole history as a
    provider reads it (:meth:`ConformanceMachine._note_view`): a run that never saw one did
    not test the manager where it compacts."""
    compacted_views: int = 0
    unsupported: dict[str, int] = field(default_factory=dict)
    """Calls the implementation could not make (what its transport cannot carry), by reason:
    the examples that needed them were dropped."""
    compaction_events: int = 0
    slow_calls: int = 0
    """Calls that answered past the timeout, in their grace (:meth:`call`)."""
    patient: bool = True
    """The next call past its timeout gets a grace: only the run's first such call."""
    on_slow: Callable[[str, float], None] = lambda _op, _took: None
    """Told of a call that answered in its grace: the operation and the seconds it took."""
    grown_to: int = 0
    """Tokens of a history at which the target was seen to compact when grown
    (:meth:`ConformanceMachine.grow_turn`); a :class:`SteeredMachine` starts its examples
    near it. 0: not known."""
    line_tokens: int = 0
    """Tokens one :data:`GROWTH_LINE` adds to a tool output, once counted."""
    normalized: str = ""
    """The first stored message kept in another form than given, equivalent for a provider
    (a text block kept as a string, say): no failure, but the report says so."""
    goes_on: bool = False
    """A failure is noted (:meth:`saw`) and the search goes on: the view's other checks
    still run, the example goes on (on a fresh manager where the history no longer follows
    the model), and Hypothesis never sees a failure (so never shrinks one). Off, a failure is
    raised: it ends the example and Hypothesis's search, and Hypothesis shrinks it."""

    def call(self, op: str, timeout: float | None = None, **args: Any) -> Reply:
        """One operation in the worker, within its timeout and the deadline.

        The run's first call past its timeout is given twice as long again before it is a
        hang: one that answers then was slowed by a busy machine, so nothing is charged and
        every later call gets the longer timeout (:attr:`slow_calls`)."""
        self.steps += 1
        self.on_step()
        limit = self.timeout if timeout is None else timeout
        began = time.monotonic()
        left = self.deadline - began
        if left <= 0:
            raise DeadlineReached
        if self.work_left is not None and self.work_left <= 0:
            raise DeadlineReached
        child, moved = self.child, self.child.moved
        grace = first_grace(limit, left) if self.patient else 0.0
        try:
            reply = child.call(op, timeout=min(limit, left), grace=grace, **args)
        except TargetUnusable as exc:
            if exc.kind == "timeout":
                self.patient = False
                if left < limit:
                    raise DeadlineReached from None
            raise
        finally:
            if self.work_left is not None:
                self.work_left -= child.moved - moved
        took = time.monotonic() - began
        if grace and took > limit:
            self.slowed(op, took, limit + grace)
        if reply.kind == "unsupported":  # the call cannot be made: drop the example
            reason = f"{during(op)}: {reply.message or reply.error}"
            self.unsupported[reason] = self.unsupported.get(reason, 0) + 1
            _abandon()
        return reply

    def slowed(self, op: str, took: float, timeout: float) -> None:
        """A call answered in its grace, ``took`` seconds: no more graces, and every later call
        gets ``timeout``."""
        self.patient = False
        self.timeout = timeout
        self.slow_calls += 1
        self.on_slow(op, took)

    def saw(self, failure: PropertyFailure) -> None:
        """Keep the failure if it is the first or the smallest of its property so far."""
        if self.smaller(failure.property_id, failure.size):
            self.smallest[failure.property_id] = failure

    def smaller(self, property_id: str, size: tuple[int, int]) -> bool:
        """Whether a failure of this size would be the first or the smallest of its property
        (the time of the first is noted here)."""
        if property_id not in self.first_failure:
            self.first_failure[property_id] = time.monotonic() - self.started
            self.on_failure(property_id)
        known = self.smallest.get(property_id)
        return known is None or size < known.size


def _recorded(function: Callable[..., None]) -> Callable[..., None]:
    """Note each rule's name and arguments as it runs (not the rules it runs in turn), for
    the minimizer to replay."""

    @functools.wraps(function)
    def rule_body(self: ConformanceMachine, **kwargs: Any) -> None:
        if self.ended:
            return
        outermost = not self._in_rule
        if outermost:
            self.rules.append((function.__name__, kwargs))
        self._in_rule = True
        try:
            function(self, **kwargs)
        except _ExampleEnds:
            if not outermost:
                raise
            self._begin([rule for rule in self.rules[:1] if rule[0] == "choose_shape"])
        finally:
            self._in_rule = not outermost

    return rule_body


def _checking(property_id: str) -> Callable[[Any], bool]:
    return lambda machine: property_id in machine.session.checking


def _while_open(property_id: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A rule that serves only ``property_id`` does nothing once the search has noted that
    property's failure (:attr:`Session.goes_on`): the examples after it go on to long
    histories instead of ending where the same failure repeats. (Its precondition cannot
    close instead: the rules Hypothesis may draw must stay the same for the whole search.)"""

    def wrap(function: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(function)
        def rule_body(self: ConformanceMachine, **kwargs: Any) -> None:
            session = self.session
            if session.goes_on and property_id in session.smallest:
                return
            function(self, **kwargs)

        return rule_body

    return wrap


class ConformanceMachine(RuleBasedStateMachine):
    """Drives one target through :class:`Session`; checks every property after each step.

    Hypothesis builds it with ``lambda: ConformanceMachine(session)``; the minimizer builds it
    the same way and calls its rules by name.
    """

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        self._in_rule = False
        self.ended = False
        """Even a fresh manager failed (:attr:`Session.goes_on`): the example's remaining
        steps do nothing."""
        self.shapes = example_shapes(session.shapes[0], session.shapes)
        """The shapes this example's history is written in (:meth:`choose_shape`)."""
        self._begin([])

    def _begin(self, rules: list[RuleCall]) -> None:
        """Start a history on a fresh manager, ``rules`` (the shape chosen) behind it: at the
        start of an example, and where a failure noted while the search goes on left the
        history unlike the model, so the example's remaining steps judge a history the
        manager holds (counted as an example of their own)."""
        self.session.examples += 1
        self.ids = itertools.count(1)
        self.model: list[dict[str, Any]] = []
        self.costs: list[int] = []
        self._digest = RunningDigest(self.session.ignore)
        self.events: list[Any] = []
        self.calls: list[Call] = []
        self.rules: list[RuleCall] = rules
        reply = self._call("reset", "lifecycle")
        if not reply.ok:
            try:
                self._fail("lifecycle", f"building a fresh manager raised {reply.error}", "raises")
            except _ExampleEnds:
                self.ended = True

    # -- bookkeeping -------------------------------------------------------------------------

    def _fail(
        self, property_id: str, message: str, kind: str, *, kept: bool = False, **args: Any
    ) -> None:
        """Raise the property's failure (if it is being checked), with the calls so far.

        A property already judged is not raised again; but if its failure means the stored
        history may no longer follow the model (:data:`DIVERGING`), the example is abandoned
        (rejected): what the manager does next would be judged against a history it does not
        hold, and one bug would be reported under every property. ``kept``: the failure
        leaves the history as it was (a view that raised).

        While the search goes on (:attr:`Session.goes_on`) the failure is noted instead of
        raised, and the step goes on as it does for a property not checked: to its other
        checks, or, where the history may differ from the model, the example's remaining steps
        start again on a fresh manager."""
        session = self.session
        diverged = kind in DIVERGING and not kept
        if property_id not in session.checking:
            if diverged:
                _abandon()
            return
        if not session.goes_on or session.smaller(property_id, (len(self.model), len(self.calls))):
            failure = FAILURES[property_id](
                property_id,
                message,
                calls=list(self.calls),
                check=Check(kind, args),  # type: ignore[arg-type]
                history=len(self.model),
                rules=list(self.rules),
            )
            session.saw(failure)
            if not session.goes_on:
                raise failure
        if diverged:
            raise _ExampleEnds

    def _violated(
        self, found: list[Violation], kind: str, *, suffix: str = "", **args: Any
    ) -> None:
        """Fail with the first violation the check found, if any."""
        if found:
            self._fail(found[0].property, found[0].message + suffix, kind, **args)

    def _call(self, op: str, charge: str, timeout: float | None = None, **args: Any) -> Reply:
        """One worker operation; a hang or a crash stops the search, charged to ``charge``."""
        try:
            return self.session.call(op, timeout, **args)
        except TargetUnusable as exc:
            if self.calls and exc.kind == "timeout":
                self.calls[-1] = replace(self.calls[-1], timeout=timeout or self.session.timeout)
            raise TargetStopped(
                exc, charge=charge, calls=list(self.calls), history=len(self.model)
            ) from None

    def _set_model(self, messages: list[dict[str, Any]]) -> None:
        self.model = list(messages)
        self.costs = [self._cost(m) for m in self.model]
        self._digest = RunningDigest(self.session.ignore)
        for message in self.model:
            self._digest.add(message)
        self._grew()

    def _append(self, message: dict[str, Any]) -> None:
        self.model.append(message)
        self.costs.append(self._cost(message))
        self._digest.add(message)
        self._grew()

    def _grew(self) -> None:
        session = self.session
        session.largest_history = max(session.largest_history, len(self.model))
        session.largest_history_tokens = max(session.largest_history_tokens, sum(self.costs))

    def _note_view(self, view: list[Any]) -> None:
        """Count a view, and whether it was compacted: anything but the whole history, each
        message as a provider reads it (a string and its one text part are the same)."""
        session = self.session
        session.views += 1
        ignore = session.ignore
        if len(view) != len(self.model) or any(
            not isinstance(shown, dict) or semantic(shown, ignore) != semantic(kept, ignore)
            for shown, kept in zip(view, self.model, strict=True)
        ):
            session.compacted_views += 1

    def _model_digest(self) -> str:
        return self._digest.hexdigest()

    def _cost(self, message: Any) -> int:
        try:
            return self.session.count_message(message)
        except Exception:
            return 0

    def _tokens(self, messages: list[Any]) -> int:
        return sum(self._cost(m) for m in messages) + (REPLY_PRIMING if messages else 0)

    def _events(self, reply: Reply) -> None:
        if not self.session.observes_events or not reply.events:
            return
        self.events.extend(reply.events)
        self.session.compaction_events += sum(
            1
            for e in reply.events
            if isinstance(e, list) and e and e[0] in ("context:pre_compact", "context:post_compact")
        )
        self._violated(checks.events(self.events), "events", events=list(self.events))

    def _do(self, call: Call, charge: str, timeout: float | None = None) -> Reply:
        """Make a call (recorded for the reproducer) through its protocol request."""
        self.calls.append(call)
        op, args = call.request()
        return self._call(op, charge, timeout, **args)

    def _history(self, stored_digest: str | None, property_id: str, after: str) -> None:
        """The stored history must equal the model: its digest as the implementation saw it
        says so at once; without one, or when it differs, ``get_messages()`` is asked for and
        compared message by message (a digest is a shortcut, never a verdict)."""
        if stored_digest is not None and stored_digest == self._model_digest():
            return
        stored = self._call("get", "lifecycle")
        if not stored.ok:
            self._fail(property_id, f"get_messages() raised {stored.error} {after}", "raises")
        self._stored(stored.value, property_id, after)

    def _stored(self, stored: Any, property_id: str, after: str) -> None:
        """``stored`` (what ``get_messages()`` returned) must equal the model."""
        found = checks.history(stored, self.model, property_id, self.session.ignore)
        if not found:
            if not self.session.normalized:
                self.session.normalized = normalized(
                    self.model, stored, frozenset(self.session.ignore)
                )
            return
        self._fail(
            property_id,
            f"{found[0].message} ({after})",
            "history",
            expected=list(self.model),
            property=property_id,
        )

    def _add(self, message: dict[str, Any]) -> None:
        reply = self._do(Call("add", message), "lifecycle")
        if not reply.ok:
            self._fail(
                "lifecycle", f"add_message raised {reply.error} for a valid message", "raises"
            )
        self._append(message)
        self._events(reply)
        self._history(reply.digest, "non_destructive", "after add_message")

    def _request_of(self, budget: Budget) -> tuple[Request, int | None]:
        """The request a budget stands for, and the budget the view must fit (None: unknown,
        a request with no budget to a manager whose fallback is not known)."""
        if budget.via == "none":
            return Request(), self.session.fallback_budget
        tokens = budget.resolve(sum(self.costs) + REPLY_PRIMING)
        if budget.via == "provider":
            return Request(
                defaults={"context_window": tokens + 1_000, "max_output_tokens": 1_000}
            ), tokens
        return Request(token_budget=tokens), tokens

    def _essential_tokens(self) -> int:
        """Tokens of what a view may insist on keeping (:func:`essential`). With a budget
        this big, a manager must return a view; below it, raising is fair."""
        return self._tokens(essential(self.model))

    def _request(
        self, budget: Budget, op: str = "request", charge: str = "lifecycle"
    ) -> tuple[Any, Request] | None:
        """Ask for a view and check it; the view, or None if the manager refused (fairly)."""
        request, tokens = self._request_of(budget)
        reply = self._do(Call(op, request), charge)  # type: ignore[arg-type]
        self._events(reply)
        essential = self._essential_tokens()
        feasible = tokens is not None and essential <= tokens
        if not reply.ok:
            if feasible:
                self._fail(
                    "lifecycle",
                    f"get_messages_for_request({request.describe()}) raised {reply.error}, "
                    f"although the system messages, the newest user message and the newest "
                    f"message ({essential} tokens) fit the budget of {tokens}",
                    "raises",
                    kept=True,
                )
            self._refused(reply, request)
            return None
        self._check_view(reply.value, request, tokens if feasible else None)
        self._history(
            reply.digest, "non_destructive", f"after get_messages_for_request({request.describe()})"
        )
        return reply.value, request

    def _refused(self, reply: Reply, request: Request) -> None:
        """A view refused fairly: the reproducer tolerates it, but the history must still be
        whole, since a manager may edit it on the way to giving up."""
        self.calls[-1] = replace(self.calls[-1], tolerated=True)
        self._history(
            reply.digest,
            "non_destructive",
            f"after get_messages_for_request({request.describe()}) raised",
        )

    def _check_view(self, view: Any, request: Request, fits_in: int | None) -> None:
        """Every view: a list, tool pairs whole, history order kept; where a fitting view
        exists (``fits_in``): within the budget, system messages and the newest user message
        kept."""
        session = self.session
        self._violated(checks.is_list(view), "is_list")
        if not isinstance(view, list):
            return
        self._note_view(view)
        self._violated(checks.tool_pairs(view), "tool_pairs")
        self._violated(
            checks.attachments(view, self.model), "attachments", history=list(self.model)
        )
        history = {"history": list(self.model), "allow": session.relax}
        self._violated(
            checks.ordering(view, self.model, session.relax, session.ignore), "ordering", **history
        )
        if fits_in is None:
            return
        where = request.origin()
        self._violated(
            checks.fits(view, fits_in, session.relax, self._cost),
            "fits",
            suffix=f"{where}, though the system messages, the newest user message and the "
            f"newest message ({self._essential_tokens()} tokens) would fit",
            budget=fits_in,
            allow=session.relax,
        )
        self._violated(
            checks.preserved(view, self.model, session.relax, session.ignore),
            "preserved",
            suffix=f", although it fits the budget of {fits_in}{where}",
            **history,
        )

    def _changed(self, reply: Reply, property_id: str, what: str, edited: bool = True) -> None:
        """The stored history must still equal the model; ``what`` begins the sentence. After
        an edit by the caller, the stored history says which part it shares with the caller."""
        if reply.digest is not None and reply.digest == self._model_digest():
            return
        stored = self._call("get", "lifecycle")
        found = (
            checks.history(stored.value, self.model, property_id, self.session.ignore)
            if stored.ok
            else []
        )
        if stored.ok and not found:
            return  # the digest differed in form only
        if not edited:
            shared = found[0].message if found else ""
        else:
            shared = checks.shared_part(self.model, stored.value) if stored.ok else ""
        self._fail(
            property_id,
            f"{what}{': ' + shared if shared else ''}",
            "history",
            expected=list(self.model),
            property=property_id,
        )

    # -- rules -------------------------------------------------------------------------------

    @initialize(shape=st.sampled_from(SHAPES))
    @_recorded
    def choose_shape(self, shape: Shape) -> None:
        """One shape per history (a family for Chat Completions and Anthropic, which have
        always mixed here): the run's shapes all get examples, and none mixes providers."""
        self.shapes = example_shapes(shape, self.session.shapes)

    def start_grown(self, shape: Shape, share: float) -> None:
        """Choose the shape, then give the manager a history of ``share`` of the size at
        which it compacted when grown (:attr:`Session.grown_to`), in one ``set_messages``:
        turns as :meth:`grow_turn` adds them, of at most :data:`GROWN_TURN` tokens, without
        their views. A :class:`SteeredMachine`'s start, recorded as the two rules it runs,
        so that the minimizer can drop each turn a failure does not need."""
        self.choose_shape(shape=shape)
        target, held, turns = int(self.session.grown_to * share), 0, []
        ids = itertools.count(1)  # the turns' sizes, as set_turns will number them
        while held < target:
            turns.append(min(growth_turn_tokens(held, target), GROWN_TURN))
            held += sum(self._cost(m) for m in self._grown_turn(turns[-1], ids))
        self.set_turns(turns=turns)

    @_recorded
    def set_turns(self, turns: list[int]) -> None:
        """Give the manager, in one ``set_messages``, grown turns of these many tokens."""
        self._set([m for tokens in turns for m in self._grown_turn(tokens, self.ids)])

    def _grown_turn(self, tokens: int, ids: Iterator[int]) -> list[dict[str, Any]]:
        ask, work, answer = self._growth_turn(tokens)
        turn = [self._text("user", ask)]
        for template in work:
            turn += template.in_shapes(self.shapes).messages(ids)
        turn.append(self._text("assistant", answer))
        return turn

    def grow_turn(self, tokens: int) -> None:
        """One agent turn that adds about ``tokens`` tokens (:meth:`_growth_turn`), a view
        after each tool round at the manager's own budget. Deterministic, so the size at
        which the target compacts is the same on every run."""
        ask, work, answer = self._growth_turn(tokens)
        self.run_turn(ask=ask, work=work, answer=answer, budget=OWN_BUDGET)

    def _growth_turn(self, tokens: int) -> tuple[str, list[RoundTemplate], str]:
        """A question, two tool rounds whose outputs are the same long log of about
        ``tokens`` tokens in all (an agent reading one file twice), and an answer."""
        session = self.session
        if not session.line_tokens:
            one, many = (
                {"role": "tool", "tool_call_id": "c", "content": GROWTH_LINE * n} for n in (1, 101)
            )
            session.line_tokens = max(1, (self._cost(many) - self._cost(one)) // 100)
        lines = max(1, tokens // 2 // session.line_tokens)
        log = RoundTemplate(self.shapes[0], (GROWTH_LINE * lines,), (0,))
        return "read the service log", [log, log], "ok"

    def _text(self, role: str, content: Any) -> dict[str, Any]:
        return in_shape({"role": role, "content": content}, self.shapes[0])

    def _sendable(self, message: dict[str, Any]) -> bool:
        """A system message goes only into histories whose shape holds one
        (:func:`~ctxkit.conformance.search.conversations.holds_system`)."""
        return message.get("role") != "system" or holds_system(self.shapes)

    @rule(message=plain_messages())
    @_recorded
    def add_message(self, message: dict[str, Any]) -> None:
        if self._sendable(message):
            self._add(in_shape(message, self.shapes[0]))

    @rule(template=round_templates(), budget=budgets())
    @_recorded
    def run_tool_round(self, template: RoundTemplate, budget: Budget) -> None:
        """One agent step: a call and its results, then a view for the next model call."""
        self.add_tool_round(template=template)
        self._request(budget)

    @_recorded
    def add_tool_round(self, template: RoundTemplate) -> None:
        """A call and its results, no view: a step the minimizer may keep on its own."""
        for message in template.in_shapes(self.shapes).messages(self.ids):
            self._add(message)

    @rule(
        ask=texts(),
        work=st.lists(round_templates(), max_size=3),
        answer=texts(),
        budget=budgets(),
    )
    @_recorded
    def run_turn(self, ask: str, work: list[RoundTemplate], answer: str, budget: Budget) -> None:
        """One agent turn: the user asks, tool rounds run, each followed by a view."""
        self._add(self._text("user", ask))
        self._request(budget)
        for template in work:
            self.add_tool_round(template=template)
            self._request(budget)
        self._add(self._text("assistant", answer))

    @rule(budget=budgets())
    @_recorded
    def request_view(self, budget: Budget) -> None:
        self._request(budget)

    @precondition(_checking("determinism"))
    @rule(budget=budgets())
    @_while_open("determinism")
    @_recorded
    def request_view_twice(self, budget: Budget) -> None:
        first = self._request(budget)
        if first is None or not isinstance(first[0], list):
            return
        view, request = first
        again = self._do(Call("request", request, name="again"), "determinism")
        if not again.ok:
            self._fail(
                "determinism",
                f"the same request, asked again with nothing added in between, raised "
                f"{again.error}",
                "raises",
                kept=True,
            )
        self._violated(checks.same_view(view, again.value), "same_view")

    @rule(plan=conversation_plans(max_turns=3))
    @_recorded
    def set_messages(self, plan: Conversation) -> None:
        self._set(plan.messages(self.shapes))

    def _set(self, messages: list[dict[str, Any]]) -> None:
        reply = self._do(Call("set", messages), "lifecycle")
        if not reply.ok:
            self._fail(
                "lifecycle", f"set_messages raised {reply.error} for a valid history", "raises"
            )
        self._set_model(messages)
        self._events(reply)
        self._history(reply.digest, "lifecycle", "after set_messages")

    @rule()
    @_recorded
    def clear_history(self) -> None:
        reply = self._do(Call("clear"), "lifecycle")
        if not reply.ok:
            self._fail("lifecycle", f"clear() raised {reply.error}", "raises")
        self._set_model([])
        self._events(reply)
        self._history(reply.digest, "lifecycle", "after clear()")
        view = self._do(Call("request", Request(token_budget=100_000)), "lifecycle")
        if view.ok:
            self._violated(checks.empty_view(view.value), "empty_view")
        else:
            self.calls[-1] = replace(self.calls[-1], tolerated=True)

    @precondition(_checking("concurrency"))
    @rule(words=st.lists(texts(6), min_size=2, max_size=8))
    @_while_open("concurrency")
    @_recorded
    def add_messages_concurrently(self, words: list[str]) -> None:
        messages = [self._text("user", f"{w} #{k}") for k, w in enumerate(words)]
        reply = self._do(Call("add_concurrently", messages), "concurrency")
        if not reply.ok:
            said = (  # the sentence that counts what raised, or what the single failure was
                reply.message
                if reply.type == "ConcurrentAddsFailed"
                else f"concurrent add_message calls raised {reply.error}"
            )
            self._fail("concurrency", said, "raises")
        stored = self._call("get", "lifecycle")
        if not stored.ok:
            self._fail("non_destructive", f"get_messages() raised {stored.error}", "raises")
        before = list(self.model)
        found = checks.stored_all(stored.value, before, messages, self.session.ignore)
        self._violated(
            found,
            "stored_all",
            suffix=" (after concurrent adds)"
            if found and found[0].property != "concurrency"
            else "",
            before=before,
            added=messages,
        )
        added = _in_stored_order(messages, stored.value[len(before) :], self.session.ignore)
        self._set_model(before + added)
        self._events(reply)

    @precondition(_checking("robustness"))
    @rule()
    @_while_open("robustness")
    @_recorded
    def add_bad_messages(self) -> None:
        """Every bad message of the example's shapes (:func:`bad_messages_of`), one after
        another: each must be refused with an error and leave the history as it was. All of
        them, in a fixed order, so that the same run finds the same failure."""
        for bad in bad_messages_of(self.shapes):
            self.add_bad_message(bad=bad)

    @_recorded
    def add_bad_message(self, bad: BadMessage) -> None:
        reply = self._do(Call("add_bad", bad.value, note=bad.problem), "robustness")
        if reply.ok:
            self._fail(
                "robustness",
                f"add_message accepted {bad.problem} ({bad.value!r}) without an error",
                "refuses",
            )
        self._changed(
            reply,
            "robustness",
            f"add_message of {bad.problem} ({bad.value!r}) changed the history",
            edited=False,
        )

    @precondition(_checking("isolation"))
    @rule(message=plain_messages())
    @_while_open("isolation")
    @_recorded
    def add_message_then_edit(self, message: dict[str, Any]) -> None:
        if not self._sendable(message):
            return
        message = in_shape(message, self.shapes[0])
        reply = self._do(Call("add_then_edit", message), "isolation")
        if not reply.ok:
            self._fail(
                "lifecycle", f"add_message raised {reply.error} for a valid message", "raises"
            )
        self._append(message)
        self._stored(reply.before, "non_destructive", "after add_message")
        self._changed(
            reply, "isolation", "editing a message after passing it to add_message changed it"
        )

    @precondition(_checking("isolation"))
    @rule(plan=conversation_plans(max_turns=2))
    @_while_open("isolation")
    @_recorded
    def set_messages_then_edit(self, plan: Conversation) -> None:
        messages = plan.messages(self.shapes)
        reply = self._do(Call("set_then_edit", messages), "isolation")
        if not reply.ok:
            self._fail(
                "lifecycle", f"set_messages raised {reply.error} for a valid history", "raises"
            )
        self._set_model(messages)
        self._stored(reply.before, "lifecycle", "after set_messages")
        self._changed(
            reply, "isolation", "editing the list passed to set_messages changed the history"
        )

    @precondition(_checking("isolation"))
    @rule(budget=budgets())
    @_while_open("isolation")
    @_recorded
    def request_view_then_edit(self, budget: Budget) -> None:
        request, _tokens = self._request_of(budget)
        reply = self._do(Call("request_then_edit", request), "isolation")
        if not reply.ok:
            self._refused(reply, request)
            return
        self._stored(
            reply.before,
            "non_destructive",
            f"after get_messages_for_request({request.describe()})",
        )
        self._changed(reply, "isolation", "editing a returned view changed the history")
        again = self._do(Call("request", request, name="again"), "isolation")
        if not again.ok:
            self._refused(again, request)
        elif again.value != reply.value:
            self._violated(checks.not_edited(again.value), "not_edited")

    @precondition(_checking("isolation"))
    @rule()
    @_while_open("isolation")
    @_recorded
    def get_messages_then_edit(self) -> None:
        reply = self._do(Call("get_then_edit"), "isolation")
        if not reply.ok:
            self._fail("lifecycle", f"get_messages() raised {reply.error}", "raises")
        self._changed(
            reply, "isolation", "editing what get_messages() returned changed the history"
        )


def _in_stored_order(
    added: list[dict[str, Any]], stored: list[Any], ignore: frozenset[str]
) -> list[dict[str, Any]]:
    """The messages added concurrently, in the order the manager stored them: any order is
    right for concurrent adds, and the history is judged against that order from then on.
    Each stored message is matched to the added one it is equal to as a provider reads it,
    in whatever shape the example is written."""
    left = [dict(m) for m in added]
    ordered = []
    for message in stored:
        if not isinstance(message, dict):
            continue
        read = semantic(message, ignore)
        found = next((m for m in left if semantic(m, ignore) == read), None)
        if found is not None:
            left.remove(found)
            ordered.append(found)
    return ordered + left


def essential(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a view may insist on keeping: system messages, the newest user message, and the
    newest message with the call it answers."""
    must = [m for m in history if m.get("role") == "system"]
    newest = newest_user_message(history)
    if newest is not None:
        must.append(history[newest])
    must.extend(_last_unit(history))
    return must


def _last_unit(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest message, and back to the assistant message that called it if it is a result
    (with the parallel call items and the reasoning item before them, in Responses items)."""
    if not history:
        return []
    start = len(history) - 1
    while start > 0 and is_result(history[start]):
        start -= 1
    if is_call_item(history[start]):
        while start > 0 and (
            is_call_item(history[start - 1]) or reasoning_id(history[start - 1]) is not None
        ):
            start -= 1
    return history[start:]


class SteeredMachine(ConformanceMachine):
    """The machine whose examples each begin with a history grown near the size at which the
    target compacts (:attr:`Session.grown_to`), for a target that never compacted in the
    histories a search reaches on its own: its rules then run where it compacts."""

    def choose_shape(self, shape: Shape) -> None:  # not a rule here: start_grown chooses
        super().choose_shape(shape=shape)

    # Not rules here: each would throw away the grown start, and the example would run its
    # remaining steps on a small history, where the first search has already been.
    def set_messages(self, plan: Conversation) -> None:
        super().set_messages(plan=plan)

    def clear_history(self) -> None:
        super().clear_history()

    def set_messages_then_edit(self, plan: Conversation) -> None:
        super().set_messages_then_edit(plan=plan)

    start_grown = initialize(shape=st.sampled_from(SHAPES), share=st.sampled_from(GROWN_SHARES))(
        ConformanceMachine.start_grown
    )
