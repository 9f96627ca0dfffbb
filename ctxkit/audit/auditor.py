"""Requests into conversations, and each conversation's checks, in time order.

A request recorded with a key (``gen_ai.conversation.id``, ``session.id``,
``metadata.conversation_id``) joins that conversation. One without joins, in this order: the
conversation of its trace with the same system prompt (``trace``: several agents of one
trace, a handoff or a supervisor and its workers, are told apart by their system prompts; a
request without one joins its trace's only conversation); the conversation whose latest request
its own messages start with, as a turn of an agent loop extends the one before (``prefix``;
of several, the latest); else it starts a conversation of its own (``trace`` when it has a
trace, ``alone`` otherwise). Inference cannot follow a conversation across traces once a
compaction changed its start: a key can, which is why the report says how each was keyed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping

from ctxkit.audit.checks import ConversationAudit, Finding, fingerprint
from ctxkit.audit.request import Request
from ctxkit.tokens import DEFAULT_ENCODING, TokenCounter

__all__ = ["Auditor"]

Listener = Callable[[ConversationAudit, Request, list[Finding]], None]


def _prefix_hashes(prints: Iterable[int]) -> list[int]:
    """The hash of every prefix of a request's message fingerprints, shortest first."""
    hashes, running = [], 0
    for value in prints:
        running = hash((running, value))
        hashes.append(running)
    return hashes


def _head(request: Request, prints: list[int]) -> int | None:
    """The fingerprint of the request's system prompt (its first message, if a system
    message), which tells the agents of one trace apart."""
    first = request.messages[0] if request.messages else None
    if isinstance(first, Mapping) and first.get("role") in ("system", "developer"):
        return prints[0]
    return None


class Auditor:
    """Checks requests as they come; ``conversations`` holds the audit of each conversation
    not yet :meth:`released <release>` (all of them, unless the caller knows where they end).
    """

    def __init__(
        self,
        *,
        windows: Mapping[str, int] | None = None,
        encoding: str = DEFAULT_ENCODING,
        listener: Listener | None = None,
    ) -> None:
        self.counter = TokenCounter(encoding)
        self.windows = dict(windows or {})
        self.listener = listener
        self.conversations: dict[str, ConversationAudit] = {}
        self._by_trace: dict[str, dict[int | None, str]] = {}
        """trace id -> the conversations seen in it, by their system prompt's fingerprint
        (None: no system prompt)."""
        self._by_prefix: dict[int, str] = {}
        self._prefix_of: dict[str, int] = {}
        self._unnamed = itertools.count(1)
        self.requests = 0
        self._released_bytes = 0

    def add(
        self, request: Request, prints: list[int] | None = None
    ) -> tuple[ConversationAudit, list[Finding]]:
        """Key the request, check it in its conversation; returns both. ``prints``: its
        messages' fingerprints, where the caller has them."""
        if prints is None:
            prints = [fingerprint(m) for m in request.messages]
        key, keyed_by = self.key_of(request, prints)
        audit = self.conversations.get(key)
        if audit is None:
            audit = ConversationAudit(key, keyed_by, self.counter, self.windows)
            self.conversations[key] = audit
        if keyed_by in ("trace", "prefix"):
            audit.inferred.add(keyed_by)
        if request.partial:
            audit.partial += 1
        found = audit.add(request, prints)
        if self.listener is not None:
            self.listener(audit, request, found)
        return audit, found

    def key_of(self, request: Request, prints: list[int] | None = None) -> tuple[str, str]:
        """The conversation the request joins and how it was told (see the module), noted
        for the requests after it; nothing of the conversation is kept but what keys the next
        request, so ``ctxkit replay`` and ``ctxkit audit`` key files of any length in little
        memory (to learn where each conversation ends).
        ``prints``: its messages' fingerprints; without them, a request with a recorded key
        has only its system prompt's read (it tells the agents of a trace apart)."""
        if prints is None:
            shown = request.messages[:1] if request.key else request.messages
            prints = [fingerprint(m) for m in shown]
        prefixes = [] if request.key else _prefix_hashes(prints)
        key, keyed_by = self._key(request, prints, prefixes)
        self.requests += 1
        if request.trace_id:
            groups = self._by_trace.setdefault(request.trace_id, {})
            if key not in groups.values():
                groups[_head(request, prints)] = key
        if keyed_by in ("trace", "prefix", "alone"):
            self._remember_prefix(key, prefixes)
        return key, keyed_by

    def _key(self, request: Request, prints: list[int], prefixes: list[int]) -> tuple[str, str]:
        if request.key:
            return request.key, request.keyed_by
        groups = self._by_trace.get(request.trace_id) if request.trace_id else None
        if groups:
            head = _head(request, prints)
            if head in groups:
                return groups[head], "trace"
            if head is None and len(groups) == 1:
                return next(iter(groups.values())), "trace"  # its system prompt dropped
            return f"trace:{request.trace_id}#{len(groups) + 1}", "trace"
        for prefix in reversed(prefixes[:-1]):
            if prefix in self._by_prefix:
                return self._by_prefix[prefix], "prefix"
        if request.trace_id:
            return f"trace:{request.trace_id}", "trace"
        return f"conversation-{next(self._unnamed)}", "alone"

    def _remember_prefix(self, key: str, hashes: list[int]) -> None:
        old = self._prefix_of.pop(key, None)
        if old is not None and self._by_prefix.get(old) == key:
            del self._by_prefix[old]
        if hashes:
            self._by_prefix[hashes[-1]] = key
            self._prefix_of[key] = hashes[-1]

    def release(self, key: str) -> ConversationAudit:
        """The conversation's audit, no longer held: ``ctxkit audit`` releases each at its
        last request, so that it holds the conversations in flight, not all it read. Its
        state still counts in :meth:`state_bytes`, as it was when released."""
        audit = self.conversations.pop(key)
        self._released_bytes += audit.state_bytes()
        return audit

    def state_bytes(self) -> int:
        """Bytes kept between requests, over all conversations, each until its last request
        (see :meth:`ConversationAudit.state_bytes`), plus the keying indexes: the same
        whether conversations were released as they ended or all held to the end."""
        return (
            sum(a.state_bytes() for a in self.conversations.values())
            + self._released_bytes
            + 16 * (len(self._by_trace) + len(self._by_prefix))
        )
