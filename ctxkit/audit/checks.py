"""The audit's checks: each request against the provider's rules, and each request against the
one before it in its conversation.

The per-request checks are the conformance suite's own, asked of the rule set of the API the
request went to (:func:`~ctxkit.conformance.judge.invariants.check_tool_pairs` with its
``api``): a third caller beside the state machine and ``instrument()``. Across requests, a
:class:`ConversationAudit` keeps only fingerprints of the previous request's messages (8 bytes
each in the analysis, plus their token counts), never their text, and infers what the manager
did between the two requests:

* messages of the previous request that are gone (``dropped``) or that came back after being
  gone (``re-added``), and new messages before the last kept one (``rewritten``: a summary, a
  truncated output): together an inferred compaction;
* ``ordering`` (required): two messages both requests carry, in a different order; the
  results of one message's calls may trade places where their API takes them in any order
  (the previous request's runs of them,
  :func:`~ctxkit.conformance.judge.invariants.result_groups`, kept as a byte a message);
* ``preservation`` (recommended): the system prompt gone, or the newest user message gone
  with no newer one;
* ``tool_pair_integrity`` (required) across requests: a Responses ``reasoning`` item or an
  Anthropic turn's thinking blocks, seen with a call earlier, no longer with it;
* ``budget`` (recommended): more tokens than the model's context window;
* the prompt-cache figure: how many of the previous request's tokens the request starts with
  (and, where the provider reported cached tokens, that figure beside it).
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ctxkit.audit.apis import API_NAMES
from ctxkit.audit.request import Request
from ctxkit.audit.windows import context_window
from ctxkit.conformance.judge.catalogue import by_id
from ctxkit.conformance.judge.comes_from import ALWAYS_IGNORED
from ctxkit.conformance.judge.invariants import (
    Violation,
    check_tool_pairs,
    moves,
    result_groups,
)
from ctxkit.conformance.judge.parts import (
    THINKING,
    blocks,
    calls,
    is_call_item,
    positional,
    reasoning_id,
    user_turn,
)
from ctxkit.conformance.judge.parts import results as result_ids
from ctxkit.shapes.rules import rule, rule_set, system_in_messages
from ctxkit.tokens import TokenCounter

__all__ = ["Compaction", "ConversationAudit", "Finding", "fingerprint", "match_repeats"]

KEPT = 100
"""Per conversation, the newest findings kept for the report (and a fifth as many
compactions; the counts go on): a conversation's memory stays bounded however long it runs."""

NEAR_WINDOW = 0.9
"""A request at this share of its model's window or more is near it."""

_DROPPED_KEPT = 64
"""How many dropped fingerprints a conversation remembers, to tell a message re-added."""


def fingerprint(message: Any) -> int:
    """A message's identity between requests: equal messages (as recorded: the same keys in
    the same order, which one recorder keeps), equal fingerprints. ``repr`` is exact for the
    JSON values messages are made of, and five times faster than writing JSON with sorted
    keys; a message recorded with its keys in another order only reads as rewritten.
    Prompt-caching hints (``cache_control``, which agents move to the newest message on every
    turn) are no part of a message's identity."""
    text = repr(message)
    if "cache_control" in text:
        text = repr(_without_hints(message))
    return hash(text)


def _without_hints(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_hints(v) for k, v in value.items() if k not in ALWAYS_IGNORED}
    if isinstance(value, list):
        return [_without_hints(v) for v in value]
    return value


