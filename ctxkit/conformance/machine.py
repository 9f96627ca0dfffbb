"""The Hypothesis state machine that drives a target and checks every property after each step.

The model is a plain list of the messages added. Each rule is one thing an agent loop does
(add a message, add a tool round, ask for a view, replace or clear the history, add from many
tasks at once, pass bad input, edit what it got back), performed in the worker process. After
each, the invariants run on what came back. A violation raises an exception of its property's
own type, so Hypothesis shrinks each property's failure separately.
"""

from __future__ import annotations

import itertools
import json
import pprint
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from ctxkit.conformance.child import Child, Reply
from ctxkit.conformance.invariants import (
    check_events,
    check_lifecycle,
    check_non_destructive,
    check_ordering,
    check_preservation,
    check_tool_pairs,
    is_result,
    newest_user_message,
)
from ctxkit.conformance.properties import PROPERTIES
from ctxkit.conformance.strategies import (
    BadMessage,
    Budget,
    RoundTemplate,
    bad_messages,
    budgets,
    conversations,
    plain_messages,
    round_templates,
    texts,
)
from ctxkit.conformance.worker import digest
from ctxkit.tokens import REPLY_PRIMING as PRIMING

__all__ = ["FAILURES", "PropertyFailure", "Relaxations", "Session", "make_machine"]


