"""A conversation rebuilt from its recorded requests: what the agent added, and when it called
the model.

A message first seen in request k was added before request k: the history is the recorded
messages in the order they were first seen, each repeat of a message in a request matched to
one already added as the audit matches two requests (:func:`~ctxkit.audit.checks.match_repeats`:
two equal messages in a row stay two). A new message the request puts
before one it repeats was not added by the agent but made by whatever managed its context (a
summary, a truncated output, an edited message): it cannot be added to the history, so it is
counted and said (:attr:`Conversation.unreconstructed`), and the rest is replayed.

The model's output at a call is what the recording kept of it (``gen_ai.output.messages`` and
its kin), else what the next request adds first, while it is the model's (assistant turns,
Responses call and reasoning items); a last call whose output was not kept is left out of what
needs it (references kept).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxkit.audit.checks import fingerprint, match_repeats
from ctxkit.audit.request import Request
from ctxkit.conformance.judge.parts import is_call_item, reasoning_id

__all__ = ["Call", "Conversation", "is_output"]


def is_output(message: Any) -> bool:
    """A message the model wrote: an assistant (or Gemini ``model``) turn, or a Responses
    output item (a call, reasoning)."""
    if not isinstance(message, Mapping):
        return False
    if is_call_item(message) or reasoning_id(message) is not None:
        return True
    return message.get("role") in ("assistant", "model")


@dataclass(frozen=True, slots=True)
class Call:
    """One model call: the recorded request, and how much of the history it came after."""

    index: int
    """The request's index in its conversation (0-based, in time order, as in the audit)."""
    added: int
    """The history's length when the call was made: its first ``added`` messages."""
    recorded: tuple[int, ...]
    """The recorded request's messages, as fingerprints into :attr:`Conversation.messages`."""
    model: str
    api: str
    api_told: str
    where: str
    time_ns: int
    output: tuple[Any, ...] | None = None
    """The model's answer as the recording kept it (None: not kept)."""


@dataclass
class Conversation:
    """A conversation's history and calls, built request by request (:meth:`add`)."""

    key: str
    keyed_by: str
    messages: dict[int, Any] = field(default_factory=dict)
    """Every message seen, by fingerprint."""
    history: list[int] = field(default_factory=list)
    """The agent's messages in the order it added them, as fingerprints."""
    calls: list[Call] = field(default_factory=list)
    unreconstructed: list[tuple[int, int]] = field(default_factory=list)
    """``(request, messages)``: new messages a request put before ones it repeats (a summary,
    a truncation): made by the recorded manager, not added by the agent, so not replayed."""
    _references: list[frozenset[str]] | None = field(default=None, repr=False, compare=False)

    def add(self, request: Request, prints: list[int] | None = None) -> None:
        """The next request of the conversation (in time order); ``prints``: its messages'
        fingerprints, where the caller has them."""
        if prints is None:
            prints = [fingerprint(m) for m in request.messages]
        for value, message in zip(prints, request.messages, strict=True):
            self.messages.setdefault(value, message)
        matched, _ = match_repeats(self.history, prints)
        last = max((i for i, p in enumerate(matched) if p is not None), default=-1)
        inserted = sum(1 for i in range(last) if matched[i] is None)
        if inserted:
            self.unreconstructed.append((len(self.calls), inserted))
        self.history.extend(prints[i] for i in range(last + 1, len(prints)))
        self.calls.append(
            Call(
                len(self.calls),
                len(self.history),
                tuple(prints),
                request.model,
                request.api,
                request.api_told,
                request.where,
                request.time_ns,
                None if request.output is None else tuple(request.output),
            )
        )

    def added_before(self, call: Call) -> list[Any]:
        """The messages the agent added before ``call`` and after the call before it."""
        start = self.calls[call.index - 1].added if call.index else 0
        return [self.messages[p] for p in self.history[start : call.added]]

    def output_of(self, call: Call) -> list[Any] | None:
        """What the model answered at ``call``: as the recording kept it, else the model's
        messages the next request adds first; None for a last call whose answer was not
        kept."""
        if call.output is not None:
            return list(call.output)
        if call.index + 1 >= len(self.calls):
            return None
        output = []
        for message in self.added_before(self.calls[call.index + 1]):
            if not is_output(message):
                break
            output.append(message)
        return output

    def references_at(self, call: Call) -> frozenset[str]:
        """The references the model's answer at ``call`` uses from the messages the agent
        added before it (:mod:`ctxkit.replay.references`); found for every call at once, the
        first time one is asked, whatever the managers."""
        if self._references is None:
            from ctxkit.replay.references import references, text_of

            texts: dict[int, str] = {}

            def text(value: int) -> str:
                if value not in texts:
                    texts[value] = text_of([self.messages[value]])
                return texts[value]

            found = []
            for each in self.calls:
                answer = self.output_of(each)
                earlier = (text(p) for p in self.history[: each.added])
                found.append(
                    frozenset(references(text_of(answer), earlier)) if answer else frozenset()
                )
            self._references = found
        return self._references[call.index]

    def recorded_view(self, call: Call) -> list[Any]:
        return [self.messages[p] for p in call.recorded]
