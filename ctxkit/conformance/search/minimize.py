"""Make a counterexample smaller after Hypothesis has shrunk it: delete steps while the same
property still fails, then give its views the largest budget that still fails.

Hypothesis shrinks the choices it drew, within a time limit; what is left often still holds
steps the failure does not need (a turn of three tool rounds where one would do, a clear, an
earlier view). Here the failing run's rules are replayed in the worker, first spread into the
smallest steps that keep each tool call with its results, then deleted in ever smaller chunks
(delta debugging); a deletion is kept when the same property still fails with no larger a
history. Then the lists inside the steps left (a conversation given to ``set_messages``,
messages added at once) lose what they can the same way.

Last, :class:`CallShrinker` works on what the reproducer shows, its calls: each call is
deleted while the calls left, replayed in the worker and followed by the failed check, still
fail it (one at a time at the end, so no call of the result can go); then each call that
edits what it passed or got back is made a plain call where the edit is not needed; then each
view's budget
is raised by a binary search to the largest that still fails. A view asked with two tokens
reads as an unrealistic corner; the same bug at the largest budget that shows it reads as
the bug it is. Each replay is bounded by the operation timeout and the run's deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis.errors import UnsatisfiedAssumption

from ctxkit.conformance.judge import step_checks as checks
from ctxkit.conformance.judge.invariants import Violation
from ctxkit.conformance.judge.steps import Call, Check, Request
from ctxkit.conformance.search.conversations import Conversation, RoundTemplate
from ctxkit.conformance.search.machine import (
    ConformanceMachine,
    DeadlineReached,
    PropertyFailure,
    RuleCall,
    Session,
    TargetStopped,
    _in_stored_order,
    essential,
)
from ctxkit.conformance.targets.worker_client import TargetUnusable
from ctxkit.tokens import REPLY_PRIMING

__all__ = [
    "LARGEST_BUDGET",
    "NOT_REPEATED",
    "CallShrinker",
    "budget_of",
    "minimize",
    "replay",
    "spread",
    "with_budget",
]

NOT_REPEATED = (
    "seen once; it did not repeat when the same calls were replayed: the target answers the "
    "same calls differently"
)

LARGEST_BUDGET = 1_000_000
"""The largest budget a view is raised to: a million-token context window, the largest
models'. A failure that holds even there does not depend on the budget."""


_PLAIN_VIEWS = frozenset({"request_view", "request_view_twice"})
"""Rules that only ask for a view. Before deleting steps chunk by chunk, one replay keeps only
the last of them: a fault that shows past 40 messages is seen at its last view, and its earlier
views, one per tool round, are each deleted on their own otherwise (LateSplitter: 186 replays
of the whole history)."""


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
    """Run ``rules`` on a fresh manager, checking only ``property_id``, the way the search ran
    them: each failure noted and the run going on (:attr:`Session.goes_on`), so a failure
    seen late in an example repeats though an earlier, larger one comes first. The smallest
    failure, if any.

    A hang or crash on the way is no evidence: None, and the caller restarts the worker.
    """
    saved = (session.checking, session.goes_on, session.smallest, session.first_failure)
    session.checking = frozenset({property_id})
    session.goes_on, session.smallest, session.first_failure = True, {}, {}
    on_failure, session.on_failure = session.on_failure, lambda _property_id: None
    try:
        machine = ConformanceMachine(session)
        for name, args in rules:
            getattr(machine, name)(**args)
    except UnsatisfiedAssumption:
        pass  # another failure changed the history: what was seen before it stands
    finally:
        found = session.smallest.get(property_id)
        session.checking, session.goes_on, session.smallest, session.first_failure = saved
        session.on_failure = on_failure
    return found


