"""The conformance properties as pure functions over (history, view, events).

Each ``check_*`` returns the violations it finds, as plain sentences a person can act on, each
with a machine-readable ``kind`` that relaxations filter on (:func:`relaxed`). They import
nothing heavy (no Hypothesis, no pytest) so a production process can run them on every view,
and nothing of ``ctxkit.messages``: the suite must not trust the code it checks, so the message
shapes are read again in :mod:`ctxkit.conformance.judge.parts`, and what a view message comes from
is decided in :mod:`ctxkit.conformance.judge.comes_from`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctxkit.conformance.judge.comes_from import (
    ANNOTATION_KEYS,
    HistoryIndex,
    Semantic,
    comes_from,
    derives,
    equivalent,
    match_view,
    semantic,
)
from ctxkit.conformance.judge.parts import (
    THINKING,
    is_call_item,
    is_result,
    is_result_message,
    newest_user_message,
    reasoning_id,
    server_results,
)
from ctxkit.conformance.judge.parts import blocks as _blocks
from ctxkit.conformance.judge.parts import calls as _calls
from ctxkit.conformance.judge.parts import family as _family
from ctxkit.conformance.judge.parts import positional as _positional
from ctxkit.conformance.judge.parts import results as _results
from ctxkit.conformance.judge.parts import tool_ids as _tool_ids
from ctxkit.conformance.judge.sent import as_sent
from ctxkit.shapes.rules import Break, RuleSet, rule, rule_set

__all__ = [
    "ANNOTATION_KEYS",
    "RELAXED_KINDS",
    "HistoryIndex",
    "Violation",
    "check_attachments",
    "check_budget",
    "check_events",
    "check_lifecycle",
    "check_non_destructive",
    "check_ordering",
    "check_preservation",
    "check_tool_pairs",
    "comes_from",
    "first_difference",
    "is_result",
    "match_view",
    "newest_user_message",
    "relaxed",
    "result_groups",
]


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken property: its id, a plain sentence, the call ids involved if any, and what
    kind of break it is, for callers that filter (``tool_pair_integrity``: ``unanswered``,
    ``stray``, ``duplicate``, ``reasoning-separated``, ``thinking-dropped``,
    ``server-result-moved``; ``ordering``: ``reordered``,
    ``synthetic-tool-ids``, ``repeated``; ``preservation``: ``dropped-system``,
    ``merged-system``, ``dropped-user``; empty where a property has one kind only)."""

    property: str
    message: str
    ids: tuple[str, ...] = ()
    kind: str = ""
    rule: str = ""
    """The provider rule broken (``openai.calls_answered``, ...: ``conformance/rules/``), where
    the break is one a provider refuses the request for."""
    at: int | None = None
    """The view index of the message at fault, where one is."""

    def __str__(self) -> str:
        return f"{self.property}: {self.message}"

    @property
    def provider_error(self) -> str:
        """The error text the provider answers a request with this break ('' if none)."""
        return rule(self.rule).error if self.rule else ""


RELAXED_KINDS: Mapping[str, frozenset[str]] = {
    "dropped-system": frozenset({"dropped-system", "merged-system"}),
    "merged-system": frozenset({"merged-system"}),
}
"""The violation kinds each relaxation accepts. A team that lets system messages be dropped
lets them be merged too: a merged message keeps what a dropped one loses."""


def relaxed(violations: Iterable[Violation], allow: Any) -> list[Violation]:
    """The violations that the relaxations in ``allow`` do not accept.

    ``allow``: relaxation names (``"merged-system"``; a ``name=value`` item counts by its name)
    or an object with a true attribute per relaxation (``merged_system=True``), such as the
    state machine's ``Relaxations``. Relaxations not in :data:`RELAXED_KINDS` (those that work
    on the history or the budget instead) accept no violation here.

    Example: ``relaxed(check_preservation(history, view), {"merged-system"})``.
    """
    if isinstance(allow, str):
        allow = [allow]
    if isinstance(allow, Collection):
        names = {str(item).partition("=")[0] for item in allow}
    else:
        names = {n for n in RELAXED_KINDS if getattr(allow, n.replace("-", "_"), False) is True}
    accepted = frozenset().union(*(RELAXED_KINDS.get(name, ()) for name in names))
    return [v for v in violations if v.kind not in accepted]


def _strip(message: Mapping[str, Any], ignore: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in ignore}


# -- tool_pair_integrity ---------------------------------------------------------------------


def _rules(message: Any) -> RuleSet:
    """The rule set of the shape a message's tool traffic is written in."""
    return rule_set(_family(message) if isinstance(message, Mapping) else "openai")


