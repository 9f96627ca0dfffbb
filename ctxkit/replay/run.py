"""One conversation through one manager: the agent's messages added as it added them, a view
asked for at each model call, and each view measured as the audit measures a recorded request.

Every manager, ``recorded`` included, is measured by the same code: a fresh
:class:`~ctxkit.audit.checks.ConversationAudit` per conversation judges its views (the pair
rules of the API each request went to, ordering, preservation, the context window, the
prompt-cache prefix), so a difference between two managers is a difference in what they sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxkit.audit.checks import ConversationAudit, Finding
from ctxkit.audit.request import Request
from ctxkit.audit.windows import by_prefix, context_window
from ctxkit.conformance.targets.worker_client import first_line
from ctxkit.replay.candidate import (
    Candidate,
    CandidateRaised,
    CannotLoad,
    Limits,
    TargetUnusable,
)
from ctxkit.replay.conversation import Call, Conversation
from ctxkit.replay.references import kept, text_of
from ctxkit.tokens import TokenCounter

__all__ = ["ManagerSpec", "Options", "Replayed", "replay_conversation"]

RECORDED = "recorded"


@dataclass(frozen=True, slots=True)
class ManagerSpec:
    """A manager to replay through: its name in the report, and the TARGET, ``--config`` and
    ``--form`` that build it as ``ctxkit conformance`` builds one (``recorded``: what the
    agent really sent)."""

    name: str
    target: str
    config: Mapping[str, Any] = field(default_factory=dict)
    form: str | None = None


@dataclass
class Replayed:
    """One manager's figures over one conversation."""

    key: str
    requests: int = 0
    tokens: list[int] = field(default_factory=list)
    """Tokens of each view sent."""
    budgets: list[int | None] = field(default_factory=list)
    """The budget each view was asked for under (None: no window known)."""
    billed: float = 0.0
    """Input tokens billed, a cached prefix counted at (1 - discount) of a token."""
    cost: float = 0.0
    """Dollars for the billed tokens (see :attr:`priced`)."""
    priced: bool = True
    """Every request's model had a price (``--price``): else :attr:`cost` means nothing."""
    findings: list[Finding] = field(default_factory=list)
    findings_count: int = 0
    compactions: int = 0
    prefix_kept: float | None = None
    """Of the tokens each view before the last sent, the share the next view starts with."""
    prefix_kept_tokens: int = 0
    prefix_total: int = 0
    references_needed: int = 0
    references_kept: int = 0
    error: str = ""
    """What the manager raised, or how its process stopped (:attr:`stopped`), at which
    request: the conversation's replay ended there (the figures are up to there)."""
    stopped: bool = False
    """The candidate's process ended, hung or ran out of memory (not a raise)."""
    unreconstructed: int = 0
    """Messages of the recording the recorded manager made, not replayed (a summary)."""
    views: list[list[Any]] | None = None
    """Each view, where kept (``keep_views``)."""

    @property
    def tokens_sent(self) -> int:
        return sum(self.tokens)

    @property
    def references_share(self) -> float | None:
        if not self.references_needed:
            return None
        return self.references_kept / self.references_needed

    def as_json(self) -> dict[str, Any]:
        """The conversation's figures as the report writes them."""
        return {
            "key": self.key,
            "requests": self.requests,
            "tokens_sent": self.tokens_sent,
            "tokens": list(self.tokens),
            "budgets": list(self.budgets),
            "billed_tokens": round(self.billed, 1),
            "cost": round(self.cost, 6) if self.priced and self.requests else None,
            "compactions": self.compactions,
            "prefix_kept": None if self.prefix_kept is None else round(self.prefix_kept, 4),
            "prefix_kept_tokens": self.prefix_kept_tokens,
            "prefix_tokens": self.prefix_total,
            "references_needed": self.references_needed,
            "references_found": self.references_kept,
            "references_kept": (
                None if self.references_share is None else round(self.references_share, 4)
            ),
            "findings": [
                {
                    "property": f.property,
                    "level": f.level,
                    "request": f.request,
                    "kind": f.kind,
                    "rule": f.rule,
                    "message": f.message,
                    "api": f.api,
                }
                for f in self.findings
            ],
            "unreconstructed": self.unreconstructed,
            "error": self.error,
            "stopped": self.stopped,
        }


OUTPUT_TOKENS = 4_096
"""Tokens kept for the model's answer when the budget is a model's window."""


