"""semantic-kernel's ``ChatHistoryTruncationReducer`` behind the context contract.

The reducer is a ``ChatHistory`` that, on ``reduce()``, cuts itself down to ``target_count``
messages (once it holds more than ``target_count + threshold_count``), never orphaning a
function call or result and keeping the first system message. It counts messages, not tokens:
a request calls ``reduce()`` as Semantic Kernel's agents do before invoking the model, and the
budget plays no part. The reducer is the history, as in Semantic Kernel, so what it cuts is gone.

Conversion (:func:`to_semantic_kernel`, :func:`from_semantic_kernel`): one ``ChatMessageContent``
per JSON message, the role kept; text becomes ``TextContent``, tool calls (OpenAI
``tool_calls`` or Anthropic ``tool_use``) ``FunctionCallContent``, tool results (an OpenAI
``tool`` message, or an Anthropic user message of ``tool_result`` blocks, which Semantic
Kernel's connectors hold as a ``tool`` message) ``FunctionResultContent``. Each carries the
JSON message it came from in ``metadata["ctxkit"]``, which comes back as it was.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ctxkit.adapters.base import DEFAULT_MAX_TOKENS, LibraryAdapter, library_options
from ctxkit.messages import copy_message, inspect_message, validate_history

__all__ = ["TruncationReducer", "from_semantic_kernel", "to_semantic_kernel"]

SOURCE = "ctxkit"


def _items(message: dict[str, Any]) -> list[Any]:
    from semantic_kernel.contents import (
        FunctionCallContent,
        FunctionResultContent,
        TextContent,
    )

    content = message.get("content")
    if message["role"] == "tool":
        return [FunctionResultContent(id=message.get("tool_call_id"), result=content or "")]
    items: list[Any] = []
    blocks = content if isinstance(content, list) else [content] if content else []
    for block in blocks:
        if isinstance(block, str):
            items.append(TextContent(text=block))
        elif isinstance(block, dict) and block.get("type") == "tool_use":
            items.append(
                FunctionCallContent(
                    id=block.get("id"),
                    function_name=block.get("name"),
                    arguments=json.dumps(block.get("input")),
                )
            )
        elif isinstance(block, dict) and block.get("type") == "tool_result":
            items.append(
                FunctionResultContent(
                    id=block.get("tool_use_id"), result=json.dumps(block.get("content"))
                )
            )
        elif isinstance(block, dict) and "text" in block:
            items.append(TextContent(text=str(block["text"])))
        else:
            items.append(TextContent(text=json.dumps(block, default=str)))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        items.append(
            FunctionCallContent(
                id=call.get("id"),
                function_name=function.get("name"),
                arguments=function.get("arguments"),
            )
        )
    return items


def _role(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    ):
        return "tool"
    return str(message["role"])


def to_semantic_kernel(history: Sequence[dict[str, Any]]) -> list[Any]:
    """Semantic Kernel ``ChatMessageContent``s for JSON messages."""
    from semantic_kernel.contents import AuthorRole, ChatMessageContent

    return [
        ChatMessageContent(
            role=AuthorRole(_role(message)),
            items=_items(message),
            metadata={SOURCE: copy_message(message)},
        )
        for message in history
    ]


def from_semantic_kernel(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """The JSON messages ``messages`` came from."""
    return [copy_message(m.metadata[SOURCE]) for m in messages]


class TruncationReducer(LibraryAdapter):
    """``ChatHistoryTruncationReducer(target_count, threshold_count)``, reduced before every
    request. Both are passed exactly as written; ``target_count``, which the library requires,
    is 10 when not written, and ``threshold_count`` is the library's default when not written."""

    name = "semantic_kernel:truncation_reducer"
    OPTIONS = ("target_count", "threshold_count")

    def __init__(
        self, max_tokens: int = DEFAULT_MAX_TOKENS, hooks: Any = None, **options: Any
    ) -> None:
        super().__init__(max_tokens, hooks)
        from semantic_kernel.contents import ChatHistoryTruncationReducer  # fails early

        self.reducer = ChatHistoryTruncationReducer(
            **library_options(
                f"{self.name} (ChatHistoryTruncationReducer)",
                options,
                self.OPTIONS,
                {"target_count": 10},
            )
        )

    async def add_message(self, message: dict[str, Any]) -> None:
        inspect_message(message, shapes=self.ctxkit_shapes)
        self.reducer.messages.extend(to_semantic_kernel([message]))

    async def get_messages(self) -> list[dict[str, Any]]:
        return from_semantic_kernel(self.reducer.messages)

    async def set_messages(self, messages: Sequence[dict[str, Any]]) -> None:
        validate_history(list(messages), shapes=self.ctxkit_shapes)
        self.reducer.messages = to_semantic_kernel(messages)

    async def clear(self) -> None:
        self.reducer.messages = []

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict[str, Any]]:
        await self.reducer.reduce()  # counts messages: the budget plays no part
        return from_semantic_kernel(self.reducer.messages)