def _said(message: Any) -> tuple[str, str, str]:
    """(a result, what makes a call, what answers one) in the words of the message's shape:
    a Responses ``function_call_output`` item and its ``function_call`` item, a Gemini
    ``functionResponse`` part and its ``functionCall`` part, a Chat Completions tool result
    and its assistant message."""
    rules = _rules(message)
    if rules.parallel_calls == "items":
        return rules.said(str(message.get("type") or "function_call").removesuffix("_output"))
    return rules.said()


def _cited(kind: Break, message: Any) -> str:
    return _rules(message).breaking(kind)


_GENERIC = frozenset({"openai", "genai"})
"""Shapes recorders write every API's traffic in (chat-like messages, GenAI parts)."""


def check_tool_pairs(view: Sequence[Any], api: str | None = None) -> list[Violation]:
    """In the view: each calling message is followed at once by all its results and nothing
    else in between; no result appears anywhere else; no call id is used twice. Each shape's
    rules are its rule set (``conformance/rules/``):

    - Chat Completions, Responses and GenAI: the result messages (``tool`` messages,
      ``*_output`` items) right after the call, in any order; parallel Responses calls come as
      call items one after another;
    - Anthropic, Bedrock and Gemini: the very next message answers every call, nothing else
      (Gemini: as many responses as calls, by id, else by position and name);
    - Anthropic server tools: each result block in the same message as its call.

    ``api``, where the view goes to a known API (a rule set's shape: ``responses``,
    ``gemini``, ...): the view is judged as that API receives it (chat-like and GenAI messages
    in its grouping, :func:`~ctxkit.conformance.judge.sent.as_sent`; indexes still the view's),
    and a break in a generic message cites that API's rule. ``""``: an API not known, judged by
    the rules every API shares, citing no provider's rule. None (the default): each message by
    its own shape.

    What travels with a call (reasoning items, thinking blocks) needs the history:
    :func:`check_attachments`.
    """
    if api is None:
        return _pair_violations(view)
    sent, positions = as_sent(list(view), api)
    found = []
    for violation in _pair_violations(sent):
        if positions is not None:
            violation = _renumbered(violation, positions)
        found.append(_citing(violation, api))
    return found


def _citing(violation: Violation, api: str) -> Violation:
    """The violation citing ``api``'s rule: a break found in a generic message is the same
    kind of break in the API's rules; an unknown API's, no rule."""
    cited = violation.rule
    if not cited or (api and cited.partition(".")[0] not in _GENERIC):
        return violation
    kind = rule(cited).breaks if api else None
    return replace(violation, rule=rule_set(api).breaking(kind) if kind else "")


_VIEW_INDEX = re.compile(r"view\[(\d+)\]")


def _renumbered(violation: Violation, positions: Sequence[int]) -> Violation:
    """A violation found in the view as the API received it, said of the view as given."""

    def given(at: int) -> int:
        return positions[at] if at < len(positions) else at

    return replace(
        violation,
        message=_VIEW_INDEX.sub(lambda m: f"view[{given(int(m.group(1)))}]", violation.message),
        at=None if violation.at is None else given(violation.at),
    )


