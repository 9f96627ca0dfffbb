"""autogen-core's model contexts behind the context contract.

AutoGen agents keep their conversation in a ``ChatCompletionContext`` and send the model what
its ``get_messages()`` returns: ``BufferedChatCompletionContext`` (the newest ``buffer_size``
messages), ``HeadAndTailChatCompletionContext`` (the oldest ``head_size`` and newest
``tail_size``, a "Skipped N messages." note between) and ``TokenLimitedChatCompletionContext``
(messages removed from the middle until ``count_tokens`` fits ``token_limit``). Each request
builds the context over the stored history, as an agent restored from its state would, and
asks for its view; the token-limited one gets the budget as ``token_limit`` and counts with
ctxkit's encoding (:func:`counting_client`), so a token means the same to both.

Conversion (:func:`to_autogen`, :func:`from_autogen`): ``SystemMessage``, ``UserMessage``,
``AssistantMessage`` (its content is text or function calls, not both: the text of a message
that has both travels as the ``thought``), ``FunctionExecutionResultMessage`` holding every
result of one call round (consecutive OpenAI tool messages, or an Anthropic user message's
``tool_result`` blocks, whose other blocks follow as a ``UserMessage``). The contexts return
the very objects they were given, so the way back knows each one's origin and rebuilds the
history message, or the part of it the view kept, in its own shape; a message the library made
(the skipped-messages note) comes back as a user message.

autogen-core 0.7 needs protobuf 5 while amplifier-core's gRPC code needs protobuf 6: install
``ctxkit-llm[autogen]`` in an environment of its own and check it there (see the README).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from ctxkit.adapters.base import DEFAULT_MAX_TOKENS, TrimmingAdapter, library_options
from ctxkit.adapters.blocks import is_tool_result, is_tool_use, text_of
from ctxkit.messages import copy_message
from ctxkit.tokens import TokenCounter

__all__ = [
    "Buffered",
    "HeadAndTail",
    "TokenLimited",
    "counting_client",
    "from_autogen",
    "to_autogen",
]

Origins = dict[int, tuple[int, str]]
"""``id()`` of an AutoGen message -> (history index, part: ``""`` whole, ``"results"`` or
``"rest"`` of an Anthropic user message, or ``"run"`` for a run of OpenAI tool messages)."""


def _calls(message: dict[str, Any]) -> list[Any]:
    from autogen_core import FunctionCall

    content = message.get("content")
    calls = [
        FunctionCall(
            id=str(b.get("id")), name=str(b.get("name", "")), arguments=json.dumps(b.get("input"))
        )
        for b in (content if isinstance(content, list) else [])
        if is_tool_use(b)
    ]
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        calls.append(
            FunctionCall(
                id=str(call.get("id")),
                name=str(function.get("name", "")),
                arguments=str(function.get("arguments") or ""),
            )
        )
    return calls


def to_autogen(history: Sequence[dict[str, Any]]) -> tuple[list[Any], Origins]:
    """AutoGen messages for a JSON history, and where each came from."""
    from autogen_core.models import (
        AssistantMessage,
        FunctionExecutionResult,
        FunctionExecutionResultMessage,
        SystemMessage,
        UserMessage,
    )

    found: list[Any] = []
    origins: Origins = {}
    names: dict[str, str] = {}

    def result(call_id: Any, content: Any, error: bool = False) -> Any:
        call_id = str(call_id)
        return FunctionExecutionResult(
            content=text_of(content), name=names.get(call_id, ""), call_id=call_id, is_error=error
        )

    def put(message: Any, index: int, part: str = "") -> None:
        found.append(message)
        origins[id(message)] = (index, part)

    for index, message in enumerate(history):
        role, content = message["role"], message.get("content")
        if role in ("system", "developer"):
            put(SystemMessage(content=text_of(content)), index)
        elif role == "assistant":
            calls = _calls(message)
            names.update((c.id, c.name) for c in calls)
            if isinstance(content, list):
                text = text_of([b for b in content if not is_tool_use(b)])
            else:
                text = text_of(content)
            if calls:
                put(
                    AssistantMessage(content=calls, thought=text or None, source="assistant"), index
                )
            else:
                put(AssistantMessage(content=text, source="assistant"), index)
        elif role == "tool":
            last = found[-1] if found else None
            outcome = result(message.get("tool_call_id"), content)
            if last is not None and origins[id(last)][1] == "run":
                last.content.append(outcome)
                continue
            put(FunctionExecutionResultMessage(content=[outcome]), index, "run")
        elif isinstance(content, list) and any(is_tool_result(b) for b in content):
            results = [
                result(b.get("tool_use_id"), b.get("content", ""), bool(b.get("is_error")))
                for b in content
                if is_tool_result(b)
            ]
            put(FunctionExecutionResultMessage(content=results), index, "results")
            if rest := [b for b in content if not is_tool_result(b)]:
                put(UserMessage(content=text_of(rest), source="user"), index, "rest")
        else:
            put(UserMessage(content=text_of(content), source="user"), index)
    return found, origins


def from_autogen(
    messages: Sequence[Any], origins: Origins, history: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The JSON messages (or kept parts of them) that ``messages`` came from; a message the
    library made comes back as a user message of its text."""
    found: list[dict[str, Any]] = []
    previous: int | None = None  # the history message whose results the last part held
    for message in messages:
        if id(message) not in origins:
            found.append({"role": "user", "content": text_of(message.content)})
            previous = None
            continue
        index, part = origins[id(message)]
        if part == "run":  # the OpenAI tool messages of one round, from ``index`` on
            found.extend(copy_message(m) for m in history[index : index + len(message.content)])
        elif not part:
            found.append(copy_message(history[index]))
        else:
            source = history[index]
            results = part == "results"
            blocks = [copy_message(b) for b in source["content"] if is_tool_result(b) == results]
            if part == "rest" and previous == index:
                found[-1]["content"] += blocks
            else:
                found.append({**copy_message(source), "content": blocks})
        previous = index if part == "results" else None
    return found


