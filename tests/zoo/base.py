"""GoodManager: a correct context manager, the base each broken member of the zoo breaks once.

Stdlib only, and nothing of ctxkit: a manager must not share code with the checker that
judges it. Tokens are a conservative local estimate; views fill 90% of the budget.
"""

from __future__ import annotations

import copy
import json
import marshal
from collections.abc import Mapping
from typing import Any

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
PRE_COMPACT = "context:pre_compact"
POST_COMPACT = "context:post_compact"
FILL = 0.9


_JSON = json.JSONEncoder(ensure_ascii=False, default=str).encode
"""``json.dumps`` with these options builds an encoder at each call."""

_SIZES: dict[bytes, int] = {}
"""Estimates by marshal's bytes of the message: equal bytes are equal values (1, 1.0 and
True apart), so equal JSON. Every view estimates every message of the history again, and
marshal writes a message several times faster than JSON does."""


def estimate(message: Any) -> int:
    """Tokens of one message, on the high side: two bytes of JSON a token, plus framing.

    Two, not three: numbered log lines and CJK text run at 2.1-2.4 bytes a cl100k token.
    """
    try:
        key = marshal.dumps(message)
    except ValueError:  # what marshal cannot write (an object of its own): not kept
        return len(_JSON(message).encode()) // 2 + 8
    size = _SIZES.get(key)
    if size is None:
        if len(_SIZES) > 100_000:
            _SIZES.clear()
        size = _SIZES[key] = len(_JSON(message).encode()) // 2 + 8
    return size


_PLAIN = frozenset({str, int, float, bool, type(None)})


def clone(value: Any) -> Any:
    """A copy that shares nothing with ``value``, as ``copy.deepcopy`` makes: marshal's round
    trip, two to three times as fast for JSON data as copying part by part (the suite calls
    ``get_messages()`` after every step). What marshal cannot write is copied part by part."""
    try:
        return marshal.loads(marshal.dumps(value))
    except ValueError:
        return _copied(value)