def _pair_violations(view: Sequence[Any]) -> list[Violation]:
    found: list[Violation] = []

    def fail(at: int, message: str, *ids: str, kind: str = "", rule: str = "") -> None:
        found.append(Violation("tool_pair_integrity", message, tuple(ids), kind, rule, at))

    where_called: dict[str, int] = {}
    for index, message in enumerate(view):
        if not isinstance(message, Mapping):
            fail(index, f"view[{index}] is a {type(message).__name__}, not a message dict")
            continue
        _check_server_tools(index, message, fail)
        if _positional(message):
            continue
        for call_id in _calls(message):
            if call_id in where_called:
                fail(
                    index,
                    f"view[{index}] calls {call_id}, "
                    f"already called by view[{where_called[call_id]}]",
                    call_id,
                    kind="duplicate",
                    rule=_cited("duplicate", message),
                )
            else:
                where_called[call_id] = index

    answered: set[str] = set()
    index = 0
    while index < len(view):
        message = view[index]
        if not isinstance(message, Mapping):
            index += 1
            continue
        _report_stray_results(view, index, message, where_called, answered, fail)
        called = _calls(message)
        if not called:
            index += 1
            continue
        family = _family(message)
        rules = rule_set(family)
        if message.get("tool_calls") and any(
            isinstance(b, Mapping) and b.get("type") == "tool_use" for b in _blocks(message)
        ):
            fail(index, f"view[{index}] mixes tool_calls and tool_use blocks", *called)
        expected = dict.fromkeys(called)
        following = index + 1
        if rules.parallel_calls == "items":
            # Parallel calls: call items (and reasoning between them) in a row.
            while following < len(view) and (
                is_call_item(view[following]) or reasoning_id(view[following]) is not None
            ):
                expected.update(dict.fromkeys(_calls(view[following])))
                following += 1
        if rules.pairing == "following":
            while following < len(view) and is_result_message(view[following]):
                if _family(view[following]) != family:
                    break
                for result_id in _results(view[following]):
                    if result_id in expected:
                        del expected[result_id]
                        answered.add(result_id)
                    else:
                        _report_stray_result(
                            following, result_id, where_called, answered, fail, view[following]
                        )
                following += 1
        else:
            after = view[following] if following < len(view) else None
            if isinstance(after, Mapping) and _results(after) and _family(after) == family:
                counted = _results(after)
                if rules.without_ids == "name_and_position" and len(counted) != len(called):
                    cited = rules.breaking("unanswered")
                    fail(
                        following,
                        f"view[{following}] answers {len(counted)} of the "
                        f"{len(called)} function calls of view[{index}]: " + rule(cited).error,
                        *called,
                        kind="unanswered",
                        rule=cited,
                    )
                for result_id in counted:
                    if result_id in expected:
                        del expected[result_id]
                        answered.add(result_id)
                    elif not _positional(after):
                        _report_stray_result(
                            following, result_id, where_called, answered, fail, after
                        )
                following += 1
        answer = _said(message)[2]
        for call_id in expected:
            fail(
                index,
                f"view[{index}] calls {call_id}, but no {answer} for it follows at once"
                + _where_else(view, call_id, following),
                call_id,
                kind="unanswered",
                rule=rules.breaking("unanswered"),
            )
        index = following
    return found


def _check_server_tools(index: int, message: Mapping[str, Any], fail: Any) -> None:
    """Anthropic server tools: each result block after its call, in the same message."""
    called: set[str] = set()
    answered: set[str] = set()
    for position, kind, tool_id in server_results(message):
        if kind == "call":
            called.add(tool_id)
        elif tool_id not in called:
            fail(
                index,
                f"view[{index}].content[{position}] is a server tool result for {tool_id}, but "
                f"no server_tool_use before it in the same message calls {tool_id}: "
                + rule("anthropic.server_result_in_message").error,
                tool_id,
                kind="server-result-moved",
                rule="anthropic.server_result_in_message",
            )
        else:
            answered.add(tool_id)
    for tool_id in sorted(called - answered):
        fail(
            index,
            f"view[{index}] calls server tool {tool_id}, but its result is not in the same message",
            tool_id,
            kind="server-result-moved",
            rule="anthropic.server_result_in_message",
        )


def check_attachments(history: Sequence[Mapping[str, Any]], view: Sequence[Any]) -> list[Violation]:
    """What must travel with a call, found by the call's id in the history:

    - a Responses ``reasoning`` item stays right before the call items it preceded, and is
      followed by the item that followed it (``responses.reasoning_with_call``);
    - the Anthropic assistant turn whose calls the view's last message answers keeps the
      thinking blocks it started with, unchanged (``anthropic.thinking_kept``): with thinking
      on, the provider refuses the request otherwise. Earlier turns may lose theirs (the
      provider drops them itself), so they are not checked.
    """
    found: list[Violation] = []
    responses = any(is_call_item(m) or reasoning_id(m) is not None for m in view)
    last = view[-1] if view else None
    answered = isinstance(last, Mapping) and _family(last) == "anthropic" and _results(last)
    if not (responses or answered):
        return found  # nothing in the view travels with a call: no pass over the history
    called_at: dict[str, int] = {}
    for position, message in enumerate(history):
        if isinstance(message, Mapping) and not _positional(message):
            for call_id in _calls(message):
                called_at.setdefault(call_id, position)
    found.extend(_reasoning_violations(history, view, called_at))
    found.extend(_thinking_violations(history, view, called_at))
    return found


def _reasoning_before(history: Sequence[Mapping[str, Any]], position: int) -> int | None:
    """The reasoning item that preceded the call item at ``position`` in the model's output
    (through the call items of the same output), if any."""
    at = position - 1
    while at >= 0 and is_call_item(history[at]):
        at -= 1
    return at if at >= 0 and reasoning_id(history[at]) is not None else None


def _same_item(first: Any, second: Mapping[str, Any]) -> bool:
    if not isinstance(first, Mapping):
        return False
    if second.get("id"):
        return first.get("id") == second.get("id")
    return _strip(first, ANNOTATION_KEYS) == _strip(second, ANNOTATION_KEYS)