@functools.cache
def _counting_client_class() -> type:
    """The ``ChatCompletionClient`` the token-limited context counts with, made once and on
    first use (importing this module needs no AutoGen). It answers no requests."""
    from autogen_core.models import ChatCompletionClient

    class CountingClient(ChatCompletionClient):  # type: ignore[misc]
        def __init__(self, count: Callable[[Sequence[Any]], int], budget: int) -> None:
            self._count = count
            self._budget = budget

        async def create(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("ctxkit's counting client only counts")

        def create_stream(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("ctxkit's counting client only counts")

        async def close(self) -> None:
            return None

        def actual_usage(self) -> Any:
            raise NotImplementedError

        def total_usage(self) -> Any:
            raise NotImplementedError

        def count_tokens(self, messages: Sequence[Any], *, tools: Any = ()) -> int:
            return self._count(messages)

        def remaining_tokens(self, messages: Sequence[Any], *, tools: Any = ()) -> int:
            return self._budget - self.count_tokens(messages)

        @property
        def capabilities(self) -> Any:
            return self.model_info

        @property
        def model_info(self) -> Any:
            return {
                "vision": False,
                "function_calling": True,
                "json_output": False,
                "family": "unknown",
                "structured_output": False,
            }

    return CountingClient


def counting_client(count: Callable[[Sequence[Any]], int], budget: int) -> Any:
    """A client whose ``count_tokens`` is ``count`` (AutoGen messages -> tokens)."""
    return _counting_client_class()(count, budget)


class _ModelContext(TrimmingAdapter):
    """An AutoGen ``ChatCompletionContext`` built over the history for every request. Its
    options (``OPTIONS``) reach the context's constructor exactly as written, ``None``
    included; ``DEFAULTS`` only fill keys not written; any other key is refused, naming the
    options. The context is built once while the manager is built, so a value the library
    refuses is refused then, not on every request."""

    name = "autogen"
    library_class = "ChatCompletionContext"
    OPTIONS: tuple[str, ...] = ()
    DEFAULTS: ClassVar[Mapping[str, Any]] = {}
    SET_BY_ADAPTER: ClassVar[Mapping[str, str]] = {
        "initial_messages": "the adapter gives the context the stored history on each request"
    }

    def __init__(
        self, max_tokens: int = DEFAULT_MAX_TOKENS, hooks: Any = None, **options: Any
    ) -> None:
        super().__init__(max_tokens, hooks)
        import autogen_core.model_context  # noqa: F401  (fails early if not installed)

        self.options = library_options(
            f"{self.name} ({self.library_class})",
            options,
            self.OPTIONS,
            self.DEFAULTS,
            self.SET_BY_ADAPTER,
        )
        self._context([], {}, [], self.max_tokens)

    def _context(self, messages: list[Any], origins: Origins, history: Any, budget: int) -> Any:
        raise NotImplementedError

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict[str, Any]]:
        budget = self.budget(token_budget, provider)
        history = copy_message(self._history)
        messages, origins = to_autogen(history)
        context = self._context(messages, origins, history, budget)
        return from_autogen(await context.get_messages(), origins, history)


class Buffered(_ModelContext):
    """``BufferedChatCompletionContext(buffer_size)`` (20 when not written): the newest
    messages."""

    name = "autogen:buffered"
    library_class = "BufferedChatCompletionContext"
    OPTIONS = ("buffer_size",)
    DEFAULTS: ClassVar[Mapping[str, Any]] = {"buffer_size": 20}

    def _context(self, messages: list[Any], origins: Origins, history: Any, budget: int) -> Any:
        from autogen_core.model_context import BufferedChatCompletionContext

        return BufferedChatCompletionContext(**self.options, initial_messages=messages)


class HeadAndTail(_ModelContext):
    """``HeadAndTailChatCompletionContext(head_size, tail_size)`` (3 and 17 when not
    written)."""

    name = "autogen:head_and_tail"
    library_class = "HeadAndTailChatCompletionContext"
    OPTIONS = ("head_size", "tail_size")
    DEFAULTS: ClassVar[Mapping[str, Any]] = {"head_size": 3, "tail_size": 17}

    def _context(self, messages: list[Any], origins: Origins, history: Any, budget: int) -> Any:
        from autogen_core.model_context import HeadAndTailChatCompletionContext

        return HeadAndTailChatCompletionContext(**self.options, initial_messages=messages)


class TokenLimited(_ModelContext):
    """``TokenLimitedChatCompletionContext(token_limit=budget)``. No options: the adapter sets
    ``token_limit`` (the budget) and ``model_client`` (counting with ctxkit's encoding)."""

    name = "autogen:token_limited"
    library_class = "TokenLimitedChatCompletionContext"
    SET_BY_ADAPTER: ClassVar[Mapping[str, str]] = {
        **_ModelContext.SET_BY_ADAPTER,
        "token_limit": "it is each request's budget (a request without one uses max_tokens)",
        "model_client": "the adapter's client counts with ctxkit's encoding, so a token means "
        "the same to the library and to the suite",
    }

    def _context(self, messages: list[Any], origins: Origins, history: Any, budget: int) -> Any:
        from autogen_core.model_context import TokenLimitedChatCompletionContext

        counter = TokenCounter()
        client = counting_client(
            lambda found: counter.count_messages(from_autogen(found, origins, history)), budget
        )
        # token_limit must be positive: a budget of 0 is asked as 1, which no message fits either.
        return TokenLimitedChatCompletionContext(
            client, token_limit=max(1, budget), initial_messages=messages
        )


_CLIENT = '''class CountMessages(ChatCompletionClient):
    """Counts one token a message, so token_limit is a message count."""

    def count_tokens(self, messages, *, tools=()):
        return len(messages)

    def remaining_tokens(self, messages, *, tools=()):
        return 0

    async def create(self, *args, **kwargs):
        raise NotImplementedError

    def create_stream(self, *args, **kwargs):
        raise NotImplementedError

    async def close(self):
        pass

    def actual_usage(self):
        raise NotImplementedError

    def total_usage(self):
        raise NotImplementedError

    @property
    def capabilities(self):
        return self.model_info

    @property
    def model_info(self):
        return {"vision": False, "function_calling": True, "json_output": False,
                "family": "unknown", "structured_output": False}'''


def _unpaired(view: Sequence[Any]) -> bool:
    from autogen_core.models import AssistantMessage, FunctionExecutionResultMessage

    called = {
        c.id
        for m in view
        if isinstance(m, AssistantMessage) and isinstance(m.content, list)
        for c in m.content
    }
    answered = {
        r.call_id for m in view if isinstance(m, FunctionExecutionResultMessage) for r in m.content
    }
    return called != answered


def _clipped(message: Any) -> str:
    """The message's constructor, its texts cut short (only the count matters here)."""
    if isinstance(message.content, str):
        message = message.model_copy(update={"content": message.content[:40]})
    elif message.type == "FunctionExecutionResultMessage":
        results = [r.model_copy(update={"content": r.content[:40]}) for r in message.content]
        message = message.model_copy(update={"content": results})
    return repr(message)


def bug_report(property_id: str, cell: Any) -> str:
    """An upstream report, autogen-core only: the history in AutoGen's types and the smallest
    ``token_limit`` (counting messages) at which ``TokenLimitedChatCompletionContext`` returns
    a function call without its result, or a result without its call. Empty when the failure
    is not that, or does not show when counting messages."""
    import asyncio

    from autogen_core.model_context import TokenLimitedChatCompletionContext

    from ctxkit.adapters.reports import history_before_view

    if property_id != "tool_pair_integrity" or not cell.trace:
        return ""
    history, _ = history_before_view(cell.trace)
    messages, _origins = to_autogen(history)
    client = counting_client(len, 0)
    for limit in range(1, len(messages) + 1):
        context = TokenLimitedChatCompletionContext(
            client, token_limit=limit, initial_messages=messages
        )
        if _unpaired(asyncio.run(context.get_messages())):
            break
    else:
        return ""
    listed = "\n".join(f"    {_clipped(m)}," for m in messages)
    return f"""### `TokenLimitedChatCompletionContext` returns function calls without their results

To fit `token_limit`, `TokenLimitedChatCompletionContext.get_messages()` removes messages one at
a time from the middle of the history, without regard for function calls: an
`AssistantMessage` of `FunctionCall`s can stay while the `FunctionExecutionResultMessage`
answering it goes (or the other way round). Model APIs reject such a list (OpenAI: "An
assistant message with 'tool_calls' must be followed by tool messages responding to each
'tool_call_id'"). Found by ctxkit's conformance suite; this reproducer uses autogen-core only,
with a client that counts one token a message.

```python
import asyncio

from autogen_core import FunctionCall
from autogen_core.model_context import TokenLimitedChatCompletionContext
from autogen_core.models import (
    AssistantMessage,
    ChatCompletionClient,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    SystemMessage,
    UserMessage,
)


{_CLIENT}


messages = [
{listed}
]
context = TokenLimitedChatCompletionContext(
    CountMessages(), token_limit={limit}, initial_messages=messages
)
view = asyncio.run(context.get_messages())
called = {{c.id for m in view if isinstance(m, AssistantMessage) and isinstance(m.content, list)
          for c in m.content}}
answered = {{r.call_id for m in view if isinstance(m, FunctionExecutionResultMessage)
            for r in m.content}}
unpaired = called ^ answered
assert not unpaired, f"call ids without their other half in the view: {{unpaired}}"
```

Expected: a view that keeps or removes each function call together with its results.
"""
