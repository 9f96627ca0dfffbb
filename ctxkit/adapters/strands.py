"""strands-agents' conversation managers behind the context contract.

Strands keeps a conversation in ``Agent.messages`` (Bedrock Converse messages: ``user`` and
``assistant`` roles, content blocks ``text``, ``toolUse``, ``toolResult``) and its conversation
managers edit that list in place: after every cycle (``apply_management``) and whenever the
model reports that the context overflows (``reduce_context``, then the call is retried). The
adapter does exactly that with a real ``Agent``: a request applies the management, then, while
the view does not fit the budget, reports an overflow to ``reduce_context``, as the agent loop
does. The library's edits stay in the history, as they do in Strands.

Conversion (:func:`to_strands`, :func:`from_strands`): leading system messages become the
agent's system prompt, which Strands never trims; a later system message becomes a user text
message (how reminders are injected in Strands); OpenAI tool messages answering one assistant
message become one user message of ``toolResult`` blocks, as Strands stores them. Each Strands
message carries the JSON messages it came from under ``"ctxkit"``, so a message the library did
not change comes back exactly; one it changed (a truncated tool result) comes back with the
library's text in its own shape; one it made (a summary) comes back as a user message.

Summaries need a model: ``RecapModel`` is a local, deterministic Strands ``Model`` that
answers with a one-line recap, so what is judged is the manager's choice of what to summarize.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ctxkit.adapters.base import (
    DEFAULT_MAX_TOKENS,
    LibraryAdapter,
    library_options,
    split_system,
)
from ctxkit.adapters.blocks import is_tool_result, is_tool_use, text_of
from ctxkit.messages import copy_message, inspect_message, validate_history
from ctxkit.tokens import TokenCounter

__all__ = [
    "SlidingWindow",
    "Summarizing",
    "from_strands",
    "to_strands",
]

SOURCE = "ctxkit"
"""The key of a Strands message that holds the JSON messages it came from."""


def _result_block(tool_use_id: str, content: Any, error: bool = False) -> dict[str, Any]:
    return {
        "toolResult": {
            "toolUseId": tool_use_id,
            "content": [{"text": text_of(content)}],
            "status": "error" if error else "success",
        }
    }


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return [{"text": text_of(content)}]
    blocks: list[dict[str, Any]] = []
    for block in content:
        if is_tool_result(block):
            blocks.append(
                _result_block(
                    str(block.get("tool_use_id", "")),
                    block.get("content", ""),
                    bool(block.get("is_error")),
                )
            )
        elif isinstance(block, dict) and block.get("type") == "text":
            blocks.append({"text": str(block.get("text", ""))})
        else:  # images and other blocks: Strands only needs to see that something is there
            blocks.append({"text": json.dumps(block, ensure_ascii=False, default=str)})
    return blocks


def _assistant_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    blocks: list[dict[str, Any]] = []
    if isinstance(content, list):
        for block in content:
            if is_tool_use(block):
                blocks.append(
                    {
                        "toolUse": {
                            "toolUseId": str(block.get("id", "")),
                            "name": str(block.get("name", "")),
                            "input": block.get("input") or {},
                        }
                    }
                )
            else:
                blocks.append({"text": text_of([block])})
    elif content:
        blocks.append({"text": text_of(content)})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (TypeError, ValueError):
            arguments = {}
        blocks.append(
            {
                "toolUse": {
                    "toolUseId": str(call.get("id", "")),
                    "name": str(function.get("name", "")),
                    "input": arguments if isinstance(arguments, dict) else {},
                }
            }
        )
    return blocks


def _content(sources: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Strands content of the JSON messages ``sources`` (one message, or a run of
    OpenAI tool messages)."""
    first = sources[0]
    role = first["role"]
    if role == "tool":
        return [_result_block(str(s.get("tool_call_id", "")), s.get("content")) for s in sources]
    if role == "assistant":
        return _assistant_blocks(first)
    if role in ("system", "developer"):
        return [{"text": text_of(first.get("content"))}]
    return _user_blocks(first.get("content"))


def _strands_message(sources: list[dict[str, Any]]) -> dict[str, Any]:
    role = "assistant" if sources[0]["role"] == "assistant" else "user"
    return {"role": role, "content": _content(sources), SOURCE: sources}


def _append(messages: list[dict[str, Any]], source: dict[str, Any]) -> None:
    """Add the JSON message ``source`` to Strands messages: an OpenAI tool message joins the
    run of results before it (one Strands message per round), anything else is a message."""
    sources = messages[-1][SOURCE] if messages and SOURCE in messages[-1] else []
    if source["role"] == "tool" and sources and sources[-1]["role"] == "tool":
        sources.append(source)
        messages[-1]["content"] = _content(sources)
    else:
        messages.append(_strands_message([source]))