def _reasoning_violations(history, view, called_at) -> list[Violation]:
    found = []
    for index, message in enumerate(view):
        if not is_call_item(message):
            continue
        call_id = _calls(message)[0]
        source = called_at.get(call_id)
        if source is None:
            continue
        reasoning = _reasoning_before(history, source)
        if reasoning is None:
            continue
        at = index - 1
        while at >= 0 and is_call_item(view[at]):
            at -= 1
        if at < 0 or not _same_item(view[at], history[reasoning]):
            wanted = reasoning_id(history[reasoning]) or f"history[{reasoning}]"
            found.append(
                Violation(
                    "tool_pair_integrity",
                    f"view[{index}] is the call {call_id}, but the reasoning item that preceded "
                    f"it (history[{reasoning}], {wanted}) is not right before it: "
                    + rule("responses.reasoning_with_call").error.format(
                        id=message.get("id") or call_id, reasoning_id=wanted
                    ),
                    (call_id,),
                    "reasoning-separated",
                    "responses.reasoning_with_call",
                    index,
                )
            )
    by_id = {
        reasoning_id(item): position
        for position, item in enumerate(history)
        if reasoning_id(item)  # ids found once; items without one are looked for by equality
    }
    for index, message in enumerate(view):
        if reasoning_id(message) is None:
            continue
        source = by_id.get(reasoning_id(message)) if reasoning_id(message) else None
        if source is None:
            source = next((k for k, h in enumerate(history) if _same_item(message, h)), None)
        if source is None or source + 1 >= len(history):
            continue
        after = view[index + 1] if index + 1 < len(view) else None
        wanted = history[source + 1]
        if not isinstance(after, Mapping) or not (
            _same_item(after, wanted) or set(_calls(after)) & set(_calls(wanted))
        ):
            shown = reasoning_id(message) or f"view[{index}]"
            found.append(
                Violation(
                    "tool_pair_integrity",
                    f"view[{index}] is a reasoning item without the item that followed it "
                    f"(history[{source + 1}]): "
                    + rule("responses.reasoning_followed").error.format(reasoning_id=shown),
                    (),
                    "reasoning-separated",
                    "responses.reasoning_followed",
                    index,
                )
            )
    return found


def _leading_thinking(message: Mapping[str, Any]) -> list[Any]:
    found = []
    for block in _blocks(message):
        if str(block.get("type")) not in THINKING:
            break
        found.append(dict(block))
    return found


def _thinking_violations(history, view, called_at) -> list[Violation]:
    if len(view) < 2 or not isinstance(view[-1], Mapping):
        return []
    last = view[-1]
    if _family(last) != "anthropic" or not _results(last):
        return []
    caller = view[-2]
    if not isinstance(caller, Mapping) or not _calls(caller):
        return []
    source = called_at.get(_calls(caller)[0])
    if source is None:
        return []
    wanted = _leading_thinking(history[source])
    if not wanted or _leading_thinking(caller)[: len(wanted)] == wanted:
        return []
    return [
        Violation(
            "tool_pair_integrity",
            f"view[{len(view) - 2}] is the assistant turn whose tool calls the last message "
            f"answers, but it no longer starts with the {len(wanted)} thinking block(s) of "
            f"history[{source}], unchanged: "
            + rule("anthropic.thinking_kept").error.format(index=len(view) - 2),
            tuple(_calls(caller)),
            "thinking-dropped",
            "anthropic.thinking_kept",
            len(view) - 2,
        )
    ]


def _report_stray_results(view, index, message, where_called, answered, fail) -> None:
    """Results in a message that no call right before it claimed."""
    if _positional(message):
        # Answers known by name and place, not by id: they answer nothing but the turn
        # right before them, which has not claimed them.
        if _results(message):
            fail(
                index,
                f"view[{index}] answers calls ({', '.join(_results(message))}) that the message "
                "right before it does not make: " + rule(_cited("stray", message)).error,
                *_results(message),
                kind="stray",
                rule=_cited("stray", message),
            )
        return
    for result_id in _results(message):
        _report_stray_result(index, result_id, where_called, answered, fail, message)


def _report_stray_result(index, result_id, where_called, answered, fail, message=None) -> None:
    stray = _cited("stray", message)
    result, caller, _ = _said(message)
    if result_id in answered:
        fail(
            index,
            f"view[{index}] is a second {result} for {result_id}",
            result_id,
            kind="stray",
            rule=stray,
        )
    elif result_id in where_called:
        fail(
            index,
            f"view[{index}] is a {result} for {result_id}, but it does not come right after "
            f"view[{where_called[result_id]}], which calls {result_id}",
            result_id,
            kind="stray",
            rule=stray,
        )
    else:
        fail(
            index,
            f"view[{index}] is a {result} for {result_id}, but no {caller} in the "
            f"view calls {result_id}",
            result_id,
            kind="stray",
            rule=stray,
        )
    answered.add(result_id)


