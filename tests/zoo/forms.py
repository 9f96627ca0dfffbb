"""Members in the other forms a TARGET may take (ctxkit/forms.py): functions over the message
list, and session stores with the OpenAI Agents SDK's Session protocol.

Functions (ctxkit keeps the history and calls the function, on a copy, before every request):

- keep_last_units: correct; system messages, the newest user message and the newest 4 whole
  units, sync.
- fit_budget: correct; async, takes token_budget: the newest whole units that fit 90% of it.
- edits_in_place: correct *because ctxkit passes a copy*: it cuts long tool outputs and drops
  old units in the list it is given, then returns that list. Called on the stored history it
  would destroy it (non_destructive).
- keep_last_messages: broken; the newest 5 messages, whatever they split
  (tool_pair_integrity).
- reverses: broken; the history newest first (ordering).

Sessions (read as the Agents SDK's Runner reads them: ``get_items(session_settings.limit)``):

- LimitSession: broken; an in-memory session with a limit of 3 items, which begins a view
  with a tool result whose call it cut off, as the SDK's own sessions' get_items(limit) do
  (openai-agents-python #4322; Runner 0.24 drops such orphans itself, for Responses items
  only) (tool_pair_integrity).
- UnitSession: correct; its limit counts items, but when it must cut it returns whole units
  only.

Stdlib only; nothing of ctxkit.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from tests.zoo.base import FILL, GoodManager, clone, estimate, outputs

_PLANNER = GoodManager()
"""Only its unit logic: a call with its results, or one message alone."""

UNITS_KEPT = 4
CUT = 500


def _plan(messages: list[Any], limit: int | None, count: bool = False) -> list[int]:
    """Indices kept: pinned units (system, newest user message), then the newest complete
    units while they fit ``limit`` (tokens, or units with ``count``; None: all)."""
    units = _PLANNER._units(messages)
    kept = _PLANNER._pinned(messages, units)
    used = len(kept) if count else sum(estimate(messages[i]) for k in kept for i in units[k][0])
    for k in range(len(units) - 1, -1, -1):
        if k in kept or not units[k][1]:
            continue
        cost = 1 if count else sum(estimate(messages[i]) for i in units[k][0])
        if limit is not None and used + cost > limit:
            break
        kept.add(k)
        used += cost
    return sorted(i for k in kept for i in units[k][0])


# -- functions ------------------------------------------------------------------------------------


def keep_last_units(messages: list[dict]) -> list[dict]:
    return [messages[i] for i in _plan(messages, UNITS_KEPT + 2, count=True)]


async def fit_budget(messages: list[dict], token_budget: int | None = None) -> list[dict]:
    await asyncio.sleep(0)
    limit = None if token_budget is None else int(token_budget * FILL)
    return [messages[i] for i in _plan(messages, limit)]


def edits_in_place(history: list[dict]) -> list[dict]:
    for message in history:
        for holder in outputs(message):
            if len(holder["content"]) > CUT:
                holder["content"] = holder["content"][:CUT] + " [cut]"
    history[:] = [history[i] for i in _plan(history, UNITS_KEPT + 2, count=True)]
    return history


def keep_last_messages(messages: list[dict]) -> list[dict]:
    return messages[-5:]


def reverses(messages: list[dict]) -> list[dict]:
    return messages[::-1]


# -- sessions -------------------------------------------------------------------------------------


class LimitSession:
    """The Session protocol in memory; ``get_items()`` resolves no limit to the configured one,
    as the SDK's sessions do. Its units are Chat Completions and Anthropic ones, and it says
    so (a session is otherwise judged in Responses items, the SDK's own)."""

    ctxkit_shapes = ("openai", "anthropic")

    def __init__(self, limit: int | None = 3, session_id: str = "zoo") -> None:
        self.session_id = session_id
        self.session_settings = SimpleNamespace(limit=limit)
        self._items: list[Any] = []

    async def add_items(self, items: list[Any]) -> None:
        self._items.extend(clone(items))

    async def get_items(self, limit: int | None = None) -> list[Any]:
        limit = self.session_settings.limit if limit is None else limit
        return self._newest(clone(self._items), limit)

    def _newest(self, items: list[Any], limit: int | None) -> list[Any]:
        return items if limit is None else items[-limit:] if limit > 0 else []

    async def pop_item(self) -> Any:
        return self._items.pop() if self._items else None

    async def clear_session(self) -> None:
        self._items = []


class UnitSession(LimitSession):
    """Counts its limit in items, but returns the newest whole units within it."""

    def __init__(self, limit: int | None = 8, session_id: str = "zoo") -> None:
        super().__init__(limit, session_id)

    def _newest(self, items: list[Any], limit: int | None) -> list[Any]:
        if limit is None or limit >= len(items):
            return items  # everything fits: nothing is cut
        units = _PLANNER._units(items)
        kept: list[int] = []
        for ids, complete in reversed(units):
            if not complete:
                continue
            if len(kept) + len(ids) > limit:
                break
            kept[:0] = ids
        return [items[i] for i in kept]