class _Blanks(dict):
    """Placeholders of an error text the finding cannot fill stay as they are."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


@dataclass(frozen=True, slots=True)
class Finding:
    """One broken property at one request of a conversation (0-based, in time order)."""

    property: str
    request: int
    message: str
    where: str = ""
    kind: str = ""
    rule: str = ""
    messages: tuple[int, ...] = ()
    """Indices of the messages involved, in the request's messages."""
    ids: tuple[str, ...] = ()
    """The call ids involved."""
    api: str = ""
    """The API the request went to, whose rules judged it (see :mod:`ctxkit.audit.apis`)."""
    api_told: str = ""
    """What told the API."""
    api_index: int | None = None
    """The first message's index in the API's own list, where that differs (a system prompt
    recorded first that the API takes beside the list)."""

    @property
    def level(self) -> str:
        return by_id(self.property).level

    @property
    def provider_error(self) -> str:
        """The provider's error text, with the ids and index of this request filled in."""
        if not self.rule:
            return ""
        known = _Blanks(ids=", ".join(self.ids))
        if self.ids:
            known["id"] = known["call_id"] = self.ids[0]
        if self.messages:
            known["index"] = str(self.messages[0] if self.api_index is None else self.api_index)
        return rule(self.rule).error.format_map(known)

    def as_dict(self) -> dict[str, Any]:
        return {
            "property": self.property,
            "level": self.level,
            "request": self.request,
            "where": self.where,
            "kind": self.kind,
            "message": self.message,
            "messages": list(self.messages),
            "ids": list(self.ids),
            "rule": self.rule,
            "provider_error": self.provider_error,
            "api": API_NAMES.get(self.api, self.api),
            "api_told": self.api_told,
        }

    @property
    def judged(self) -> str:
        """How it was judged: ``as OpenAI Responses (told by the span name '...')``, or ``by
        the rules every API shares (the recording names no API)``."""
        way = "as" if self.api else "by"
        name = API_NAMES.get(self.api, self.api)
        return f"{way} {name} ({self.api_told})" if self.api_told else f"{way} {name}"


@dataclass(frozen=True, slots=True)
class Compaction:
    """What the manager did between request ``request - 1`` and ``request``, inferred."""

    request: int
    dropped: int
    rewritten: int
    re_added: int
    tokens_before: int
    tokens_after: int


_VIEW_INDEX = re.compile(r"view\[(\d+)\]")


def _in_request_words(sentence: str, start: int) -> str:
    """A suite sentence about a view (the request from message ``start`` on), said of the
    recorded request."""
    return _VIEW_INDEX.sub(lambda m: f"message[{int(m.group(1)) + start}]", sentence).replace(
        "the view", "the request"
    )


def _beside(messages: list[Any], index: int) -> int:
    """A message's index once the system messages before it are taken out of the list, as an
    API that keeps the system prompt beside it (Anthropic, Gemini, Bedrock) counts."""
    return index - sum(1 for m in messages[:index] if _is_system(m))


def _is_system(message: Any) -> bool:
    return (type(message) is dict or isinstance(message, Mapping)) and message.get("role") in (
        "system",
        "developer",
    )


def _splice(previous: Sequence[int], current: Sequence[int]) -> tuple[int, int] | None:
    """``(head, resume)`` when ``current`` is ``previous[:head] + previous[resume:]`` and then
    only messages that were not in ``previous[head:resume]`` (an agent loop's next turn; a
    window that dropped messages after a kept head); None otherwise (a dropped message that
    comes back later may be a reorder: the general matching decides)."""
    head, limit = 0, min(len(previous), len(current))
    while head < limit and previous[head] == current[head]:
        head += 1
    if head == len(previous):
        return head, head
    if head == len(current):
        return None
    first = current[head]
    for resume in range(head + 1, len(previous)):
        length = len(previous) - resume
        if (
            previous[resume] == first
            and head + length <= len(current)
            and list(current[head : head + length]) == list(previous[resume:])
        ):
            gone = set(previous[head:resume])
            if any(value in gone for value in current[head + length :]):
                return None
            return head, resume
    return None