def _where_else(view: Sequence[Any], call_id: str, start: int) -> str:
    for later in range(start, len(view)):
        if isinstance(view[later], Mapping) and call_id in _results(view[later]):
            return f" (its result is at view[{later}])"
    return " (its result is missing from the view)"


# -- ordering --------------------------------------------------------------------------------


def check_ordering(
    history: Sequence[Mapping[str, Any]],
    view: Sequence[Any],
    ignore: frozenset[str] = ANNOTATION_KEYS,
    matches: Sequence[int | None] | None = None,
) -> list[Violation]:
    """View messages from the history keep the history's order, as the API reads order; a
    message that comes from none (a summary, a notice) carries no tool call or result.

    What a view message comes from is :func:`match_view`'s answer, which keeps history order
    whenever any assignment can: a violation here means no assignment could. The results
    answering one message's calls keep the history's order only as far as their API asks
    (:func:`result_groups`): where it takes them in any order (Chat Completions, Responses,
    GenAI and Gemini results matched by id), any order is the history's; results known by
    name and position (Gemini without ids) keep theirs.
    ``matches``: that answer, if the caller has it (from a :class:`HistoryIndex`).
    """
    found: list[Violation] = []
    if matches is None:
        matches = match_view(history, view, ignore)
    for index, source in enumerate(matches):
        message = view[index]
        if source is None and isinstance(message, Mapping):
            ids = _tool_ids(message)
            if ids:
                found.append(_unmatched_ids(view, matches, index, ids))
            elif _positional(message):
                found.extend(_shuffled(history, view, index, ignore))
    moved = moves(matches)
    if moved:  # rare: only then the results' runs, which can only take moves away
        moved = moves(matches, result_groups(history))
    for move in moved:
        found.append(
            Violation(
                "ordering",
                f"view[{move.position}] (history[{move.source}]) {move.said}: the view reorders "
                "the history",
                kind="reordered",
            )
        )
    return found


def _shuffled(
    history: Sequence[Mapping[str, Any]], view: Sequence[Any], index: int, ignore: frozenset[str]
) -> list[Violation]:
    """A view message with calls or results known by name and position (Gemini and GenAI
    parts without ids) that holds a history message's parts in another order: its API pairs
    them by their places, so that is a reorder, not a message of the manager's own (which
    parts without ids, having no identity, would otherwise pass for)."""
    message = view[index]
    wanted = _parts_in_one_order(message)
    count = len(message["parts"]) if isinstance(message.get("parts"), list) else None
    for source, other in enumerate(history):
        if (
            isinstance(other, Mapping)
            and other.get("role") == message.get("role")
            and isinstance(other.get("parts"), list)
            and len(other["parts"]) == count
            and _positional(other)
            and equivalent(_parts_in_one_order(other), wanted, ignore)
            and not equivalent(other, message, ignore)
        ):
            result, call, _ = _said(message)
            return [
                Violation(
                    "ordering",
                    f"view[{index}] holds the parts of history[{source}] in another order: "
                    f"its {result if _results(message) else call}s have no ids, so they pair "
                    "by position, and the view reorders the history",
                    kind="reordered",
                    at=index,
                )
            ]
    return []


def _parts_in_one_order(message: Mapping[str, Any]) -> Mapping[str, Any]:
    parts = message.get("parts")
    if not isinstance(parts, list):
        return message
    return {**message, "parts": sorted(parts, key=_part_key)}


def _part_key(part: Any) -> str:
    try:
        return json.dumps(part, sort_keys=True, default=repr)
    except (TypeError, ValueError):  # keys of several types, a cycle: what a view may hold
        return repr(part)


