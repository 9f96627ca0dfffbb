"""Members that break the edges of the protocol: events, bad input, hanging, sync methods.

- BadEvents: emits post_compact without its pre_compact, with a string token_count.
- AcceptsGarbage: add_message stores anything, non-dicts and unknown roles included.
- Hangs: get_messages_for_request never returns once the history holds 3+ messages.
- SyncMethods: correct, but the protocol methods are plain functions, not coroutines.
- LacksClear: correct, but it has no clear() method.
- NeverEmits: correct, takes hooks, but never emits an event.
- SlowViews: correct, but each view takes ``delay`` seconds (3 by default).
- OpenAIOnly: correct for OpenAI-shaped messages, refuses Anthropic blocks.
- SlowFirstView: correct, but the first view of each process takes ``delay`` seconds.
- SlowFirstBuild: correct, but the first manager each process builds takes ``delay`` seconds.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.zoo.base import FILL, PRE_COMPACT, GoodManager, clone


class BadEvents(GoodManager):
    """Fault (events): views are correct, but a compaction emits ``context:post_compact``
    alone (no ``context:pre_compact`` before it), and its token_count is a string such as
    ``"812 tokens"`` instead of an int."""

    async def _emit(self, name: str, data: dict) -> None:
        if name == PRE_COMPACT:
            return
        await super()._emit(name, {**data, "token_count": f"{data['token_count']} tokens"})


class AcceptsGarbage(GoodManager):
    """Fault (robustness): add_message and set_messages validate nothing, so non-dicts,
    messages without a role or with an unknown one, and tool messages without a
    tool_call_id are stored without an error."""

    def _validate(self, message: Any) -> None:
        pass


class Hangs(GoodManager):
    """Fault (hang): get_messages_for_request sleeps an hour, that is never returns in a test,
    once the history holds 3 or more messages. A checker must report it as an error that says
    it timed out."""

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict]:
        if len(self._messages) >= 3:
            await asyncio.sleep(3600)
        return await super().get_messages_for_request(token_budget, provider)


class SyncMethods(GoodManager):
    """Fault (protocol): behaves like GoodManager, but add_message, get_messages_for_request,
    get_messages, set_messages and clear are plain ``def`` functions, so ``await`` on their
    results fails. A checker must refuse it as a usage error (exit 2), before any example,
    naming the methods that have to be coroutines (``async def``)."""

    def add_message(self, message: dict) -> None:  # type: ignore[override]
        self._validate(message)
        self._messages.append(self._stored(message))

    def get_messages_for_request(  # type: ignore[override]
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict]:
        history = list(self._messages)
        return self._render(
            history, self._plan(history, int(self._budget(token_budget, provider) * FILL))
        )

    def get_messages(self) -> list[dict]:  # type: ignore[override]
        return clone(self._messages)

    def set_messages(self, messages: list[dict]) -> None:  # type: ignore[override]
        for message in messages:
            self._validate(message)
        self._messages = [self._stored(m) for m in messages]

    def clear(self) -> None:  # type: ignore[override]
        self._messages = []


class LacksClear(GoodManager):
    """Fault (protocol): no ``clear()`` (the class hides it). Built, it does not follow the
    contract: a checker reports ``lifecycle`` failed, naming the method it lacks."""

    clear = None  # type: ignore[assignment]


class NeverEmits(GoodManager):
    """Correct, and takes ``hooks=``, but never emits an event: the events property has
    nothing to judge, and must say so instead of passing."""

    async def _emit(self, name: str, data: dict) -> None:
        return None


class SlowViews(GoodManager):
    """Correct, but every view takes ``delay`` seconds (3 by default), like a library that
    summarizes or re-tokenizes a long history on each request. The run must still end by its
    deadline with a verdict, not an error."""

    def __init__(self, *, delay: float = 3.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay = delay

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict]:
        await asyncio.sleep(self.delay)
        return await super().get_messages_for_request(token_budget, provider)


class OpenAIOnly(GoodManager):
    """Correct for the OpenAI shape; refuses any message with Anthropic content blocks other
    than text. It declares nothing, so the default run judges it in Chat Completions alone,
    where it must pass: nothing the run sends, not even a whole history given to
    set_messages, may be in another shape."""

    ctxkit_shapes = None

    def _validate(self, message: Any) -> None:
        super()._validate(message)
        content = message.get("content")
        if isinstance(content, list) and any(b.get("type") != "text" for b in content):
            raise ValueError("this manager takes OpenAI-shaped messages only")


class SlowFirstView(GoodManager):
    """Correct, but the first view a process serves takes ``delay`` seconds (a cold cache, a
    busy machine). Past --timeout once, it answers within the grace a run's first timeout
    gets: slowness, not a hang, so nothing may be charged for it."""

    served = False

    def __init__(self, *, delay: float = 2.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay = delay

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict]:
        if not SlowFirstView.served:
            SlowFirstView.served = True
            await asyncio.sleep(self.delay)
        return await super().get_messages_for_request(token_budget, provider)


class SlowFirstBuild(GoodManager):
    """Correct, but the first manager a process builds takes ``delay`` seconds (a library
    that imports its tokenizer on first use, a busy machine): the first build is the run's
    first call, so it gets the same grace, and nothing may be charged for it (found in CI,
    where a loaded machine failed a whole run for it)."""

    built = False

    def __init__(self, *, delay: float = 2.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not SlowFirstBuild.built:
            SlowFirstBuild.built = True
            time.sleep(delay)


class AnthropicStrictChatLenient(GoodManager):
    """Correct but unusual: speaks Anthropic alone, and refuses what Anthropic refuses, but
    takes a Chat Completions message it cannot read (a call without an id) as a text turn, as
    a manager written for one API may. Judged in Anthropic, robustness must pass on every
    seed: another shape's bad messages are never tried."""

    ctxkit_shapes = "anthropic"

    def _validate(self, message: Any) -> None:
        if isinstance(message, dict) and "tool_calls" in message:
            return  # not Anthropic's: a text turn to this manager
        super()._validate(message)


class AnthropicLenient(GoodManager):
    """Fault (robustness): speaks Anthropic alone, and takes a tool_use block without an id,
    which Anthropic refuses: found on every seed, since every bad message of the judged
    shapes is tried."""

    ctxkit_shapes = "anthropic"

    def _validate(self, message: Any) -> None:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_use" for b in content
        ):
            return
        super()._validate(message)