def match_repeats(previous: Sequence[int], current: Sequence[int]) -> tuple[list[int | None], bool]:
    """For each current message, the previous request's position it repeats (None: new), and
    whether any repeat comes earlier than one before it (a reorder).

    Each repeat takes the first unused equal message after the last one taken, else the first
    unused one anywhere (which is a reorder): equal messages in a row never read as reordered.
    """
    where: dict[int, list[int]] = {}
    for position, key in enumerate(previous):
        where.setdefault(key, []).append(position)
    used: set[int] = set()
    last = -1
    reordered = False
    matched: list[int | None] = []
    for key in current:
        positions = [p for p in where.get(key, ()) if p not in used]
        later = [p for p in positions if p > last]
        if later:
            matched.append(later[0])
            used.add(later[0])
            last = later[0]
        elif positions:
            matched.append(positions[0])
            used.add(positions[0])
            reordered = True
        else:
            matched.append(None)
    return matched, reordered


@dataclass
class ConversationAudit:
    """One conversation's requests, checked as they come (in time order)."""

    key: str
    keyed_by: str
    """The attribute that keyed it (``gen_ai.conversation.id``, ``session.id``,
    ``metadata.conversation_id``), or how it was inferred: ``trace``, ``prefix``, ``alone``."""
    counter: TokenCounter
    windows: Mapping[str, int] = field(default_factory=dict)
    requests: int = 0
    findings: list[Finding] = field(default_factory=list)
    findings_count: int = 0
    """Findings in all (``findings`` keeps the newest :data:`KEPT`)."""
    compactions: list[Compaction] = field(default_factory=list)
    partial: int = 0
    late: int = 0
    """Requests that arrived after a newer one of the conversation was audited: checked
    alone, not against their neighbours."""
    last_time_ns: int = 0
    near_window: int = 0
    models: set[str] = field(default_factory=set)
    kept_tokens: int = 0
    """Over all requests after the first: tokens that repeat the previous request's start."""
    total_tokens: int = 0
    """Over all requests after the first: the previous request's tokens."""
    cached_reported: int = 0
    input_reported: int = 0
    count_errors: int = 0
    """Requests whose provider reported input tokens."""
    count_error_sum: float = 0.0
    """Sum over those of (ctxkit's count - reported input tokens) / reported."""
    count_error_max: float = 0.0
    """The largest such error, in absolute value."""
    compacted: int = 0
    """Inferred compactions in all (``compactions`` keeps the latest :data:`KEPT`)."""
    inferred: set[str] = field(default_factory=set)
    """How its requests were joined to it when no key was recorded (``trace``, ``prefix``)."""
    last_tokens: int = 0
    last_window: int | None = None
    last_prefix_tokens: int = 0
    """The latest request's tokens that repeat the previous request's start."""
    last_previous_tokens: int = 0
    """The previous request's tokens (0 for a conversation's first request)."""
    first_cache_break: int | None = None
    _previous: array[int] = field(default_factory=lambda: array("q"))
    _previous_tokens: array[int] = field(default_factory=lambda: array("q"))
    _dropped: array[int] = field(default_factory=lambda: array("q"))
    """Fingerprints of the latest dropped messages, to tell one that comes back."""
    _attached: dict[str, int] = field(default_factory=dict)
    """A call id -> the fingerprint of what must travel with it (reasoning item, thinking)."""
    _previous_system: int = 0
    _window_of: dict[str, int | None] = field(default_factory=dict)
    _pairs_clean: bool = False
    _boundaries: bytearray = field(default_factory=bytearray)
    """Per message of the previous request: nothing pending before it."""
    _call_at: dict[str, int] = field(default_factory=dict)
    """Each call id of the previous request -> its position."""
    _joins: bytearray = field(default_factory=bytearray)
    """Per message of the previous request: it is a result that may trade places with the
    message before it (one run of results its API takes in any order)."""
    _previous_newest_user: int | None = None

    def state_bytes(self) -> int:
        """What the conversation keeps between requests, in bytes: fingerprints, counts and
        positions as the 8-byte values they are, a byte per boundary and per join flag, and the
        call ids' characters (Python's own object overhead left out)."""
        ids = [*self._attached, *self._call_at]
        return (
            8
            * (
                3 * len(self._previous)
                + len(self._dropped)
                + len(self._attached)
                + len(self._call_at)
            )
            + len(self._boundaries)
            + len(self._joins)
            + sum(len(k) for k in ids)
        )

    @property
    def last_prints(self) -> Sequence[int]:
        """The fingerprints of the messages of the latest request checked in its place."""
        return self._previous

    def add(self, request: Request, prints: list[int] | None = None) -> list[Finding]:
        """Check one request (``prints``: its messages' fingerprints, if the caller has
        them); returns (and keeps) its findings."""
        index = self.requests
        self.requests += 1
        self.models.add(request.model)
        messages = request.messages
        if prints is None:
            prints = [fingerprint(m) for m in messages]
        splice = _splice(self._previous, prints) if self._previous else None
        if splice is not None:  # counts of what repeats are known; only new messages counted
            head, resume = splice
            repeated = head + len(self._previous) - resume
            tokens = [
                *self._previous_tokens[:head],
                *self._previous_tokens[resume:],
                *(self._count(m) for m in messages[repeated:]),
            ]
        else:
            known = dict(zip(self._previous, self._previous_tokens, strict=True))
            tokens = [
                known[p] if p in known else self._count(m)
                for p, m in zip(prints, messages, strict=True)
            ]
        systems = sum(1 for m in messages if _is_system(m))
        found: list[Finding] = []
        late = bool(index) and request.time_ns < self.last_time_ns
        joins = self._joins  # the previous request's, before _pairs learns this one's
        found.extend(self._pairs(index, request, prints, alone=late))
        if late:
            # Arrived after a newer request was audited: its own rules are checked, but
            # comparing it with its neighbours would accuse the manager of the delivery's
            # disorder.
            self.late += 1
            self._keep(found, request)
            return found
        self.last_time_ns = request.time_ns
        found.extend(self._attachments(index, messages, prints, splice))
        if index:
            found.extend(
                self._against_previous(index, request, prints, tokens, systems, splice, joins)
            )
        found.extend(self._window(index, request, sum(tokens)))
        self._account_usage(request, sum(tokens))
        self._previous, self._previous_tokens = array("q", prints), array("q", tokens)
        self._previous_system = systems
        self._previous_newest_user = next(
            (i for i in range(len(messages) - 1, -1, -1) if user_turn(messages[i])), None
        )
        self._keep(found, request)
        return found

    def _keep(self, found: list[Finding], request: Request) -> None:
        beside = bool(request.api) and not system_in_messages(request.api)
        found[:] = [
            replace(
                f,
                api=request.api,
                api_told=request.api_told,
                api_index=(
                    _beside(request.messages, f.messages[0]) if beside and f.messages else None
                ),
            )
            for f in found
        ]
        self.findings_count += len(found)
        self.findings.extend(found)
        if len(self.findings) > KEPT:
            del self.findings[:-KEPT]

    # -- per request ---------------------------------------------------------------------

    def _count(self, message: Any) -> int:
        try:
            return self.counter.count_message(message) if isinstance(message, Mapping) else 0
        except (TypeError, ValueError, AttributeError):
            return 0

    def _pairs(
        self, index: int, request: Request, prints: list[int], *, alone: bool = False
    ) -> list[Finding]:
        """The pair rules of the request's API, on the request as that API received it. A
        request that repeats a clean previous request's head and end, each cut at a unit
        boundary (an agent loop's next turn, a sliding window that keeps the system prompt),
        is checked from where it stops repeating: what it repeats was checked, and nothing was
        pending where it resumes. One checked ``alone`` (a late request) is checked whole and
        leaves what the next one is checked against as it was."""
        messages = request.messages
        carried = None if alone else self._carried(prints)
        start = carried[0] + len(self._previous) - carried[1] if carried else 0
        violations = check_tool_pairs(messages[start:] if start else messages, request.api)
        if carried:
            violations.extend(self._repeated_ids(messages, start, carried, request.api))
        found = []
        for violation in violations:
            if request.partial and violation.kind == "stray":
                continue  # the call is in an earlier response, on the provider's side
            found.append(
                Finding(
                    violation.property,
                    index,
                    _in_request_words(violation.message, start),
                    request.where,
                    violation.kind,
                    violation.rule,
                    () if violation.at is None else (violation.at + start,),
                    violation.ids,
                )
            )
        if not alone:
            self._remember_boundaries(messages, start, carried, clean=not violations)
        return found

    def _carried(self, prints: list[int]) -> tuple[int, int] | None:
        """``(head, resume)`` when the request starts with the previous request's first
        ``head`` messages followed by all of them from ``resume`` on, both cuts at unit
        boundaries of a clean previous request; else None (checked whole)."""
        previous, boundaries = self._previous, self._boundaries
        if not self._pairs_clean or not previous or not prints:
            return None
        head = 0
        limit = min(len(previous), len(prints))
        while head < limit and previous[head] == prints[head]:
            head += 1
        if head == len(previous):
            return head, head  # the previous request, extended
        while head and not boundaries[head]:
            head -= 1
        if head >= len(prints):
            return None
        for resume in range(head, len(previous)):
            length = len(previous) - resume
            if (
                previous[resume] == prints[head]
                and boundaries[resume]
                and head + length <= len(prints)
                and prints[head : head + length] == previous[resume:].tolist()
            ):
                return head, resume
        return None

    def _repeated_ids(
        self, messages: list[Any], start: int, carried: tuple[int, int], api: str
    ) -> list[Violation]:
        """Calls after ``start`` that reuse an id a repeated call already has (indexes from
        ``start``, as the judge gives them for the rest of the request)."""
        head, resume = carried
        found = []
        for offset, message in enumerate(messages[start:]):
            if not isinstance(message, Mapping) or positional(message):
                continue
            for call_id in calls(message):
                earlier = self._call_at.get(call_id)
                if earlier is not None and (earlier < head or earlier >= resume):
                    shown = earlier if earlier < head else earlier - resume + head
                    found.append(
                        Violation(
                            "tool_pair_integrity",
                            f"view[{offset}] calls {call_id}, already called by message[{shown}]",
                            (call_id,),
                            "duplicate",
                            rule_set(api).breaking("duplicate") if api else "",
                            offset,
                        )
                    )
        return found

    def _remember_boundaries(
        self, messages: list[Any], start: int, carried: tuple[int, int] | None, *, clean: bool
    ) -> None:
        """Where nothing is pending (every call before answered), each call's position, and
        which results may trade places with the message before them: what the next request's
        incremental check and its ordering need. A cut is at a boundary, where no run of
        results goes on, so a run is learnt from what is new alone."""
        self._pairs_clean = clean
        groups = result_groups(messages[start:] if start else messages)
        joins = bytearray(group < k for k, group in enumerate(groups))
        if carried:
            head, resume = carried
            joins[:0] = self._joins[:head] + self._joins[resume:]
            if resume > head and head < len(joins):
                joins[head] = 0  # joined to what was cut (never, at a boundary)
            boundaries = bytearray(self._boundaries[:head] + self._boundaries[resume:])
            call_at = {
                call_id: at if at < head else at - resume + head
                for call_id, at in self._call_at.items()
                if at < head or at >= resume
            }
        else:
            boundaries, call_at = bytearray(), {}
        pending: set[str] = set()
        for position in range(start, len(messages)):
            message = messages[position]
            boundaries.append(not pending)
            if not isinstance(message, Mapping):
                continue
            if positional(message):
                pending.add("?")  # known by place, not id: no boundary until a clean restart
                continue
            pending.difference_update(result_ids(message))
            for call_id in calls(message):
                pending.add(call_id)
                call_at[call_id] = position
        self._boundaries, self._call_at, self._joins = boundaries, call_at, joins

    def _attachments(
        self,
        index: int,
        messages: list[Any],
        prints: list[int],
        splice: tuple[int, int] | None,
    ) -> list[Finding]:
        """Reasoning items and thinking blocks seen with a call must stay with it. A message
        that follows the same message as in the previous request was checked there (a run of
        call items is looked at whole); the turn the last message answers always is."""
        found: list[Finding] = []
        previous = self._previous
        start = 0
        if not self._attached and previous and splice is not None:
            # Nothing learnt yet, so nothing to check: only learn, from what is new (and the
            # message before it, which may be the reasoning item of a new call).
            head, resume = splice
            start = max(0, head + len(previous) - resume - 1)
        seen = (
            {hash((a, b)) for a, b in zip([0, *previous], previous, strict=False)}
            if self._attached
            else set()
        )
        for position in range(start, len(messages)):
            message = messages[position]
            if (
                seen
                and hash((prints[position - 1] if position else 0, prints[position])) in seen
                and position != len(messages) - 2
                and not (position and is_call_item(messages[position - 1]))
            ):
                continue
            if not isinstance(message, Mapping):
                continue
            before = position - 1
            while before >= 0 and is_call_item(messages[before]):
                before -= 1
            reasoning = (
                prints[before]
                if before >= 0 and reasoning_id(messages[before]) is not None
                else None
            )
            thinking = [b for b in blocks(message) if str(b.get("type")) in THINKING]
            leading = fingerprint(thinking) if thinking else None
            for call_id in calls(message):
                if is_call_item(message):
                    wanted = self._attached.get(f"r:{call_id}")
                    if wanted is not None and reasoning != wanted:
                        found.append(
                            Finding(
                                "tool_pair_integrity",
                                index,
                                f"message[{position}] is the call {call_id}, but the reasoning "
                                "item that preceded it in an earlier request is not right "
                                "before it",
                                kind="reasoning-separated",
                                rule="responses.reasoning_with_call",
                                messages=(position,),
                            )
                        )
                    elif reasoning is not None:
                        self._attached[f"r:{call_id}"] = reasoning
                else:
                    wanted = self._attached.get(f"t:{call_id}")
                    answered_last = position == len(messages) - 2 and call_id in result_ids(
                        messages[-1]
                    )
                    if wanted is not None and leading != wanted and answered_last:
                        found.append(
                            Finding(
                                "tool_pair_integrity",
                                index,
                                f"message[{position}] is the assistant turn whose tool calls "
                                "the last message answers, but it no longer starts with the "
                                "thinking blocks it had in an earlier request",
                                kind="thinking-dropped",
                                rule="anthropic.thinking_kept",
                                messages=(position,),
                            )
                        )
                    elif leading is not None:
                        self._attached[f"t:{call_id}"] = leading
        return found

    def _window(self, index: int, request: Request, tokens: int) -> list[Finding]:
        self.last_tokens = tokens
        if request.model not in self._window_of:
            self._window_of[request.model] = context_window(request.model, self.windows)
        window = self._window_of[request.model]
        self.last_window = window
        if window is None:
            return []
        if tokens >= NEAR_WINDOW * window:
            self.near_window += 1
        if tokens <= window:
            return []
        return [
            Finding(
                "budget",
                index,
                f"the request has {tokens} tokens, over {request.model}'s context window of "
                f"{window}",
                request.where,
                "over-window",
            )
        ]

    def _account_usage(self, request: Request, tokens: int) -> None:
        usage = request.usage
        if usage is None or not usage.input_tokens:
            return
        self.input_reported += usage.input_tokens
        self.cached_reported += usage.cached_tokens or 0
        error = (tokens - usage.input_tokens) / usage.input_tokens
        self.count_errors += 1
        self.count_error_sum += error
        self.count_error_max = max(self.count_error_max, abs(error))

    # -- against the previous request ----------------------------------------------------

    def _against_previous(
        self,
        index: int,
        request: Request,
        prints: list[int],
        tokens: list[int],
        systems: int,
        splice: tuple[int, int] | None,
        joins: bytearray,
    ) -> list[Finding]:
        previous = self._previous
        if splice is not None:  # the common case, without the general matching's search
            head, resume = splice
            kept_tail = len(previous) - resume
            matched: list[int | None] = [
                *range(head),
                *range(resume, len(previous)),
                *([None] * (len(prints) - head - kept_tail)),
            ]
            reordered = False
        else:
            matched, reordered = match_repeats(previous, prints)
        found: list[Finding] = []
        if reordered:
            found.extend(self._reorders(index, request, matched, joins))
        kept = {p for p in matched if p is not None}
        dropped = [p for p in range(len(previous)) if p not in kept]
        last_kept = max((i for i, p in enumerate(matched) if p is not None), default=-1)
        rewritten = sum(1 for i in range(last_kept) if matched[i] is None)
        re_added = sum(1 for i, p in enumerate(matched) if p is None and prints[i] in self._dropped)
        self._dropped.extend(previous[position] for position in dropped)
        if len(self._dropped) > _DROPPED_KEPT:
            del self._dropped[: len(self._dropped) - _DROPPED_KEPT]
        if dropped or rewritten:
            self.compacted += 1
            if len(self.compactions) >= KEPT // 5:
                del self.compactions[0]
            self.compactions.append(
                Compaction(
                    index,
                    len(dropped),
                    rewritten,
                    re_added,
                    sum(self._previous_tokens),
                    sum(tokens),
                )
            )
        found.extend(self._preservation(index, request, systems, matched, dropped))
        prefix = 0
        while prefix < min(len(previous), len(prints)) and previous[prefix] == prints[prefix]:
            prefix += 1
        self.last_prefix_tokens = sum(tokens[:prefix])
        self.last_previous_tokens = sum(self._previous_tokens)
        self.kept_tokens += self.last_prefix_tokens
        self.total_tokens += self.last_previous_tokens
        if prefix < len(previous) and self.first_cache_break is None:
            self.first_cache_break = index
        return found

    def _reorders(
        self, index: int, request: Request, matched: list[int | None], joins: bytearray
    ) -> list[Finding]:
        """One finding per moved message: the fewest moves that explain the new order, the
        results of one message's calls in any order among themselves where their API takes
        them so (``joins``: the previous request's runs of them)."""
        groups: list[int] = []
        for position in range(len(self._previous)):
            joined = position < len(joins) and joins[position] and position
            groups.append(groups[-1] if joined else position)
        return [
            Finding(
                "ordering",
                index,
                f"message[{move.position}] (was message[{move.source}] of the previous request) "
                f"{move.said}: the history is reordered",
                request.where,
                "reordered",
                messages=(move.position,),
            )
            for move in moves(matched, groups)
        ]

    def _preservation(
        self,
        index: int,
        request: Request,
        now_system: int,
        matched: list[int | None],
        dropped: list[int],
    ) -> list[Finding]:
        found = []
        previous_system = self._previous_system
        if previous_system and now_system < previous_system:
            found.append(
                Finding(
                    "preservation",
                    index,
                    f"the request has {now_system} system message(s), the previous one had "
                    f"{previous_system}: the system prompt is dropped",
                    request.where,
                    "dropped-system",
                )
            )
        newest = self._previous_newest_user
        if newest is not None and newest in dropped:
            new_users = [
                i for i, m in enumerate(request.messages) if user_turn(m) and matched[i] is None
            ]
            if not new_users:
                found.append(
                    Finding(
                        "preservation",
                        index,
                        f"the newest user message (message[{newest}] of the previous request) "
                        "is dropped, and no newer one is in the request",
                        request.where,
                        "dropped-user",
                    )
                )
        return found

    # -- summary ---------------------------------------------------------------------------

    @property
    def prefix_kept(self) -> float | None:
        """The prompt-cache figure: of the tokens each request before the last sent, the share
        the next request starts with, message for message (None with one request)."""
        return self.kept_tokens / self.total_tokens if self.total_tokens else None

    @property
    def verdict(self) -> str:
        levels = {f.level for f in self.findings}
        if "required" in levels:
            return "fail"
        return "warn" if levels else "pass"