def result_groups(messages: Sequence[Any]) -> list[int]:
    """For each message, where the run of messages it may trade places with begins (the
    index of the run's first message; its own index when it stands alone).

    Such a run is the result messages answering one calling message (a Responses turn's call
    items) right after it, where its API takes them in any order among themselves
    (``result_order`` in its rule set: ``any``, or ``by_id`` for results matched by id, not
    by name and position). Each result answers calls of that message no earlier result of
    the run answered; the run ends at the first message that does not. Results inside one
    message (Anthropic, Bedrock, Gemini turns) are one message here: their blocks' order is
    :func:`~ctxkit.conformance.judge.comes_from.equivalent`'s concern.
    """
    groups = list(range(len(messages)))
    index = 0
    while index < len(messages):
        message = messages[index]
        if not isinstance(message, Mapping) or _positional(message) or not _calls(message):
            index += 1
            continue
        family = _family(message)
        rules = rule_set(family)
        called = set(_calls(message))
        following = index + 1
        if rules.parallel_calls == "items":  # parallel calls: call items in a row, one turn
            while following < len(messages) and (
                is_call_item(messages[following]) or reasoning_id(messages[following]) is not None
            ):
                called.update(_calls(messages[following]))
                following += 1
        start = following
        while rules.pairing == "following" and following < len(messages):
            after = messages[following]
            if not (
                is_result_message(after)
                and _family(after) == family
                and (rules.result_order == "any" or not _positional(after))
                and set(_results(after)) <= called
            ):
                break
            called.difference_update(_results(after))
            groups[following] = start
            following += 1
        index = following
    return groups


@dataclass(frozen=True, slots=True)
class Move:
    """One message out of its place: at ``position`` now, ``source`` in the order it should
    keep; it jumped ``ahead`` of that many messages (or fell ``behind`` that many)."""

    position: int
    source: int
    ahead: int
    behind: int

    @property
    def said(self) -> str:
        if self.ahead:
            return f"moved ahead of {self.ahead} message{'s' if self.ahead != 1 else ''}"
        return f"moved behind {self.behind} message{'s' if self.behind != 1 else ''}"


def moves(sources: Sequence[int | None], groups: Sequence[int] | None = None) -> list[Move]:
    """The smallest set of messages whose moves explain a reorder: ``sources`` gives, for each
    message in its new order, its place in the old order (None: no place). The longest run kept
    in order stays; every other placed message moved, once (one message moved ahead of four is
    one move, not four).

    ``groups``: for each old place, the first place of the run it may trade places with
    (:func:`result_groups`); messages of one run are in order whatever their order among
    themselves. None: every message keeps its own place.
    """
    placed = [(position, source) for position, source in enumerate(sources) if source is not None]
    rank = [source if groups is None else groups[source] for _, source in placed]
    kept = _longest_increasing(rank, strict=groups is None)
    found = []
    for k, (position, source) in enumerate(placed):
        if k in kept:
            continue
        ahead = sum(1 for later in rank[k + 1 :] if later < rank[k])
        behind = sum(1 for earlier in rank[:k] if earlier > rank[k])
        found.append(Move(position, source, ahead, behind))
    return found


def _longest_increasing(values: Sequence[int], strict: bool = True) -> set[int]:
    """Indices of a longest increasing run of ``values`` (patience sorting): strictly
    increasing, or never decreasing (``strict=False``: equal values keep their order)."""
    tails: list[int] = []  # index of the smallest tail of each run length
    before: list[int | None] = [None] * len(values)
    for k, value in enumerate(values):
        low, high = 0, len(tails)
        while low < high:
            middle = (low + high) // 2
            tail = values[tails[middle]]
            if tail < value or (not strict and tail == value):
                low = middle + 1
            else:
                high = middle
        before[k] = tails[low - 1] if low else None
        if low == len(tails):
            tails.append(k)
        else:
            tails[low] = k
    kept: set[int] = set()
    k = tails[-1] if tails else None
    while k is not None:
        kept.add(k)
        k = before[k]
    return kept


def _unmatched_ids(
    view: Sequence[Any], matches: Sequence[int | None], index: int, ids: tuple[str, ...]
) -> Violation:
    """A view message with tool ids that comes from no history message: made up, or a second
    copy of a history message an earlier view message already is."""
    shown, role = ", ".join(ids), view[index].get("role")
    for earlier in range(index):
        source, other = matches[earlier], view[earlier]
        if (
            source is not None
            and isinstance(other, Mapping)
            and other.get("role") == role
            and set(ids) & set(_tool_ids(other))
        ):
            return Violation(
                "ordering",
                f"view[{index}] carries tool ids {shown}, as view[{earlier}] does, which is "
                f"history[{source}]: the view repeats a history message",
                ids,
                kind="repeated",
            )
    return Violation(
        "ordering",
        f"view[{index}] carries tool ids {shown} but comes from no history message",
        ids,
        kind="synthetic-tool-ids",
    )


# -- non_destructive and lifecycle -----------------------------------------------------------


def check_non_destructive(
    added: Sequence[Mapping[str, Any]],
    stored: Sequence[Any],
    ignore: frozenset[str] = frozenset(),
) -> list[Violation]:
    """``get_messages()`` equals everything added, in order, unchanged: equal as a provider
    reads messages (:func:`~ctxkit.conformance.judge.comes_from.equivalent`: a string is the
    content ``[{"type": "text", "text": X}]``, key order does not count, ...) and lists of
    them (:func:`first_difference`: the results of one message's calls in any order where
    their API takes them so), not as Python compares dicts. A store that keeps messages in an
    equivalent form changes nothing a provider would see (:func:`normalized` says where it
    did)."""
    return _compare("non_destructive", added, stored, ignore, "added")