class Lit:
    """A value to show as a Python literal in a reproducer, rendered only if one is needed."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


Code = tuple[Any, ...]
"""Script text as parts: strings, and :class:`Lit` values rendered as Python literals."""


def render(code: Code) -> str:
    """Script text; a long literal goes on lines of its own, indented."""
    parts = []
    for part in code:
        if not isinstance(part, Lit):
            parts.append(part)
            continue
        text = repr(part.value)
        if len(text) > 80:
            text = "\n" + textwrap.indent(_literal(part.value), "    ") + "\n"
        parts.append(text)
    return "".join(parts)


class PropertyFailure(AssertionError):
    """A property does not hold. Carries the steps that show it, as script code."""

    def __init__(
        self, property_id: str, message: str, *, steps: list[Code], check: Code, history: int
    ) -> None:
        super().__init__(f"{property_id}: {message}")
        self.property_id = property_id
        self.message = message
        self.step_code = steps
        self.check_code = check
        self.history = history

    @property
    def steps(self) -> list[str]:
        """The calls that lead to the failure, as Python lines."""
        return [render(code) for code in self.step_code]

    @property
    def check(self) -> str:
        """The lines that show the failure after the steps."""
        return render(self.check_code)


def _failure_type(property_id: str) -> type[PropertyFailure]:
    name = "".join(part.title() for part in property_id.split("_")) + "Failure"
    return type(name, (PropertyFailure,), {"__module__": __name__})


FAILURES = {p.id: _failure_type(p.id) for p in PROPERTIES}


@dataclass(frozen=True)
class Relaxations:
    """What ``--allow`` relaxed (see :data:`ctxkit.conformance.properties.RELAXATIONS`)."""

    hoisted_system: bool = False
    dropped_system: bool = False
    budget_tolerance: float = 0.0


@dataclass
class Session:
    """What every example of one run shares: the worker, the counter, what is checked."""

    child: Child
    count_message: Callable[[dict[str, Any]], int]
    checking: set[str]
    relax: Relaxations
    ignore: frozenset[str]
    observes_events: bool
    on_step: Callable[[], None] = lambda: None
    started: float = field(default_factory=time.monotonic)
    first_failure: dict[str, float] = field(default_factory=dict)
    examples: int = 0
    steps: int = 0

    def call(self, op: str, **args: Any) -> Reply:
        self.steps += 1
        self.on_step()
        return self.child.call(op, **args)


def _literal(value: Any) -> str:
    return pprint.pformat(value, width=96, sort_dicts=False)


def _without_system(messages: list[Any]) -> list[Any]:
    return [m for m in messages if not (isinstance(m, dict) and m.get("role") == "system")]


def make_machine(
    session: Session, shapes: tuple[str, ...] = ("openai", "anthropic")
) -> type[RuleBasedStateMachine]:
    """A state machine class bound to one session; its strategies use only ``shapes``."""
    rounds = round_templates(shapes)  # type: ignore[arg-type]

    class ConformanceMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            session.examples += 1
            self.ids = itertools.count(1)
            self.model: list[dict[str, Any]] = []
            self.costs: list[int] = []
            self._digest: str | None = None
            self.events: list[Any] = []
            self.steps: list[Code] = []
            reply = session.call("build")
            if not reply.ok:
                self._fail("lifecycle", f"building a fresh manager raised {reply.error}")

        # -- bookkeeping -----------------------------------------------------------------

        def _fail(self, property_id: str, message: str, *check: Any) -> None:
            if property_id not in session.checking:
                return
            session.first_failure.setdefault(property_id, time.monotonic() - session.started)
            raise FAILURES[property_id](
                property_id, message, steps=list(self.steps), check=check, history=len(self.model)
            )

        def _set_model(self, messages: list[dict[str, Any]]) -> None:
            self.model = list(messages)
            self.costs = [self._cost(m) for m in self.model]
            self._digest = None

        def _append(self, message: dict[str, Any]) -> None:
            self.model.append(message)
            self.costs.append(self._cost(message))
            self._digest = None

        def _model_digest(self) -> str:
            """The model's digest, computed once per change of the model, not once per check."""
            if self._digest is None:
                self._digest = digest(self.model, session.ignore)
            return self._digest

        @staticmethod
        def _cost(message: Any) -> int:
            try:
                return session.count_message(message)
            except Exception:
                return 0

        def _tokens(self, messages: list[Any]) -> int:
            return sum(self._cost(m) for m in messages) + (PRIMING if messages else 0)

        def _events(self, reply: Reply) -> None:
            if not session.observes_events or not reply.events:
                return
            self.events.extend(reply.events)
            problems = check_events([(name, data) for name, data in self.events])
            if problems:
                self._fail(
                    "events",
                    problems[0].message,
                    "# events emitted so far: ",
                    Lit(list(self.events)),
                )

        def _history(self, reply: Reply, property_id: str, after: str) -> None:
            """The stored history must equal the model; otherwise say how it differs."""
            if reply.digest == self._model_digest():
                return
            stored = session.call("get")
            if not stored.ok:
                self._fail(property_id, f"get_messages() raised {stored.error} {after}")
            checker = check_lifecycle if property_id == "lifecycle" else check_non_destructive
            problems = checker(self.model, stored.value, session.ignore)
            message = problems[0].message if problems else "get_messages() changed"
            self._fail(
                property_id,
                f"{message} ({after})",
                "history = ",
                Lit(list(self.model)),
                f"\nproblems = {checker.__name__}(history, await manager.get_messages(), "
                f"{set(session.ignore)!r})\nassert not problems, problems",
            )

        def _add(self, message: dict[str, Any]) -> None:
            self.steps.append(("await manager.add_message(", Lit(message), ")"))
            reply = session.call("add", message=message)
            if not reply.ok:
                self._fail(
                    "lifecycle",
                    f"add_message raised {reply.error} for a valid message",
                    "# the last call raised",
                )
            self._append(message)
            self._events(reply)
            self._history(reply, "non_destructive", "after add_message")

        def _budget_args(self, budget: Budget) -> tuple[int, dict[str, Any], str]:
            tokens = budget.resolve(sum(self.costs) + PRIMING)
            if budget.via_provider:
                defaults = {"context_window": tokens + 1_000, "max_output_tokens": 1_000}
                return (
                    tokens,
                    {"budget": None, "defaults": defaults},
                    f"provider=Provider({defaults!r})",
                )
            return tokens, {"budget": tokens, "defaults": None}, f"token_budget={tokens}"

        def _essential_tokens(self) -> int:
            """Tokens of what a view may insist on keeping: system messages, the newest user
            message, and the newest message with the call it answers. With a budget this big,
            a manager must return a view; below it, raising is fair."""
            must = [m for m in self.model if m.get("role") == "system"]
            newest = newest_user_message(self.model)
            if newest is not None:
                must.append(self.model[newest])
            must.extend(_last_unit(self.model))
            return self._tokens(must)

        def _request(self, budget: Budget, op: str = "request") -> tuple[Any, int, str] | None:
            tokens, args, call = self._budget_args(budget)
            self.steps.append((f"view = await manager.get_messages_for_request({call})",))
            reply = session.call(op, **args)
            self._events(reply)
            feasible = self._essential_tokens() <= tokens
            if not reply.ok:
                if feasible:
                    self._fail(
                        "lifecycle",
                        f"get_messages_for_request({call}) raised {reply.error}, although the "
                        f"system messages and the newest user message "
                        f"({self._essential_tokens()} tokens) fit the budget of {tokens}",
                        "# the last call raised",
                    )
                return None
            self._check_view(reply.value, tokens, feasible)
            self._history(reply, "non_destructive", f"after get_messages_for_request({call})")
            return reply.value, tokens, call

        def _check_view(self, view: Any, budget: int, feasible: bool) -> None:
            history_line = ("history = ", Lit(list(self.model)), "\n")
            if not isinstance(view, list):
                self._fail(
                    "lifecycle", f"get_messages_for_request returned a {type(view).__name__}"
                )
                return
            problems = check_tool_pairs(view)
            if problems:
                self._fail(
                    "tool_pair_integrity",
                    problems[0].message,
                    "problems = check_tool_pairs(view)\nassert not problems, problems",
                )
            ordered_history, ordered_view = self.model, view
            if session.relax.hoisted_system:
                ordered_history, ordered_view = _without_system(self.model), _without_system(view)
            problems = check_ordering(ordered_history, ordered_view, session.ignore)
            if problems:
                self._fail(
                    "ordering",
                    problems[0].message,
                    *history_line,
                    "problems = check_ordering(history, view)\nassert not problems, problems",
                )
            if not feasible:
                return
            tokens = self._tokens(view)
            limit = budget * (1 + session.relax.budget_tolerance)
            if tokens > limit:
                self._fail(
                    "budget",
                    f"the view has {tokens} tokens, over the budget of {budget}"
                    + (
                        f" (+{session.relax.budget_tolerance:.0%} allowed)"
                        if session.relax.budget_tolerance
                        else ""
                    )
                    + f", though {self._essential_tokens()} tokens of system messages and the "
                    "newest user message would fit",
                    f"assert TokenCounter().count_messages(view) <= {budget}",
                )
            problems = check_preservation(self.model, view, session.ignore)
            if session.relax.dropped_system:
                problems = [p for p in problems if "system message" not in p.message]
            if problems:
                self._fail(
                    "preservation",
                    problems[0].message + f" although it fits the budget of {budget}",
                    *history_line,
                    "problems = check_preservation(history, view)\nassert not problems, problems",
                )

        # -- rules -----------------------------------------------------------------------

        @rule(message=plain_messages())
        def add_message(self, message: dict[str, Any]) -> None:
            self._add(message)

        @rule(template=rounds, budget=budgets())
        def run_tool_round(self, template: RoundTemplate, budget: Budget) -> None:
            """One agent step: a call and its results, then a view for the next model call."""
            for message in template.messages(self.ids):
                self._add(message)
            self._request(budget)

        @rule(ask=texts(), work=st.lists(rounds, max_size=3), answer=texts(), budget=budgets())
        def run_turn(
            self, ask: str, work: list[RoundTemplate], answer: str, budget: Budget
        ) -> None:
            """One agent turn: the user asks, tool rounds run, each followed by a view."""
            self._add({"role": "user", "content": ask})
            self._request(budget)
            for template in work:
                for message in template.messages(self.ids):
                    self._add(message)
                self._request(budget)
            self._add({"role": "assistant", "content": answer})

        @rule(budget=budgets())
        def request_view(self, budget: Budget) -> None:
            self._request(budget)

        @precondition(lambda self: "determinism" in session.checking)
        @rule(budget=budgets())
        def request_view_twice(self, budget: Budget) -> None:
            first = self._request(budget)
            if first is None:
                return
            view, _tokens, call = first
            second = self._request(budget)
            if second is not None and second[0] != view:
                self._fail(
                    "determinism",
                    f"two requests with nothing added in between gave different views: "
                    f"{_difference(view, second[0])}",
                    f"again = await manager.get_messages_for_request({call})\nassert again == view",
                )

        @rule(messages=conversations(max_turns=3))
        def set_messages(self, messages: list[dict[str, Any]]) -> None:
            self.steps.append(("await manager.set_messages(", Lit(list(messages)), ")"))
            reply = session.call("set", messages=messages)
            if not reply.ok:
                self._fail(
                    "lifecycle",
                    f"set_messages raised {reply.error} for a valid history",
                    "# the last call raised",
                )
            self._set_model(messages)
            self._events(reply)
            self._history(reply, "lifecycle", "after set_messages")

        @rule()
        def clear_history(self) -> None:
            self.steps.append(("await manager.clear()",))
            reply = session.call("clear")
            if not reply.ok:
                self._fail("lifecycle", f"clear() raised {reply.error}", "# the last call raised")
            self._set_model([])
            self._events(reply)
            self._history(reply, "lifecycle", "after clear()")
            self.steps.append(
                ("view = await manager.get_messages_for_request(token_budget=100000)",)
            )
            view = session.call("request", budget=100_000, defaults=None)
            if view.ok and isinstance(view.value, list) and view.value:
                self._fail(
                    "lifecycle",
                    f"after clear(), a view still holds {len(view.value)} messages",
                    "assert view == []",
                )

        @precondition(lambda self: "concurrency" in session.checking)
        @rule(words=st.lists(texts(6), min_size=2, max_size=8))
        def add_messages_concurrently(self, words: list[str]) -> None:
            messages = [{"role": "user", "content": f"{w} #{k}"} for k, w in enumerate(words)]
            self.steps.append(
                ("await asyncio.gather(*(manager.add_message(m) for m in ", Lit(messages), "))")
            )
            reply = session.call("add_concurrently", messages=messages)
            if not reply.ok:
                self._fail(
                    "concurrency",
                    f"concurrent add_message calls raised {reply.error}",
                    "# the last call raised",
                )
            stored = session.call("get")
            if not stored.ok or not isinstance(stored.value, list):
                self._fail("non_destructive", f"get_messages() raised {stored.error}")
            head, tail = stored.value[: len(self.model)], stored.value[len(self.model) :]
            problems = check_non_destructive(self.model, head, session.ignore)
            if problems:
                self._fail("non_destructive", problems[0].message + " (after concurrent adds)")
            wanted = sorted(json.dumps(m, sort_keys=True) for m in messages)
            strip = [{k: v for k, v in m.items() if k not in session.ignore} for m in tail]
            got = sorted(json.dumps(m, sort_keys=True) for m in strip)
            if got != wanted:
                lost = len(set(wanted) - set(got))
                self._fail(
                    "concurrency",
                    f"{len(messages)} concurrent add_message calls stored {len(tail)} messages"
                    + (f"; {lost} were lost" if lost else "; some were stored twice"),
                    "assert len(await manager.get_messages()) == "
                    f"{len(self.model) + len(messages)}",
                )
            self._set_model(self.model + [dict(m) for m in messages])
            self._events(reply)

        @precondition(lambda self: "robustness" in session.checking)
        @rule(bad=bad_messages())
        def add_bad_message(self, bad: BadMessage) -> None:
            self.steps.append(
                (f"await manager.add_message({bad.value!r})  # {bad.problem}: must raise",)
            )
            reply = session.call("add_bad", message=bad.value)
            if reply.ok and reply.value is None:
                self._fail(
                    "robustness",
                    f"add_message accepted {bad.problem} ({bad.value!r}) without an error",
                    "# the last call should have raised",
                )
            if reply.digest != self._model_digest():
                self._fail(
                    "robustness",
                    f"add_message of {bad.problem} ({bad.value!r}) changed the history",
                    "assert await manager.get_messages() == ",
                    Lit(list(self.model)),
                )

        @precondition(lambda self: "isolation" in session.checking)
        @rule(message=plain_messages())
        def add_message_then_edit(self, message: dict[str, Any]) -> None:
            self.steps.append(
                (
                    "message = ",
                    Lit(message),
                    "\nawait manager.add_message(message)\n"
                    "edit_in_place(message)  # the caller reuses its dict",
                )
            )
            reply = session.call("add_then_edit", message=message)
            if not reply.ok:
                self._fail("lifecycle", f"add_message raised {reply.error} for a valid message")
            self._append(message)
            if reply.value != self._model_digest():
                self._history(reply, "non_destructive", "after add_message")
            if reply.digest != self._model_digest():
                self._fail(
                    "isolation",
                    "editing a message after passing it to add_message changed the stored "
                    "history: the manager keeps the caller's dict",
                    "assert await manager.get_messages() == ",
                    Lit(list(self.model)),
                )

        @precondition(lambda self: "isolation" in session.checking)
        @rule(budget=budgets())
        def request_view_then_edit(self, budget: Budget) -> None:
            _tokens, args, call = self._budget_args(budget)
            self.steps.append(
                (
                    f"view = await manager.get_messages_for_request({call})\n"
                    "edit_in_place(view)  # the caller edits what it got",
                )
            )
            reply = session.call("request_then_edit", **args)
            if not reply.ok:
                return
            if reply.digest != self._model_digest():
                self._fail(
                    "isolation",
                    "editing a returned view changed the stored history: the view shares "
                    "lists or dicts with it",
                    "assert await manager.get_messages() == ",
                    Lit(list(self.model)),
                )
            again = session.call("request", **args)
            if again.ok and again.value != reply.value and "EDITED" in json.dumps(again.value):
                self._fail(
                    "isolation",
                    "editing a returned view changed the next view: views share lists or dicts",
                    f"again = await manager.get_messages_for_request({call})\n"
                    "assert 'EDITED' not in repr(again)",
                )

        @precondition(lambda self: "isolation" in session.checking)
        @rule()
        def get_messages_then_edit(self) -> None:
            self.steps.append(
                (
                    "history = await manager.get_messages()\n"
                    "edit_in_place(history)  # the caller edits what it got",
                )
            )
            reply = session.call("get_then_edit")
            if reply.ok and reply.digest != self._model_digest():
                self._fail(
                    "isolation",
                    "editing the list get_messages() returned changed the stored history",
                    "assert await manager.get_messages() == ",
                    Lit(list(self.model)),
                )

    return ConformanceMachine


def _last_unit(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest message, and back to the assistant message that called it if it is a result."""
    if not history:
        return []
    start = len(history) - 1
    while start > 0 and is_result(history[start]):
        start -= 1
    return history[start:]


def _difference(first: list[Any], second: list[Any]) -> str:
    if len(first) != len(second):
        return f"{len(first)} messages, then {len(second)}"
    for index, (a, b) in enumerate(zip(first, second, strict=True)):
        if a != b:
            return f"view[{index}] was {a!r:.80} then {b!r:.80}"
    return "they differ"