def minimize(
    session: Session, failure: PropertyFailure, restart: Callable[[], Any]
) -> PropertyFailure:
    """The smallest failure of the same property found by deleting steps (see the module
    docstring). When the session's deadline comes, the smallest failure found so far; raises
    :class:`~ctxkit.conformance.search.machine.DeadlineReached` only when it comes before the
    failure was seen again (the caller keeps what it had)."""
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
    if found is None:  # keep it as it was seen, and say so
        failure.note = failure.note or NOT_REPEATED
        return failure
    best = found

    def keeps_failing(candidate: list[RuleCall]) -> bool:
        nonlocal best
        found = attempt(candidate)
        if found is not None:
            best = found
        return found is not None

    views = [i for i, (name, _) in enumerate(rules) if name in _PLAIN_VIEWS]
    try:
        if len(views) > 2:  # one try first: a long failure rarely needs its earlier views
            fewer = [rule for i, rule in enumerate(rules) if i not in views[:-1]]
            if keeps_failing(fewer):
                rules = fewer
        rules = _delete(rules, keeps_failing)
        for index in range(len(rules)):
            for key, parts in _lists_in(rules[index][1]):
                name, args = rules[index]

                def fewer_fail(
                    items: list[Any], index=index, name=name, args=args, key=key
                ) -> bool:
                    changed = (name, _with(args, key, items))
                    return keeps_failing([*rules[:index], changed, *rules[index + 1 :]])

                rules[index] = (name, _with(args, key, _delete(parts, fewer_fail)))
    except DeadlineReached:
        pass  # its time is up: the smallest failure found so far stands
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


PLAIN: dict[str, Any] = {
    "add_then_edit": "add",
    "set_then_edit": "set",
    "request_then_edit": "request",
}
"""The plain call each editing call stands for."""


PLAIN_EXCESS = 1.5
"""A view this many times the smallest budget its history allows (what :func:`essential`
keeps) is a manager that ignores the budget; its failure is shown at that budget, with as few
calls as keep the view that far over it ("at a budget of 120 the view has 2,187 tokens"),
not raised to the largest budget that still fails, which reads like rounding ("at a budget of
44 the view has 45 tokens")."""