def check_lifecycle(
    expected: Sequence[Mapping[str, Any]],
    stored: Sequence[Any],
    ignore: frozenset[str] = frozenset(),
) -> list[Violation]:
    """After ``set_messages(x)``, ``get_messages()`` equals ``x`` (as
    :func:`check_non_destructive` compares); after ``clear()``, empty."""
    return _compare("lifecycle", expected, stored, ignore, "expected")


def same_message(want: Any, got: Any, ignore: frozenset[str]) -> bool:
    """``got`` is ``want`` as a provider reads messages, annotation keys aside."""
    if not isinstance(got, Mapping) or not isinstance(want, Mapping):
        return got == want
    stripped_want, stripped_got = _strip(want, ignore), _strip(got, ignore)
    return stripped_got == stripped_want or equivalent(stripped_want, stripped_got, ignore)


def first_difference(
    expected: Sequence[Any], got: Sequence[Any], ignore: frozenset[str] = frozenset()
) -> int | None:
    """The first index at which ``got`` differs from ``expected`` as a provider reads a list
    of messages, as far as both go (None: they agree that far). Each message as
    :func:`same_message` reads it, and the results of one message's calls in any order among
    themselves where their API takes them so (a run of :func:`result_groups` of
    ``expected``): the run differs only when ``got`` holds other messages there."""
    groups: list[int] | None = None
    index, limit = 0, min(len(expected), len(got))
    while index < limit:
        if _same(expected[index], got[index], ignore):
            index += 1
            continue
        if groups is None:
            groups = result_groups(expected)
        end = index + 1
        while end < len(expected) and groups[end] == groups[index]:
            end += 1
        if end > limit or not _traded(expected[index:end], got[index:end], ignore):
            return index
        index = end
    return None


def _same(want: Any, got: Any, ignore: frozenset[str]) -> bool:
    if isinstance(want, Mapping):
        return isinstance(got, Mapping) and same_message(want, got, ignore)
    return bool(want == got)


def _traded(wanted: Sequence[Any], got: Sequence[Any], ignore: frozenset[str]) -> bool:
    """``got`` holds the messages of ``wanted``, each once, in some order."""
    left = list(got)
    for want in wanted:
        at = next((k for k, other in enumerate(left) if _same(want, other, ignore)), None)
        if at is None:
            return False
        del left[at]
    return True


def normalized(
    expected: Sequence[Mapping[str, Any]], stored: Any, ignore: frozenset[str] = frozenset()
) -> str:
    """Where a store kept a message in another, equivalent form rather than as it was given
    (the first such message), or results of parallel calls in another order, for the report;
    empty when it kept every message as given."""
    if not isinstance(stored, list):
        return ""
    for index, (want, got) in enumerate(zip(expected, stored, strict=False)):
        if isinstance(got, Mapping) and _strip(got, ignore) != _strip(want, ignore):
            if not same_message(want, got, ignore):
                return (
                    f"get_messages()[{index}] is {_short(got)} where {_short(want)} was given: "
                    "the results of one message's calls, in another order"
                )
            return f"get_messages()[{index}] is {_short(got)} where {_short(want)} was given"
    return ""


def _compare(
    prop: str,
    expected: Sequence[Mapping[str, Any]],
    stored: Sequence[Any],
    ignore: frozenset[str],
    word: str,
) -> list[Violation]:
    if not isinstance(stored, list):
        return [Violation(prop, f"get_messages() returned a {type(stored).__name__}, not a list")]
    index = first_difference(expected, stored, ignore)
    if index is not None:
        want, got = expected[index], stored[index]
        return [
            Violation(
                prop,
                f"get_messages()[{index}] differs from the message {word} at {index}: "
                f"{_short(got)} instead of {_short(want)}",
            )
        ]
    if len(stored) != len(expected):
        return [
            Violation(
                prop,
                f"get_messages() has {len(stored)} messages, but {len(expected)} were {word}",
            )
        ]
    return []


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- budget and preservation -----------------------------------------------------------------


def check_budget(
    view_tokens: int, budget: int, *, feasible: bool, tolerance: float = 0.0
) -> list[Violation]:
    """Where a fitting view exists, the view fits the budget (within ``tolerance`` x budget)."""
    limit = budget * (1 + tolerance)
    if feasible and view_tokens > limit:
        return [
            Violation(
                "budget",
                f"at a budget of {budget:,} the view has {view_tokens:,} tokens, "
                f"{view_tokens - budget:,} over"
                + (f" (+{tolerance:.0%} tolerance)" if tolerance else ""),
            )
        ]
    return []


