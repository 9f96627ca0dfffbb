"""Make a counterexample smaller after Hypothesis has shrunk it: delete steps while the same
property still fails.

Hypothesis shrinks the choices it drew, within a time limit; what is left often still holds
steps the failure does not need (a turn of three tool rounds where one would do, a clear, an
earlier view). Here the failing run's rules are replayed in the worker, first spread into the
smallest steps that keep each tool call with its results, then deleted in ever smaller chunks
(delta debugging); a deletion is kept when the same property still fails with no larger a
history. Then the lists inside the steps left (a conversation given to ``set_messages``,
messages added at once) lose what they can the same way. Each replay is bounded by the
operation timeout and the run's deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis.errors import UnsatisfiedAssumption

from ctxkit.conformance.machine import (
    ConformanceMachine,
    PropertyFailure,
    RuleCall,
    Session,
    TargetStopped,
)
from ctxkit.conformance.strategies import Conversation, RoundTemplate

__all__ = ["minimize", "replay", "spread"]


def spread(rules: list[RuleCall]) -> list[RuleCall]:
    """The same calls as smaller rules: a turn becomes its user message, its views, its tool
    rounds and its answer, so each can go on its own."""
    found: list[RuleCall] = []
    for name, args in rules:
        if name == "run_turn":
            found.append(("add_message", {"message": {"role": "user", "content": args["ask"]}}))
            found.append(("request_view", {"budget": args["budget"]}))
            found.extend(
                ("run_tool_round", {"template": template, "budget": args["budget"]})
                for template in args["work"]
            )
            found.append(
                ("add_message", {"message": {"role": "assistant", "content": args["answer"]}})
            )
        elif name == "run_tool_round":
            found.append(("add_tool_round", {"template": args["template"]}))
            found.append(("request_view", {"budget": args["budget"]}))
        else:
            found.append((name, args))
    return found


def replay(session: Session, rules: list[RuleCall], property_id: str) -> PropertyFailure | None:
    """Run ``rules`` on a fresh manager, checking only ``property_id``; its failure, if any.

    A hang or crash on the way is no evidence: None, and the caller restarts the worker.
    """
    saved = session.checking
    session.checking = frozenset({property_id})
    try:
        machine = ConformanceMachine(session)
        for name, args in rules:
            getattr(machine, name)(**args)
    except PropertyFailure as failure:
        return failure if failure.property_id == property_id else None
    except UnsatisfiedAssumption:
        return None  # another failure changed the history first: no evidence either way
    finally:
        session.checking = saved
    return None


def minimize(
    session: Session, failure: PropertyFailure, restart: Callable[[], Any]
) -> PropertyFailure:
    """The smallest failure of the same property found by deleting steps (see the module
    docstring). Raises :class:`~ctxkit.conformance.machine.DeadlineReached` if time runs out
    (the caller keeps what it had)."""
    property_id = failure.property_id
    best = failure

    def attempt(rules: list[RuleCall]) -> PropertyFailure | None:
        try:
            found = replay(session, rules, property_id)
        except TargetStopped:
            restart()
            return None
        if found is not None and found.history <= best.history:
            return found
        return None

    rules = spread(failure.rules)
    found = attempt(rules)
    if found is None:
        return failure  # the failure does not repeat when replayed: keep it as it was seen
    best = found

    def keeps_failing(candidate: list[RuleCall]) -> bool:
        nonlocal best
        found = attempt(candidate)
        if found is not None:
            best = found
        return found is not None

    rules = _delete(rules, keeps_failing)
    for index in range(len(rules)):
        for key, parts in _lists_in(rules[index][1]):
            name, args = rules[index]

            def fewer_fail(items: list[Any], index=index, name=name, args=args, key=key) -> bool:
                changed = (name, _with(args, key, items))
                return keeps_failing([*rules[:index], changed, *rules[index + 1 :]])

            rules[index] = (name, _with(args, key, _delete(parts, fewer_fail)))
    best.note = failure.note
    return best


def _delete(items: list[Any], keeps_failing: Callable[[list[Any]], bool]) -> list[Any]:
    """Delta debugging: drop chunks of ``items``, halving the chunk size when none can go."""
    chunk = max(1, len(items) // 2)
    while items:
        start, removed = 0, False
        while start < len(items):
            candidate = items[:start] + items[start + chunk :]
            if keeps_failing(candidate):
                items, removed = candidate, True
            else:
                start += chunk
        if chunk == 1 and not removed:
            break
        if not removed:
            chunk = max(1, chunk // 2)
    return items


def _lists_in(args: dict[str, Any]) -> list[tuple[str, list[Any]]]:
    """A rule's arguments that are lists of things a failure may not need: the parts of a
    conversation given to set_messages, the parallel calls of a tool round, the messages
    added at once."""
    found: list[tuple[str, list[Any]]] = []
    for key, value in args.items():
        if isinstance(value, Conversation):
            found.append((key, list(value.parts)))
        elif isinstance(value, RoundTemplate) and len(value.outputs) > 1:
            found.append((key, list(range(len(value.outputs)))))
        elif isinstance(value, list) and len(value) > 1:
            found.append((key, list(value)))
    return found


def _with(args: dict[str, Any], key: str, items: list[Any]) -> dict[str, Any]:
    """The rule's arguments with ``key`` down to ``items`` (for a tool round: the indices of
    the parallel calls kept, its results in the order they came)."""
    value = args[key]
    if isinstance(value, Conversation):
        return {**args, key: Conversation(tuple(items))}
    if isinstance(value, RoundTemplate):
        outputs = tuple(value.outputs[i] for i in items)
        order = tuple(items.index(i) for i in value.order if i in items)
        return {**args, key: RoundTemplate(value.shape, outputs, order)}
    return {**args, key: items}
