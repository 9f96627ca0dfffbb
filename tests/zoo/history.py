"""Members that break what is stored: non_destructive, lifecycle, isolation, concurrency.

- DestructiveCompaction: compacting deletes the dropped messages from stored history.
- MutatesStoredContent: compacting cuts long tool outputs in stored history, in place.
- ClearKeepsHistory: clear() resets a view cache but keeps the stored messages.
- SetMessagesAppends: set_messages(x) appends x instead of replacing the history.
- LeaksReferences: stores the caller's dicts and hands out its internal list.
- LosesConcurrentAdds: add_message copies, awaits, then writes back, losing concurrent adds.
- SetMessagesKeepsList: set_messages keeps the caller's list, so later edits change history.
- DropsThenRefuses: a refused view first deletes the oldest message (and it refuses too often).
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.zoo.base import GoodManager, clone, outputs, total

CUT = 500


class DestructiveCompaction(GoodManager):
    """Fault (non_destructive): when a view drops messages, they are deleted from stored
    history too, so get_messages() afterwards lacks the old messages."""

    def _plan(self, history: list[Any], limit: int) -> list[int]:
        kept = super()._plan(history, limit)
        if len(kept) < len(history):
            self._messages = [history[i] for i in kept]
        return kept


class MutatesStoredContent(GoodManager):
    """Fault (non_destructive): when the history is over budget, tool outputs longer than 500
    characters are cut to 500 in the stored messages themselves (OpenAI ``tool`` content,
    Anthropic ``tool_result`` content), so get_messages() no longer returns what was added."""

    def _plan(self, history: list[Any], limit: int) -> list[int]:
        if total(history) > limit:
            for owner in (o for m in history for o in outputs(m)):  # stored dicts, not copies
                if len(owner["content"]) > CUT:
                    owner["content"] = owner["content"][:CUT]
        return super()._plan(history, limit)


class ClearKeepsHistory(GoodManager):
    """Fault (lifecycle): clear() forgets the cached view but not the stored messages, so
    get_messages() and the next view still hold the old conversation."""

    async def clear(self) -> None:
        self._last_view = None  # the only cache there is; self._messages stays


class SetMessagesAppends(GoodManager):
    """Fault (lifecycle): set_messages(x) appends x to the history instead of replacing it,
    so get_messages() == old + x."""

    async def set_messages(self, messages: list[dict]) -> None:
        for message in messages:
            self._validate(message)
        self._messages.extend(self._stored(m) for m in messages)


class LeaksReferences(GoodManager):
    """Fault (isolation): stores the caller's dicts without copying and returns its internal
    list from get_messages(), so editing a passed-in or returned message (or the returned
    list) edits the stored history."""

    def _stored(self, message: dict) -> Any:
        return message

    async def get_messages(self) -> list[dict]:
        return self._messages


class LosesConcurrentAdds(GoodManager):
    """Fault (concurrency): add_message takes a snapshot, awaits, then writes back snapshot +
    message, so adds that run concurrently overwrite each other and messages are lost."""

    async def add_message(self, message: dict) -> None:
        self._validate(message)
        snapshot = list(self._messages)
        await asyncio.sleep(0)  # e.g. a token count on a worker
        self._messages = [*snapshot, clone(message)]


class SetMessagesKeepsList(GoodManager):
    """Fault (isolation): set_messages validates and then keeps the very list it was given
    (its messages copied, the list not), so a caller that appends to or edits its list
    afterwards changes the stored history."""

    async def set_messages(self, messages: list[dict]) -> None:
        for message in messages:
            self._validate(message)
        messages[:] = [self._stored(m) for m in messages]
        self._messages = messages


class DropsThenRefuses(GoodManager):
    """Fault (non_destructive), and only when refusing: a budget under its own (high) estimate
    of the newest message first makes it delete the oldest stored message (trying to make
    room), then raise. Its refusals are also too eager (lifecycle): the estimate runs high.
    Every view it returns leaves the history alone, so only a refusal shows the first fault."""

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict]:
        budget = self._budget(token_budget, provider)
        if self._messages and budget < total(self._messages[-1:]):
            if len(self._messages) > 1:
                del self._messages[0]
            raise ValueError(f"the newest message does not fit a budget of {budget} tokens")
        return await super().get_messages_for_request(token_budget, provider)
