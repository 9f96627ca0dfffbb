"""llama-index-core's ``ChatMemoryBuffer`` behind the context contract.

The buffer stores every message and, on ``get``, returns the newest ones whose text fits its
``token_limit``; it never edits what it stores. A request sets ``token_limit`` to the budget and
asks for the history, the system prompt counted in through ``initial_token_count``, as
llama-index's agents do: leading system messages are the prompt the agent puts in front.

Conversion (:func:`to_llama_index`, :func:`from_llama_index`): roles map one to one; an
assistant's tool calls travel in ``additional_kwargs["tool_calls"]`` (OpenAI's form, which the
llama-index OpenAI integration reads) and a tool result is a ``tool`` message with
``additional_kwargs["tool_call_id"]``, so an Anthropic user message of ``tool_result`` blocks
becomes one ``tool`` message per result (then a ``user`` message for its other blocks), as the
Anthropic integration models them. Each message carries its origin (``"3"`` or ``"3.1"``) under
``additional_kwargs["ctxkit"]``, so the way back rebuilds each history message, or the part of
it the buffer kept, in its own shape.

The buffer counts tokens with its ``tokenizer_fn`` over the messages' text; the adapter gives it
ctxkit's encoding, so a token means the same to both.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ctxkit.adapters.base import (
    DEFAULT_MAX_TOKENS,
    TrimmingAdapter,
    library_options,
    split_system,
)
from ctxkit.adapters.blocks import is_tool_result, is_tool_use, text_of
from ctxkit.messages import copy_message
from ctxkit.tokens import load_encoding

__all__ = ["ChatMemoryBuffer", "from_llama_index", "to_llama_index"]

ORIGIN = "ctxkit"


def _calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The assistant's tool calls in OpenAI's form, whichever shape they came in."""
    calls = list(message.get("tool_calls") or [])
    content = message.get("content")
    if isinstance(content, list):
        calls += [
            {
                "id": b.get("id"),
                "type": "function",
                "function": {"name": b.get("name", ""), "arguments": json.dumps(b.get("input"))},
            }
            for b in content
            if is_tool_use(b)
        ]
    return calls


def to_llama_index(history: Sequence[dict[str, Any]]) -> list[Any]:
    """llama-index ``ChatMessage``s for JSON messages."""
    from llama_index.core.llms import ChatMessage

    found: list[Any] = []
    for index, message in enumerate(history):
        role, content = message["role"], message.get("content")
        if role == "assistant":
            extra: dict[str, Any] = {ORIGIN: str(index)}
            if calls := _calls(message):
                extra["tool_calls"] = calls
            text = (
                text_of([b for b in content if b.get("type") != "tool_use"])
                if isinstance(content, list)
                else text_of(content)
            )
            found.append(ChatMessage(role="assistant", content=text, additional_kwargs=extra))
        elif role == "tool":
            found.append(
                ChatMessage(
                    role="tool",
                    content=text_of(content),
                    additional_kwargs={
                        ORIGIN: str(index),
                        "tool_call_id": message.get("tool_call_id"),
                    },
                )
            )
        elif isinstance(content, list) and any(is_tool_result(b) for b in content):
            results = [b for b in content if is_tool_result(b)]
            for part, block in enumerate(results):
                found.append(
                    ChatMessage(
                        role="tool",
                        content=text_of(block.get("content", "")),
                        additional_kwargs={
                            ORIGIN: f"{index}.{part}",
                            "tool_call_id": block.get("tool_use_id"),
                        },
                    )
                )
            if rest := [b for b in content if not is_tool_result(b)]:
                found.append(
                    ChatMessage(
                        role="user",
                        content=text_of(rest),
                        additional_kwargs={ORIGIN: f"{index}.{len(results)}"},
                    )
                )
        else:
            found.append(
                ChatMessage(
                    role=role, content=text_of(content), additional_kwargs={ORIGIN: str(index)}
                )
            )
    return found


def _part(source: dict[str, Any], part: int) -> list[Any]:
    """The blocks of part ``part`` of an Anthropic user message split by :func:`to_llama_index`."""
    content = source["content"]
    results = [b for b in content if is_tool_result(b)]
    return [results[part]] if part < len(results) else [b for b in content if not is_tool_result(b)]


def from_llama_index(
    messages: Sequence[Any], history: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The JSON messages (or kept parts of them) that ``messages`` came from."""
    found: list[dict[str, Any]] = []
    previous: str | None = None
    for message in messages:
        origin = str(message.additional_kwargs[ORIGIN])
        index, _, part = origin.partition(".")
        source = history[int(index)]
        if not part:
            found.append(copy_message(source))
            previous = None
            continue
        blocks = copy_message(_part(source, int(part)))
        if previous == index:
            found[-1]["content"] += blocks
        else:
            found.append({**copy_message(source), "content": blocks})
        previous = index
    return found


class ChatMemoryBuffer(TrimmingAdapter):
    """``llama_index.core.memory.ChatMemoryBuffer``: the newest messages whose text fits. It
    takes no options: a key written is refused, as ``token_limit`` and ``tokenizer_fn`` (set
    by the adapter) are, with the reason."""

    name = "llama_index:chat_memory_buffer"

    def __init__(
        self, max_tokens: int = DEFAULT_MAX_TOKENS, hooks: Any = None, **options: Any
    ) -> None:
        super().__init__(max_tokens, hooks)
        from llama_index.core.memory import ChatMemoryBuffer as Buffer  # fails early

        library_options(
            f"{self.name} (ChatMemoryBuffer)",
            options,
            (),
            set_by_adapter={
                "token_limit": "it is each request's budget (a request without one uses "
                "max_tokens)",
                "tokenizer_fn": "the adapter counts with ctxkit's encoding, so a token means "
                "the same to the library and to the suite",
            },
        )

        self._buffer_class = Buffer
        self._encode = load_encoding().encode_ordinary

    def trim(self, history: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
        system, rest = split_system(history)
        prompt = sum(len(self._encode(text_of(m.get("content")))) for m in system)
        buffer = self._buffer_class.from_defaults(
            chat_history=to_llama_index(rest), token_limit=budget, tokenizer_fn=self._encode
        )
        return [*system, *from_llama_index(buffer.get(initial_token_count=prompt), rest)]