def check_preservation(
    history: Sequence[Mapping[str, Any]],
    view: Sequence[Any],
    ignore: frozenset[str] = ANNOTATION_KEYS,
) -> list[Violation]:
    """System messages and the newest user message are in the view (callers decide whether
    they could have fit), each possibly rewritten in an equivalent shape. Identical messages
    count as many times as they occur.

    A view system message that holds the texts of two or more missing history system
    messages, in history order with anything between them, is reported as those messages
    merged (kind ``merged-system``, which the relaxation of that name accepts) rather than
    each as dropped (kind ``dropped-system``).
    """
    found = []
    free = {k: semantic(m, ignore) for k, m in enumerate(view) if isinstance(m, Mapping)}
    missing: list[tuple[int, Semantic]] = []
    for index, message in enumerate(history):
        if message.get("role") != "system":
            continue
        wanted = semantic(message, ignore)
        at = next((k for k, got in free.items() if derives(got, wanted)), None)
        if at is None:
            missing.append((index, wanted))
        else:
            del free[at]
    for at, got in free.items():
        merged = _merged_into(got, missing) if got.role == "system" else []
        if len(merged) < 2:
            continue
        missing = [m for m in missing if m[0] not in merged]
        *first, last = (f"history[{i}]" for i in merged)
        found.append(
            Violation(
                "preservation",
                f"system messages {', '.join(first)} and {last} are merged into view[{at}]",
                kind="merged-system",
            )
        )
    found.extend(
        Violation(
            "preservation", f"system message history[{index}] is dropped", kind="dropped-system"
        )
        for index, _ in missing
    )
    newest_user = newest_user_message(history)
    if newest_user is not None and not any(
        isinstance(m, Mapping) and comes_from(m, history[newest_user], ignore) for m in view
    ):
        found.append(
            Violation(
                "preservation",
                f"the newest user message, history[{newest_user}], is dropped",
                kind="dropped-user",
            )
        )
    return found


def _merged_into(got: Semantic, missing: Sequence[tuple[int, Semantic]]) -> list[int]:
    """The missing history messages whose texts ``got``'s text holds, in history order and
    not overlapping; each found as early as it can be, after the one before."""
    text = "\n".join(got.texts)
    cursor, merged = 0, []
    for index, wanted in missing:
        if not wanted.texts:
            continue
        start = cursor
        for part in wanted.texts:
            at = text.find(part, start)
            if at < 0:
                break
            start = at + len(part)
        else:
            merged.append(index)
            cursor = start
    return merged


# -- events ----------------------------------------------------------------------------------

PRE_COMPACT = "context:pre_compact"
POST_COMPACT = "context:post_compact"


def check_events(events: Iterable[tuple[str, Mapping[str, Any]]]) -> list[Violation]:
    """Each ``pre_compact`` has its ``post_compact``, in that order, with integer
    ``message_count`` and ``token_count``, and after <= before."""
    found: list[Violation] = []
    open_pre: tuple[int, Mapping[str, Any]] | None = None
    for position, (name, data) in enumerate(events):
        if name not in (PRE_COMPACT, POST_COMPACT):
            continue
        for key in ("message_count", "token_count"):
            value = data.get(key) if isinstance(data, Mapping) else None
            if isinstance(value, bool) or not isinstance(value, int):
                found.append(
                    Violation("events", f"event #{position} {name} has {key}={value!r}, not an int")
                )
        if name == PRE_COMPACT:
            if open_pre is not None:
                found.append(
                    Violation(
                        "events",
                        f"event #{position} {PRE_COMPACT} before the previous one "
                        f"(#{open_pre[0]}) got its {POST_COMPACT}",
                    )
                )
            open_pre = (position, data)
        else:
            if open_pre is None:
                found.append(
                    Violation("events", f"event #{position} {POST_COMPACT} without a {PRE_COMPACT}")
                )
                continue
            before = open_pre[1].get("token_count")
            after = data.get("token_count")
            if isinstance(before, int) and isinstance(after, int) and after > before:
                found.append(
                    Violation(
                        "events",
                        f"event #{position} {POST_COMPACT} has token_count {after}, more than "
                        f"the {before} before compaction",
                    )
                )
            open_pre = None
    if open_pre is not None:
        found.append(
            Violation("events", f"event #{open_pre[0]} {PRE_COMPACT} never got its {POST_COMPACT}")
        )
    return found