def to_strands(history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Strands messages for JSON messages that follow the system prompt."""
    found: list[dict[str, Any]] = []
    for message in history:
        _append(found, copy_message(message))
    return found


def _results(content: Sequence[dict[str, Any]]) -> dict[str, str]:
    return {
        b["toolResult"].get("toolUseId", ""): "".join(
            item.get("text", "") for item in b["toolResult"].get("content", [])
        )
        for b in content
        if isinstance(b, dict) and "toolResult" in b
    }


def _rewritten(source: dict[str, Any], results: dict[str, str]) -> dict[str, Any]:
    """``source`` with the tool results Strands rewrote (truncated) in its own shape."""
    changed = copy_message(source)
    if changed["role"] == "tool" and changed.get("tool_call_id") in results:
        changed["content"] = results[changed["tool_call_id"]]
    elif isinstance(changed.get("content"), list):
        for block in changed["content"]:
            if is_tool_result(block):
                block["content"] = results.get(block.get("tool_use_id"), block.get("content"))
    return changed


def from_strands(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """JSON messages for Strands messages: each as it came in if Strands left it alone, with
    Strands' rewritten tool results if it changed them, a text message if Strands made it."""
    found: list[dict[str, Any]] = []
    for message in messages:
        sources = message.get(SOURCE)
        if not sources:
            texts = [b["text"] for b in message.get("content", []) if "text" in b]
            found.append({"role": message["role"], "content": "\n".join(texts)})
        elif message["content"] == _content(sources):
            found.extend(copy_message(s) for s in sources)
        else:
            results = _results(message["content"])
            found.extend(_rewritten(s, results) for s in sources)
    return found


@functools.cache
def _recap_model_class() -> type:
    """The local summarizing model: a Strands ``Model`` subclass, made once and on first use,
    so that importing this module needs no Strands."""
    from strands.models import Model

    class RecapModel(Model):  # type: ignore[misc]
        """Answers every request with a one-line recap of how much it was given."""

        def update_config(self, **config: Any) -> None:
            return None

        def get_config(self) -> dict[str, Any]:
            return {}

        async def structured_output(self, *args: Any, **kwargs: Any) -> AsyncIterator:
            raise NotImplementedError("the recap model writes text only")
            yield  # pragma: no cover

        async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncIterator:
            recap = f"Recap of {max(0, len(messages) - 1)} earlier messages."
            yield {"messageStart": {"role": "assistant"}}
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": recap}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}

    return RecapModel


class _StrandsAdapter(LibraryAdapter):
    """A real Strands ``Agent`` with one of its conversation managers; the agent's messages
    are the history, as in Strands. The options are the manager's constructor arguments,
    passed exactly as written; a key it does not take is refused, naming those it does."""

    name = "strands"

    def __init__(
        self, max_tokens: int = DEFAULT_MAX_TOKENS, hooks: Any = None, **options: Any
    ) -> None:
        super().__init__(max_tokens, hooks)
        from strands import Agent  # fails early if not installed

        manager_class = self._manager_class()
        known = [
            name
            for name, parameter in inspect.signature(manager_class).parameters.items()
            if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
        ]
        self.manager = manager_class(
            **library_options(f"{self.name} ({manager_class.__name__})", options, known)
        )
        self.agent = Agent(
            model=_recap_model_class()(),
            conversation_manager=self.manager,
            callback_handler=None,
        )
        self._system: list[dict[str, Any]] = []
        self._counter = TokenCounter()

    def _manager_class(self) -> type:
        raise NotImplementedError

    def _load(self, history: list[dict[str, Any]]) -> None:
        self._system, rest = split_system(history)
        self.agent.system_prompt = "\n".join(text_of(m.get("content")) for m in self._system)
        self.agent.messages[:] = to_strands(rest)

    async def add_message(self, message: dict[str, Any]) -> None:
        inspect_message(message, shapes=self.ctxkit_shapes)
        message = copy_message(message)
        if not self.agent.messages and message["role"] in ("system", "developer"):
            self._load([*self._system, message])
            return
        _append(self.agent.messages, message)

    async def get_messages(self) -> list[dict[str, Any]]:
        return [*copy_message(self._system), *from_strands(self.agent.messages)]

    async def set_messages(self, messages: Sequence[dict[str, Any]]) -> None:
        validate_history(list(messages), shapes=self.ctxkit_shapes)
        self._load([copy_message(m) for m in messages])

    async def clear(self) -> None:
        self._load([])

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict[str, Any]]:
        from strands.types.exceptions import ContextWindowOverflowException

        budget = self.budget(token_budget, provider)
        self.manager.apply_management(self.agent)
        before: int | None = None
        while True:
            view = await self.get_messages()
            tokens = self._counter.count_messages(view)
            if tokens <= budget:
                return view
            overflow = ContextWindowOverflowException(
                f"the request holds {tokens} tokens, over the budget of {budget}"
            )
            if before is not None and tokens >= before:
                # Strands' agent loop would retry for ever (until its recursion gives out).
                raise ContextWindowOverflowException(
                    f"{type(self.manager).__name__} made the request no smaller: {overflow}"
                )
            before = tokens
            self.manager.reduce_context(self.agent, e=overflow)


class SlidingWindow(_StrandsAdapter):
    """``SlidingWindowConversationManager``: keeps the newest ``window_size`` messages, cuts
    only where tool pairs stay whole, truncates old tool results on overflow."""

    name = "strands:sliding_window"

    def _manager_class(self) -> type:
        from strands.agent.conversation_manager import SlidingWindowConversationManager

        return SlidingWindowConversationManager


class Summarizing(_StrandsAdapter):
    """``SummarizingConversationManager``: on overflow, replaces the oldest share of the
    messages with a summary, keeping the newest ``preserve_recent_messages``."""

    name = "strands:summarizing"

    def _manager_class(self) -> type:
        from strands.agent.conversation_manager import SummarizingConversationManager

        return SummarizingConversationManager
