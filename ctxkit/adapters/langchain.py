"""``langchain_core.messages.trim_messages`` behind the context contract.

Messages cross to LangChain's types and back faithfully (:func:`to_langchain`,
:func:`from_langchain`): OpenAI-shaped messages map one to one; an Anthropic user message
holding ``tool_result`` blocks becomes one ``ToolMessage`` per result (followed by a
``HumanMessage`` for its other blocks), as LangChain models tool results, and comes back as one
user message again. Each LangChain message carries the id of the history message it came from,
which ``trim_messages`` keeps, so the way back knows each message's shape. Keys LangChain does
not model travel in ``additional_kwargs`` and come back as they were.

Tokens are counted with ctxkit's exact counter on each message's JSON form (plus the reply
priming of a request), so "fits the budget" means the same to the library and to the suite.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from ctxkit.adapters.base import DEFAULT_MAX_TOKENS, TrimmingAdapter, library_options
from ctxkit.adapters.blocks import is_tool_result, is_tool_use
from ctxkit.adapters.reports import history_before_view
from ctxkit.tokens import REPLY_PRIMING, TokenCounter

__all__ = [
    "TrimMessagesFirst",
    "TrimMessagesLast",
    "bug_report",
    "counting",
    "from_langchain",
    "to_langchain",
]

_MODELLED = {"role", "content", "tool_calls", "tool_call_id", "name"}


def _shape(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result") for b in content
    ):
        return "anthropic"
    return "openai"


def _extras(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in _MODELLED}


def to_langchain(history: Sequence[dict[str, Any]]) -> list[Any]:
    """LangChain messages for a JSON history; ids ``"<index>"`` or ``"<index>.<part>"``."""
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

    found: list[Any] = []
    for index, message in enumerate(history):
        role, content = message["role"], message.get("content")
        common: dict[str, Any] = {"additional_kwargs": _extras(message)}
        if "name" in message:
            common["name"] = message["name"]
        if role in ("system", "developer"):
            found.append(SystemMessage(content=content or "", id=str(index), **common))
        elif role == "assistant":
            found.append(_assistant(message, str(index), common))
        elif role == "tool":
            found.append(
                ToolMessage(
                    content=content or "",
                    tool_call_id=message.get("tool_call_id", ""),
                    id=str(index),
                    **common,
                )
            )
        elif isinstance(content, list) and any(is_tool_result(b) for b in content):
            rest = [b for b in content if not is_tool_result(b)]
            results = [b for b in content if b not in rest]
            for part, block in enumerate(results):
                found.append(
                    ToolMessage(
                        content=block.get("content", ""),
                        tool_call_id=block.get("tool_use_id", ""),
                        status="error" if block.get("is_error") else "success",
                        id=f"{index}.{part}",
                        additional_kwargs={
                            "block": {k: v for k, v in block.items() if k != "content"}
                        },
                    )
                )
            if rest:
                found.append(HumanMessage(content=rest, id=f"{index}.{len(results)}", **common))
        else:
            found.append(
                HumanMessage(
                    content=content if content is not None else "", id=str(index), **common
                )
            )
    return found


def _assistant(message: dict[str, Any], id_: str, common: dict[str, Any]) -> Any:
    from langchain_core.messages import AIMessage

    content = message.get("content")
    calls: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    if isinstance(content, list):  # Anthropic: text blocks stay content, tool_use become calls
        calls = [
            {
                "id": b.get("id"),
                "name": b.get("name", ""),
                "args": b.get("input") or {},
                "type": "tool_call",
            }
            for b in content
            if is_tool_use(b)
        ]
        content = [b for b in content if not is_tool_use(b)]
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        try:
            args = json.loads(arguments) if arguments else {}
        except (TypeError, ValueError):
            args = None
        if isinstance(args, dict):
            calls.append(
                {
                    "id": call.get("id"),
                    "name": function.get("name", ""),
                    "args": args,
                    "type": "tool_call",
                }
            )
        else:
            invalid.append(
                {
                    "id": call.get("id"),
                    "name": function.get("name"),
                    "args": arguments,
                    "error": None,
                    "type": "invalid_tool_call",
                }
            )
    return AIMessage(
        content=content if content is not None else "",
        tool_calls=calls,
        invalid_tool_calls=invalid,
        id=id_,
        **common,
    )


def from_langchain(
    messages: Sequence[Any], history: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """JSON messages for LangChain messages made by :func:`to_langchain` from ``history``:
    each in the shape its history message had; the parts of one Anthropic user message that
    arrive together become one message again."""
    found: list[dict[str, Any]] = []
    previous: str | None = None
    for message in messages:
        origin = str(message.id or "").split(".")[0]
        source = history[int(origin)] if origin.isdigit() and int(origin) < len(history) else {}
        shape = _shape(source) if source else "openai"
        converted = _message(message, shape)
        if "." in str(message.id) and origin == previous and found:
            found[-1]["content"] = [*found[-1]["content"], *converted["content"]]
        else:
            found.append(converted)
        previous = origin if "." in str(message.id) else None
    return found


def _message(message: Any, shape: str) -> dict[str, Any]:
    extras = dict(message.additional_kwargs)
    block = extras.pop("block", None)
    kind = message.type
    named = {"name": message.name} if getattr(message, "name", None) is not None else {}
    if kind == "system":
        return {"role": "system", "content": message.content, **named, **extras}
    if kind == "tool" and block is not None:
        return {"role": "user", "content": [{**block, "content": message.content}]}
    if kind == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": message.content,
            **named,
            **extras,
        }
    if kind == "ai":
        return _assistant_json(message, shape, named, extras)
    return {"role": "user", "content": message.content, **named, **extras}


def _assistant_json(
    message: Any, shape: str, named: dict[str, Any], extras: dict[str, Any]
) -> dict[str, Any]:
    if shape == "anthropic":
        content = (
            message.content
            if isinstance(message.content, list)
            else ([{"type": "text", "text": message.content}] if message.content else [])
        )
        uses = [
            {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]}
            for c in message.tool_calls
        ]
        return {"role": "assistant", "content": [*content, *uses], **named, **extras}
    calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
        }
        for c in message.tool_calls
    ] + [
        {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["args"]}}
        for c in message.invalid_tool_calls
    ]
    converted: dict[str, Any] = {"role": "assistant", "content": message.content or None}
    if calls:
        converted["tool_calls"] = calls
    return {**converted, **named, **extras}


def counting(history: list[dict[str, Any]], counter: TokenCounter) -> Callable[[list[Any]], int]:
    """A ``token_counter`` for LangChain messages made by :func:`to_langchain` from
    ``history``: ctxkit's exact count of each message in its own shape, plus the reply priming
    of a request."""
    memo: dict[str, int] = {}

    def count(messages: list[Any]) -> int:
        total = 0
        for message in messages:
            key = str(message.id)
            if key not in memo:
                memo[key] = counter.count_message(from_langchain([message], history)[0])
            total += memo[key]
        return total + (REPLY_PRIMING if messages else 0)

    return count


class _TrimMessages(TrimmingAdapter):
    """``trim_messages`` with ``strategy`` and the options the user writes, each passed to the
    library exactly as written (``None`` included). Only a key not written gets the adapter's
    default: for ``strategy="last"`` the chat-history settings of LangChain's docs,
    ``include_system=True`` and ``start_on="human"``; for ``"first"`` none (the library's)."""

    name = "langchain:trim_messages"
    strategy = "last"
    OPTIONS = ("include_system", "start_on", "end_on", "allow_partial", "text_splitter")
    DEFAULTS: ClassVar[Mapping[str, Any]] = {"include_system": True, "start_on": "human"}

    def __init__(
        self, max_tokens: int = DEFAULT_MAX_TOKENS, hooks: Any = None, **options: Any
    ) -> None:
        super().__init__(max_tokens, hooks)
        from langchain_core.messages import trim_messages  # fails early if not installed

        self._trim = trim_messages
        self.options = library_options(
            f"{self.name} (trim_messages)",
            options,
            self.OPTIONS,
            self.DEFAULTS,
            {
                "strategy": "the adapter's name sets it (langchain:trim_messages is 'last', "
                "langchain:trim_messages:first is 'first')",
                "token_counter": "the adapter counts with ctxkit's exact counter, so 'fits "
                "the budget' means the same to the library and to the suite",
            },
        )
        # The library's own checks of its options (start_on with strategy="first", ...) refuse
        # a bad combination now, while the manager is built, instead of on every request.
        trim_messages([], max_tokens=0, token_counter=len, strategy=self.strategy, **self.options)
        self._counter = TokenCounter()

    def _counting(self, history: list[dict[str, Any]]) -> Callable[[list[Any]], int]:
        return counting(history, self._counter)

    def trim(self, history: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
        kept = self._trim(
            to_langchain(history),
            max_tokens=budget,
            token_counter=self._counting(history),
            strategy=self.strategy,
            **self.options,
        )
        return from_langchain(kept, history)


class TrimMessagesLast(_TrimMessages):
    """Keeps the newest messages that fit: LangChain's recommended chat-history trimming."""

    strategy = "last"


class TrimMessagesFirst(_TrimMessages):
    """Keeps the oldest messages that fit."""

    name = "langchain:trim_messages:first"
    strategy = "first"
    DEFAULTS: ClassVar[Mapping[str, Any]] = {}


def _split_pairs(view: list[Any]) -> bool:
    called = {c["id"] for m in view if m.type == "ai" for c in m.tool_calls}
    answered = {m.tool_call_id for m in view if m.type == "tool"}
    return called != answered


def _constructor(message: Any) -> str:
    from ctxkit.literal import literal

    content = message.content  # with token_counter=len only the message count matters
    fields = {"content": content[:40] if isinstance(content, str) else content}
    if message.type == "ai" and message.tool_calls:
        fields["tool_calls"] = [
            {"id": c["id"], "name": c["name"], "args": c["args"]} for c in message.tool_calls
        ]
    if message.type == "tool":
        fields["tool_call_id"] = message.tool_call_id
    inner = ", ".join(f"{k}={literal(v, 8, 60)}" for k, v in fields.items())
    return f"{type(message).__name__}({inner})"


def bug_report(property_id: str, cell: Any, strategy: str = "first") -> str:
    """An upstream report, LangChain only: the history in LangChain's types and the smallest
    ``max_tokens`` (counting messages, ``token_counter=len``) at which ``trim_messages``
    returns tool calls without their results or results without their calls. Empty when the
    failure is not that, or does not show with a message count."""
    from langchain_core.messages import trim_messages

    if property_id != "tool_pair_integrity" or not cell.trace:
        return ""
    history, _ = history_before_view(cell.trace)
    messages = to_langchain(history)
    options = {"strategy": strategy, "include_system": strategy == "last"}
    if strategy == "last":
        options["start_on"] = "human"
    for budget in range(len(messages) + 1):
        view = trim_messages(messages, max_tokens=budget, token_counter=len, **options)
        if _split_pairs(view):
            break
    else:
        return ""
    listed = "\n".join(f"    {_constructor(m)}," for m in messages)
    arguments = ", ".join(f"{k}={v!r}" for k, v in options.items())
    return f"""### `trim_messages` returns tool calls without their results

With `strategy={strategy!r}`, `trim_messages` cuts between an `AIMessage` that calls tools and
the `ToolMessage`s that answer it. Chat model APIs reject such a list (OpenAI: "messages with
role 'tool' must be a response to a preceding message with 'tool_calls'"; Anthropic: every
`tool_use` needs its `tool_result`). Found by ctxkit's conformance suite; this reproducer uses
langchain-core only.

```python
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages import trim_messages

messages = [
{listed}
]
view = trim_messages(messages, max_tokens={budget}, token_counter=len, {arguments})
called = {{c["id"] for m in view if isinstance(m, AIMessage) for c in m.tool_calls}}
answered = {{m.tool_call_id for m in view if isinstance(m, ToolMessage)}}
unpaired = called ^ answered
assert not unpaired, f"tool ids without their other half in the view: {{unpaired}}"
```

Expected: a view that keeps or drops each tool call together with its results.
"""


def bug_report_last(property_id: str, cell: Any) -> str:
    """:func:`bug_report` for ``strategy="last"``."""
    return bug_report(property_id, cell, "last")