class CallShrinker:
    """A failure's calls made as few as they can be, then its views' budgets as large (see
    the module docstring). ``best`` is the smallest failure found so far: what stands when the
    deadline (:class:`~ctxkit.conformance.search.machine.DeadlineReached`) ends the work early.

    A failure that is a hang is left as it is: each replay would wait out the timeout. A
    crash is shrunk like any other failure, each replay that crashes costing a restart; the
    calls left still end the process with the same status (``Check.args["status"]``).
    """

    def __init__(
        self, session: Session, failure: PropertyFailure, restart: Callable[[], Any]
    ) -> None:
        self.session = session
        self.best = failure
        self.restart = restart
        self._plain = False
        """A budget failure shown at the smallest budget its history allows
        (:data:`PLAIN_EXCESS`)."""
        self._seen: _Seen | None = None
        """What the last replay saw."""
        self._suffix: Callable[[list[Call], bool], str] | None = None
        """What follows the check's own sentence in the failure's message, for the calls
        left; empty when the run said another violation first (the message is then the one the
        script's check shows); None until :meth:`run` has read the check."""

    def run(self) -> PropertyFailure:
        """Shrink, then raise the budgets; ``best`` as it ends."""
        if self.best.check.kind == "returns" or not self.best.calls:
            return self.best
        found = self._holds(list(self.best.calls))
        if found is None:
            return self.best  # the calls alone do not fail: keep the failure as it was seen
        check, message, raised = found
        if self.best.message.startswith(message):  # the check's sentence, then the run's words
            self._suffix = _suffix_of(check.kind, self.best.message[len(message) :])
        else:  # the run said another violation first: say the one the script's check shows
            self._suffix = lambda _calls, _raised: ""
            self._take(list(self.best.calls), check, message, raised)
        if self.best.check.kind == "fits" and self._asked_budget(self.best.calls):
            suffix, self._suffix, self._plain = self._suffix, _at_floor_suffix, True
            if not self._keeps_failing(list(self.best.calls)):
                self._suffix, self._plain = suffix, False
        _delete(list(self.best.calls), self._keeps_failing)
        self._plain_calls()
        self._shorten_texts()
        if not self._plain:
            self._raise_budgets()
        return self.best

    def _plain_calls(self) -> None:
        """Each call that edits what it passed or got back (``add_then_edit``, ...) made a
        plain call, where the failure does not need the edit: a reorder's reproducer shows
        no ``edit_in_place`` after each add."""
        for index in range(len(self.best.calls)):
            call = self.best.calls[index]
            plain = PLAIN.get(call.op)
            if plain is not None:
                calls = list(self.best.calls)
                calls[index] = replace(call, op=plain)
                self._keeps_failing(calls)

    # -- deleting calls -------------------------------------------------------------------------

    def _keeps_failing(self, calls: list[Call]) -> bool:
        if not _whole_pairs(calls):
            return False
        if self._plain:
            calls = self._at_floor(calls)
        found = self._holds(calls)
        if found is None or (self._plain and not self._plainly_over(found[0])):
            return False
        check, message, raised = found
        self._take(calls, check, message, raised)
        return True

    def _take(self, calls: list[Call], check: Check, message: str, raised: bool) -> None:
        """``calls`` are the smallest failure yet; ``raised``: the last of them was refused."""
        best = self.best
        history = len(_model_before(calls, len(calls)))
        if self._suffix is not None:
            message += self._suffix(calls, raised)
        found = type(best)(
            best.property_id, message, calls=calls, check=check, history=history, rules=best.rules
        )
        found.note = best.note
        self.best = found

    # -- shorter texts -------------------------------------------------------------------------

    def _shorten_texts(self) -> None:
        """The longest texts the calls pass (a message's content, a text part, a tool
        output), each halved while the failure holds: a 250-line tool output the failure does
        not need is shown as the few lines it does. A text that repeats a piece keeps whole
        pieces, so the script still writes it as ``piece * n``."""
        texts = sorted(
            (
                (len(text), index, path)
                for index, call in enumerate(self.best.calls)
                if call.op in _PASSES_MESSAGES
                for path, text in _texts(call.value)
                if len(text) > SHORT_TEXT
            ),
            reverse=True,
        )
        for _, index, path in texts[:LONGEST_TEXTS]:
            while True:
                calls = list(self.best.calls)
                text = _at(calls[index].value, path)
                if not isinstance(text, str) or len(text) <= SHORT_TEXT:
                    break
                value = _with_text(calls[index].value, path, _halved(text))
                calls[index] = replace(calls[index], value=value)
                if not self._keeps_failing(calls) and not self._keeps_failing(
                    self._scaled(calls, index)
                ):
                    break

    def _scaled(self, calls: list[Call], changed: int) -> list[Call]:
        """``calls`` with the budget of each view after call ``changed`` scaled as its history
        shrank: a view that split a pair at 8,000 of 12,000 tokens is asked at 4,000 when the
        history holds 6,000."""
        before = self.best.calls
        scaled = list(calls)
        for index in range(changed + 1, len(calls)):
            call = calls[index]
            budget = budget_of(call.value) if isinstance(call.value, Request) else None
            if budget is None:
                continue
            then = sum(self._count(m) for m in _model_before(before, index))
            now = sum(self._count(m) for m in _model_before(calls, index))
            if then > 0 and now < then:
                resized = max(1, budget * now // then)
                scaled[index] = replace(call, value=with_budget(call.value, resized))
        return scaled

    # -- a budget failure shown plainly ---------------------------------------------------------

    def _at_floor(self, calls: list[Call]) -> list[Call]:
        """The calls with the checked view asked at the smallest budget its history allows:
        what :func:`essential` keeps."""
        index = _checked_view(calls)
        if index is None or budget_of(calls[index].value) is None:
            return calls  # the manager's own budget: nothing to lower
        must = essential(_model_before(calls, index))
        floor = sum(self._count(m) for m in must) + (REPLY_PRIMING if must else 0)
        calls = list(calls)
        calls[index] = replace(calls[index], value=with_budget(calls[index].value, floor))
        return calls

    @staticmethod
    def _asked_budget(calls: list[Call]) -> bool:
        """The checked view was asked with a budget (not the manager's own)."""
        index = _checked_view(calls)
        return index is not None and budget_of(calls[index].value) is not None

    def _plainly_over(self, check: Check) -> bool:
        """The last replay's view is :data:`PLAIN_EXCESS` times its budget or more."""
        view = self._seen.named.get("view") if self._seen is not None else None
        budget = check.args.get("budget")
        if not isinstance(view, list) or not isinstance(budget, int):
            return False
        return checks.view_tokens(view, self._count) >= PLAIN_EXCESS * budget

    # -- raising budgets ------------------------------------------------------------------------

    def _raise_budgets(self) -> None:
        """Each view asked with a budget, newest first: the largest budget that still fails.
        From twice what its history needs, the budget doubles until the failure goes (at
        most to :data:`LARGEST_BUDGET`, kept when even that fails: the budget has nothing to
        do with it); then a binary search between the last that failed and the first that
        did not, so the budget shown fails and one token more does not."""
        for index in reversed(range(len(self.best.calls))):
            call = self.best.calls[index]
            if call.op not in ("request", "request_then_edit"):
                continue
            budget = budget_of(call.value)
            if budget is None or budget >= LARGEST_BUDGET:
                continue
            history = _model_before(self.best.calls, index)
            roomy = 2 * (sum(self._count(m) for m in history) + REPLY_PRIMING) + 100
            low, high = self._bracket(index, budget, max(roomy, budget + 1))
            if high is None:
                continue  # it fails at every budget: shown at the largest
            while high - low > 1:
                middle = (low + high) // 2
                if self._fails_with(index, middle):
                    low = middle
                else:
                    high = middle

    def _bracket(self, index: int, failing: int, probe: int) -> tuple[int, int | None]:
        """Doubling from ``probe``: (the largest budget seen failing, the first at which the
        view no longer fails); the second None if it fails up to :data:`LARGEST_BUDGET`.
        Each failing budget is taken as it is found."""
        while probe < LARGEST_BUDGET:
            if not self._fails_with(index, probe):
                return failing, probe
            failing, probe = probe, probe * 2
        if self._fails_with(index, LARGEST_BUDGET):
            return LARGEST_BUDGET, None
        return failing, LARGEST_BUDGET

    def _fails_with(self, index: int, tokens: int) -> bool:
        calls = list(self.best.calls)
        calls[index] = replace(calls[index], value=with_budget(calls[index].value, tokens))
        return self._keeps_failing(calls)

    def _count(self, message: Any) -> int:
        try:
            return self.session.count_message(message)
        except Exception:
            return 0

    # -- one replay -----------------------------------------------------------------------------

    def _holds(self, calls: list[Call]) -> tuple[Check, str, bool] | None:
        """Replay ``calls`` on a fresh manager and make the failed check, as the reproducer
        script does: (the check as it now reads, its message, whether the last call was
        refused) when the same property fails the same way, else None."""
        try:
            return self._replay(calls)
        except TargetUnusable:
            self.restart()
            return None
        except UnsatisfiedAssumption:  # a call the transport cannot carry
            return None

    def _replay(self, calls: list[Call]) -> tuple[Check, str, bool] | None:
        session, check = self.session, self.best.check
        if not session.call("reset").ok:
            return None
        seen = self._seen = _Seen()
        last = len(calls) - 1
        for index, call in enumerate(calls):
            op, args = call.request()
            try:
                reply = session.call(op, **args)
            except TargetUnusable as exc:
                self.restart()
                same = exc.kind == "crash" and exc.status == check.args.get("status")
                if index == last and check.kind == "crashes" and same:
                    return check, self.best.message, False
                return None
            if call.op == "add_bad":
                if reply.ok:  # accepted: the script's check.refuses fails here
                    ok = index == last and check.kind == "refuses"
                    return (check, self.best.message, False) if ok else None
                continue
            if not reply.ok and not call.tolerated:  # the script raises here
                raised = f"raised {reply.type}" in self.best.message
                ok = index == last and check.kind == "raises" and raised
                return (check, self.best.message, True) if ok else None
            seen.events.extend(reply.events)
            seen.after(call, reply.value if reply.ok else None, reply.ok)
            if call.op == "add_concurrently" and reply.ok:
                stored = session.call("get")
                seen.concurrent(call.value, stored.value if stored.ok else [], session.ignore)
        if check.kind in ("raises", "refuses", "crashes"):
            return None
        stored = session.call("get").value if check.kind in ("history", "stored_all") else None
        try:
            found = seen.check(check, stored, self.session)
        except Exception:  # the script's check would raise something else than the failure
            return None
        wanted = self.best.property_id
        matching = [v for v in found if v.property == wanted]
        if not matching:
            return None
        return seen.updated(check, calls), matching[0].message, seen.refused


@dataclass
class _Seen:
    """What a replay saw: the history as added (the model), the views by name, the events."""

    model: list[Any] = field(default_factory=list)
    named: dict[str, Any] = field(default_factory=dict)
    requests: dict[str, Request] = field(default_factory=dict)
    events: list[Any] = field(default_factory=list)
    before: list[Any] = field(default_factory=list)
    added: list[Any] = field(default_factory=list)
    refused: bool = False
    """The last call was refused (fairly: the script lets it raise)."""

    def after(self, call: Call, value: Any, ok: bool) -> None:
        """Follow one call that returned (or was refused fairly)."""
        self.refused = not ok
        op = call.op
        if op in ("add", "add_then_edit") and ok:
            self.model.append(call.value)
        elif op in ("set", "set_then_edit") and ok:
            self.model = list(call.value)
        elif op == "clear" and ok:
            self.model = []
        elif op in ("request", "request_then_edit"):
            self.named[call.name] = value
            self.requests[call.name] = call.value
        elif op == "get_then_edit":
            self.named["stored"] = value

    def concurrent(self, added: list[Any], stored: Any, ignore: frozenset[str]) -> None:
        """Concurrent adds: the model takes them in the order the manager stored them."""
        self.before, self.added = list(self.model), list(added)
        tail = stored[len(self.model) :] if isinstance(stored, list) else []
        self.model = self.model + _in_stored_order(list(added), tail, ignore)

    def check(self, check: Check, stored: Any, session: Session) -> list[Violation]:
        """The violations the failed check finds now."""
        kind = check.kind
        needs = {"same_view": ("view", "again"), "not_edited": ("again",)}.get(kind, ("view",))
        if kind not in ("history", "stored_all", "events") and not set(needs) <= set(self.named):
            raise LookupError(f"the script's check needs {needs}: a name it never set")
        view = self.named.get("view")
        allow = check.args.get("allow") or session.relax
        if kind == "is_list":
            return checks.is_list(view)
        if kind == "tool_pairs":
            return checks.tool_pairs(view)
        if kind == "attachments":
            return checks.attachments(view, self.model)
        if kind in ("ordering", "preserved"):
            judge = checks.ordering if kind == "ordering" else checks.preserved
            return judge(view, self.model, allow, session.ignore)
        if kind == "fits":
            return checks.fits(view, self._budget(check), allow, session.count_message)
        if kind == "history":
            expected = self.model
            property_id = check.args.get("property", "non_destructive")
            return checks.history(stored, expected, property_id, session.ignore)
        if kind == "stored_all":
            return checks.stored_all(stored, self.before, self.added, session.ignore)
        if kind == "empty_view":
            return checks.empty_view(view)
        if kind == "same_view":
            return checks.same_view(view, self.named.get("again"))
        if kind == "not_edited":
            return checks.not_edited(self.named.get("again"))
        if kind == "events":
            return checks.events(self.events)
        return []

    def _budget(self, check: Check) -> int:
        request = self.requests.get("view")
        found = budget_of(request) if request is not None else None
        return check.args["budget"] if found is None else found

    def updated(self, check: Check, calls: list[Call]) -> Check:
        """The check's data as the calls now make it: the history, the budget."""
        args = dict(check.args)
        if "history" in args:
            args["history"] = list(self.model)
        if "expected" in args:
            args["expected"] = list(self.model)
        if check.kind == "stored_all":
            args["before"], args["added"] = list(self.before), list(self.added)
        if check.kind == "fits":
            args["budget"] = self._budget(check)
        return replace(check, args=args)


def budget_of(request: Request) -> int | None:
    """The budget a view is asked with: ``token_budget``, or a provider's window less its
    output; None when the request names neither."""
    if request.defaults is not None:
        window = request.defaults.get("context_window")
        output = request.defaults.get("max_output_tokens", 0)
        return window - output if isinstance(window, int) and isinstance(output, int) else None
    return request.token_budget


def with_budget(request: Request, tokens: int) -> Request:
    """The same request with the budget ``tokens``."""
    if request.defaults is not None:
        output = request.defaults.get("max_output_tokens", 0)
        return Request(defaults={**request.defaults, "context_window": tokens + output})
    return Request(token_budget=tokens)


def _model_before(calls: list[Call], index: int) -> list[Any]:
    """The history as added by the calls before ``index`` (concurrent adds in any order)."""
    model: list[Any] = []
    for call in calls[:index]:
        if call.op in ("add", "add_then_edit"):
            model.append(call.value)
        elif call.op in ("set", "set_then_edit"):
            model = list(call.value)
        elif call.op == "clear":
            model = []
        elif call.op == "add_concurrently":
            model.extend(call.value)
    return model


def _whole_pairs(calls: list[Call]) -> bool:
    """Whether the history the calls add holds whole tool pairs wherever a view is asked for,
    and at the end, as every history the run made does: a deletion that splits a pair (a
    call's results left without it) would turn a manager's bug into a bad caller's."""
    points = [i for i, c in enumerate(calls) if c.op in ("request", "request_then_edit")]
    return not any(checks.tool_pairs(_model_before(calls, i)) for i in (*points, len(calls)))


def _suffix_of(kind: str, said: str) -> Callable[[list[Call], bool], str]:
    """What the run's message said after the check's own sentence, rewritten for the calls
    a shrunk failure has: the call a history check came after (and whether it raised), the
    budget a view fit and where it came from."""
    if kind == "history" and said:

        def after(calls: list[Call], raised: bool) -> str:
            return f" (after {_describe(calls[-1])}{' raised' if raised else ''})"

        return after
    if kind not in ("preserved", "fits") or not said:
        return lambda _calls, _raised: ""

    def budget(calls: list[Call], _raised: bool) -> str:
        index = _checked_view(calls)
        request = calls[index].value if index is not None else None
        tokens = budget_of(request) if request is not None else None
        if tokens is None or request is None:
            return said
        if kind == "fits":
            return request.origin()
        return f", although it fits the budget of {tokens}{request.origin()}"

    return budget


SHORT_TEXT = 24
"""Texts this long or shorter are left as they are."""

LONGEST_TEXTS = 6
"""How many of a failure's longest texts are shortened (each costs a replay per halving)."""

_PASSES_MESSAGES = frozenset({"add", "add_then_edit", "set", "set_then_edit", "add_concurrently"})
_TEXT_KEYS = frozenset({"content", "text", "output"})
"""The keys whose string values are a message's text (never an id, a role or arguments)."""

TextPath = tuple[str | int, ...]


def _texts(value: Any, path: TextPath = ()) -> list[tuple[TextPath, str]]:
    """Every text in a message or a list of them, with where it is."""
    found: list[tuple[TextPath, str]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str) and key in _TEXT_KEYS:
                found.append(((*path, key), item))
            elif isinstance(item, dict | list):
                found += _texts(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _texts(item, (*path, index))
    return found


def _at(value: Any, path: TextPath) -> Any:
    for step in path:
        value = value[step]
    return value


def _with_text(value: Any, path: TextPath, text: str) -> Any:
    """A copy of ``value`` with the text at ``path`` replaced (the rest shared: calls are
    never edited in place)."""
    if not path:
        return text
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _with_text(value[head], rest, text)}
    copy = list(value)
    copy[head] = _with_text(value[head], rest, text)  # type: ignore[index]
    return copy


def _halved(text: str) -> str:
    """Half of ``text``: half of its pieces where it is one piece repeated."""
    period = (text + text).find(text, 1)
    if period < len(text) and len(text) // period > 1:
        return text[:period] * (len(text) // period // 2)
    return text[: len(text) // 2]


def _checked_view(calls: list[Call]) -> int | None:
    """Where the checked view (the last request named ``view``) is asked, if it is."""
    return next(
        (
            i
            for i in reversed(range(len(calls)))
            if calls[i].name == "view" and isinstance(calls[i].value, Request)
        ),
        None,
    )


def _at_floor_suffix(calls: list[Call], _raised: bool) -> str:
    """What a budget failure shown at the smallest budget its history allows says of it."""
    index = _checked_view(calls)
    origin = calls[index].value.origin() if index is not None else ""
    return (
        f"{origin}, the least that holds the system messages, the newest user message and the "
        "newest message: the view keeps more"
    )


def _describe(call: Call) -> str:
    """A call as the run's messages name it."""
    if call.op in ("request", "request_then_edit"):
        return f"get_messages_for_request({call.value.describe()})"
    return {
        "add": "add_message",
        "add_then_edit": "add_message",
        "add_concurrently": "concurrent add_message calls",
        "add_bad": "add_message",
        "set": "set_messages",
        "set_then_edit": "set_messages",
        "get_then_edit": "get_messages()",
        "clear": "clear()",
    }.get(call.op, call.op)