def _copied(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _PLAIN else _copied(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _PLAIN else _copied(v) for v in value]
    return value if kind in _PLAIN else copy.deepcopy(value)


def total(messages: list[Any]) -> int:
    return sum(estimate(m) for m in messages)


def role_of(message: Any) -> Any:
    return message.get("role") if isinstance(message, dict) else None


def blocks(message: Any) -> list[dict]:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def call_ids(message: Any) -> list[Any]:
    """Ids an assistant message calls: OpenAI ``tool_calls`` or Anthropic ``tool_use`` blocks."""
    if role_of(message) != "assistant":
        return []
    openai = [c.get("id") for c in message.get("tool_calls") or () if isinstance(c, dict)]
    return openai or [b.get("id") for b in blocks(message) if b.get("type") == "tool_use"]


def result_ids(message: Any) -> list[Any]:
    """Ids a message answers: a ``tool`` message, or the ``tool_result`` blocks it holds."""
    if role_of(message) == "tool":
        return [message.get("tool_call_id")]
    return [b.get("tool_use_id") for b in blocks(message) if b.get("type") == "tool_result"]


def outputs(message: Any) -> list[dict]:
    """The dicts holding a tool output string: a ``tool`` message or its ``tool_result`` blocks."""
    if role_of(message) == "tool":
        return [message] if isinstance(message.get("content"), str) else []
    found = [b for b in blocks(message) if b.get("type") == "tool_result"]
    return [b for b in found if isinstance(b.get("content"), str)]


def results_by_id(view: list[Any]) -> list[Any]:
    """The view with the results of each message's parallel calls sorted by call id: the
    OpenAI ``tool`` messages right after a calling message, and the ``tool_result`` blocks of
    an Anthropic user message (edited in place: the view is the manager's own copy)."""
    index = 0
    while index < len(view):
        message = view[index]
        for owner in (message,) if role_of(message) == "user" else ():
            results = [b for b in blocks(owner) if b.get("type") == "tool_result"]
            others = [b for b in owner["content"] if b not in results] if results else []
            if results:
                owner["content"] = [*sorted(results, key=lambda b: str(b["tool_use_id"])), *others]
        end = index + 1
        if role_of(message) == "assistant" and message.get("tool_calls"):
            while end < len(view) and role_of(view[end]) == "tool":
                end += 1
            view[index + 1 : end] = sorted(
                view[index + 1 : end], key=lambda m: str(m.get("tool_call_id"))
            )
        index = end
    return view


def validate(message: Any) -> None:
    """Raise ValueError for a message no provider would accept."""
    if not isinstance(message, dict):
        raise ValueError(f"a message must be a dict, not {type(message).__name__}")
    if message.get("role") not in ROLES:
        raise ValueError(f"unknown role {message.get('role')!r}; use one of {sorted(ROLES)}")
    if "parts" in message:
        raise ValueError("Gemini and GenAI parts are not taken here: content, please")
    content = message.get("content")
    if isinstance(content, list) and not all(isinstance(b, dict) and "type" in b for b in content):
        raise ValueError("every content block needs a type (Bedrock blocks are not taken here)")
    if message["role"] == "tool" and not message.get("tool_call_id"):
        raise ValueError("a tool message needs the tool_call_id it answers")
    for call in message.get("tool_calls") or ():
        if not isinstance(call, dict) or not call.get("id"):
            raise ValueError("every tool call needs an id")
    for block in content if isinstance(content, list) else ():
        if block["type"] == "tool_use" and not block.get("id"):
            raise ValueError("a tool_use block needs an id")
        if block["type"] == "tool_result" and not block.get("tool_use_id"):
            raise ValueError("a tool_result block needs the tool_use_id it answers")
        if block["type"] == "text" and not isinstance(block.get("text"), str):
            raise ValueError("a text block needs its text")


class GoodManager:
    """Correct: stores deep copies; a view is every system message, the newest user message
    and the newest whole units that fit 90% of the budget, in history order. It reads Chat
    Completions and Anthropic messages, and says so (the suite judges it in these)."""

    ctxkit_shapes = ("openai", "anthropic")

    def __init__(self, *, max_tokens: int = 4000, hooks: Any = None) -> None:
        self.max_tokens = max_tokens
        self.hooks = hooks
        self._messages: list[Any] = []

    async def add_message(self, message: dict) -> None:
        self._validate(message)
        self._messages.append(self._stored(message))  # no await before this: atomic

    async def get_messages(self) -> list[dict]:
        return clone(self._messages)

    async def set_messages(self, messages: list[dict]) -> None:
        for message in messages:
            self._validate(message)
        self._messages = [self._stored(m) for m in messages]

    async def clear(self) -> None:
        self._messages = []

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict]:
        history = self._prepared(list(self._messages))
        kept = self._plan(history, int(self._budget(token_budget, provider) * FILL))
        view = self._render(history, kept)
        if len(kept) < len(history):
            await self._emit(
                PRE_COMPACT, {"message_count": len(history), "token_count": total(history)}
            )
            await self._emit(POST_COMPACT, {"message_count": len(view), "token_count": total(view)})
        return view

    # -- the parts the broken members override --------------------------------------------

    def _validate(self, message: Any) -> None:
        validate(message)

    def _stored(self, message: dict) -> Any:
        return clone(message)

    def _calls(self, message: Any) -> list[Any]:
        return call_ids(message)

    def _results(self, message: Any) -> list[Any]:
        return result_ids(message)

    def _prepared(self, history: list[Any]) -> list[Any]:
        """The history as this manager's views show it, planned and counted in that form
        (new dicts for any message it changes: the stored ones stay as they are)."""
        return history

    def _budget(self, token_budget: int | None, provider: Any) -> int:
        if token_budget is not None:
            return token_budget
        info = provider.get_info() if provider is not None else None
        defaults = (
            info.get("defaults") if isinstance(info, Mapping) else getattr(info, "defaults", None)
        )
        if isinstance(defaults, Mapping) and "context_window" in defaults:
            reserved = defaults.get("max_output_tokens", 0) + defaults.get("safety_margin", 0)
            return defaults["context_window"] - reserved
        return self.max_tokens

    def _units(self, history: list[Any]) -> list[tuple[list[int], bool]]:
        """(indices, complete) for each unit: a call with the results right after it, or one
        message alone. An unanswered call or a stray result is incomplete: never shown."""
        units, index = [], 0
        while index < len(history):
            message, stop = history[index], index + 1
            after = history[stop] if stop < len(history) else None
            waiting = set(self._calls(message))
            if waiting and message.get("tool_calls"):  # OpenAI: the tool messages after it
                while role_of(after) == "tool" and after.get("tool_call_id") in waiting:
                    waiting.discard(after["tool_call_id"])
                    stop += 1
                    after = history[stop] if stop < len(history) else None
            elif waiting and role_of(after) == "user" and set(self._results(after)) == waiting:
                waiting, stop = set(), stop + 1  # Anthropic: the next user message answers all
            stray = stop == index + 1 and bool(self._results(message))
            units.append((list(range(index, stop)), not waiting and not stray))
            index = stop
        return units

    def _pinned(self, history: list[Any], units: list[tuple[list[int], bool]]) -> set[int]:
        """Units always kept: system messages and the newest user message of the person."""
        heads = [history[ids[0]] for ids, _ in units]
        users = [k for k, m in enumerate(heads) if role_of(m) == "user" and not self._results(m)]
        return {k for k, m in enumerate(heads) if role_of(m) == "system"} | set(users[-1:])

    def _plan(self, history: list[Any], limit: int) -> list[int]:
        """Indices of the history the view keeps: pinned units, then the newest that fit."""
        units = self._units(history)
        kept = self._pinned(history, units)
        cost = [sum(estimate(history[i]) for i in ids) for ids, _ in units]
        used = sum(cost[k] for k in kept)
        for k in range(len(units) - 1, -1, -1):
            if k in kept or not units[k][1]:
                continue
            if used + cost[k] > limit:
                break
            kept.add(k)
            used += cost[k]
        return sorted(i for k in kept for i in units[k][0])

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        return [clone(history[i]) for i in kept]

    async def _emit(self, name: str, data: dict) -> None:
        if self.hooks is not None:
            await self.hooks.emit(name, data)