@dataclass(frozen=True)
class Options:
    """How views are asked for and priced."""

    budget: int | None = None
    """Every request's budget; None: the model's window less :attr:`output_tokens`."""
    output_tokens: int = OUTPUT_TOKENS
    windows: Mapping[str, int] = field(default_factory=dict)
    cache_discount: float = 0.9
    keep_views: bool = False
    prices: Mapping[str, float] = field(default_factory=dict)
    """Dollars per million input tokens, by model name or prefix (``--price``)."""
    limits: Limits = field(default_factory=Limits)
    """What each candidate's worker is held to (``--timeout``, ``--memory-limit``)."""

    def budget_of(self, call: Call) -> int | None:
        if self.budget is not None:
            return self.budget
        window = context_window(call.model, self.windows)
        return None if window is None else max(1, window - self.output_tokens)

    def price_of(self, call: Call) -> float | None:
        """Dollars per million input tokens of the call's model (the longest prefix given);
        None when no --price names it."""
        return by_prefix(call.model, self.prices)


def replay_conversation(
    conversation: Conversation,
    spec: ManagerSpec,
    *,
    counter: TokenCounter,
    options: Options,
    candidate: Candidate | None = None,
) -> Replayed:
    """Replay ``conversation`` through a fresh manager of ``candidate`` (``spec``'s worker;
    None for ``recorded``, which needs none). What the candidate raised or how it stopped
    ends the conversation there and is its :attr:`Replayed.error`; the figures are up to
    there."""
    result = Replayed(conversation.key, views=[] if options.keep_views else None)
    result.unreconstructed = sum(n for _, n in conversation.unreconstructed)
    audit = ConversationAudit(conversation.key, conversation.keyed_by, counter, options.windows)
    texts: dict[int, str] = {}
    """Each message's text by its fingerprint: views repeat most of their messages."""
    try:
        if candidate is not None:
            candidate.begin()
        for call in conversation.calls:
            budget = options.budget_of(call)
            if candidate is None:
                view = conversation.recorded_view(call)
            else:
                view = candidate.turn(list(conversation.added_before(call)), budget)
            _measure(result, audit, conversation, call, view, budget, options, texts)
    except CandidateRaised as exc:
        result.error = f"request {result.requests}: {exc}"
    except (TargetUnusable, CannotLoad) as exc:  # CannotLoad: it could not start again
        result.error = f"request {result.requests}: {_one_line(str(exc))}"
        result.stopped = True
    result.findings = audit.findings + result.findings
    result.findings.sort(key=lambda f: f.request)
    result.findings_count += audit.findings_count
    result.compactions = audit.compacted
    result.prefix_kept = audit.prefix_kept
    result.prefix_kept_tokens, result.prefix_total = audit.kept_tokens, audit.total_tokens
    return result


def _one_line(stopped: str) -> str:
    """How a candidate's process stopped, in one line: a death's message ends with what the
    process printed last, of which the last line is kept."""
    said, _, printed = stopped.partition("; it printed:\n")
    said = first_line(said)
    last = printed.strip().splitlines()[-1:] if printed.strip() != "(nothing)" else []
    return said + (f"; the last it printed: {first_line(last[0])[:200]!r}" if last else "")


def _measure(
    result: Replayed,
    audit: ConversationAudit,
    conversation: Conversation,
    call: Call,
    view: list[Any],
    budget: int | None,
    options: Options,
    texts_of: dict[int, str],
) -> None:
    request = Request(
        messages=view,
        time_ns=call.time_ns,
        where=call.where,
        model=call.model,
        api=call.api,
        api_told=call.api_told,
    )
    audit.add(request)
    tokens = audit.last_tokens
    index = result.requests
    result.requests += 1
    result.tokens.append(tokens)
    result.budgets.append(budget)
    cached = audit.last_prefix_tokens
    billed = tokens - cached + cached * (1 - options.cache_discount)
    price = options.price_of(call)
    result.billed += billed
    if price is None:
        result.priced = False
    else:
        result.cost += billed * price / 1e6
    if budget is not None and tokens > budget:
        result.findings.append(
            Finding(
                "budget",
                index,
                f"the view has {tokens} tokens, over the request's budget of {budget}",
                call.where,
                "over-budget",
            )
        )
        result.findings_count += 1
    if result.views is not None:
        result.views.append(view)
    needed = conversation.references_at(call)
    if needed:
        texts = [
            texts_of.get(p) or texts_of.setdefault(p, text_of([m]))
            for p, m in zip(audit.last_prints, view, strict=True)
        ]
        result.references_needed += len(needed)
        result.references_kept += kept(needed, texts)
