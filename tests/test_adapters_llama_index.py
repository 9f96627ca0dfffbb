"""The llama-index adapter: messages cross to llama-index's ChatMessage and back faithfully,
in both shapes and in the parts a view keeps; the buffer runs with ctxkit's encoding and the
budget as token_limit; it takes no options, and says so; each failure the suite finds is
verified and classified."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings

from ctxkit.adapters import by_name
from ctxkit.adapters.llama_index import ChatMemoryBuffer, from_llama_index, to_llama_index
from ctxkit.conformance.search.conversations import conversations
from tests.adapter_runs import assert_judged, checked
from tests.system import require_library

require_library("llama_index.core", "llama-index")

ADAPTER_PART = {"non_destructive", "lifecycle", "isolation", "robustness", "concurrency"}
ANTHROPIC_RESULTS = {
    "role": "user",
    "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "a.py"},
        {"type": "tool_result", "tool_use_id": "t2", "content": "b.py", "is_error": True},
        {"type": "text", "text": "and now?"},
    ],
}


@settings(max_examples=60, deadline=None)
@given(conversations(shapes=("openai",)) | conversations(shapes=("anthropic",)) | conversations())
def test_a_history_crosses_to_llama_index_and_back_unchanged(history):
    assert from_llama_index(to_llama_index(history), history) == history


def test_llama_index_messages_carry_what_llama_index_reads():
    history = [
        {"role": "user", "content": "list"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "t1", "name": "ls", "input": {"a": 1}},
                {"type": "tool_use", "id": "t2", "name": "ls", "input": {}},
            ],
        },
        ANTHROPIC_RESULTS,
    ]
    user, call, first, second, rest = to_llama_index(history)
    assert (user.role.value, user.content) == ("user", "list")
    assert call.content == "Let me look."
    assert [c["id"] for c in call.additional_kwargs["tool_calls"]] == ["t1", "t2"]
    assert call.additional_kwargs["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'
    assert [m.role.value for m in (first, second)] == ["tool", "tool"]
    assert [m.additional_kwargs["tool_call_id"] for m in (first, second)] == ["t1", "t2"]
    assert (rest.role.value, rest.content) == ("user", "and now?")


def test_the_part_of_a_split_message_a_view_keeps_comes_back_as_those_blocks():
    messages = to_llama_index([ANTHROPIC_RESULTS])
    back = from_llama_index(messages[1:], [ANTHROPIC_RESULTS])
    assert back == [{"role": "user", "content": ANTHROPIC_RESULTS["content"][1:]}]


def test_the_buffer_keeps_the_newest_turns_and_the_system_prompt():
    manager = ChatMemoryBuffer()
    history = [
        {"role": "system", "content": "Be brief."},
        *[
            {"role": "user" if k % 2 == 0 else "assistant", "content": f"turn {k} " + "word " * 40}
            for k in range(8)
        ],
    ]

    async def scenario() -> list[dict]:
        await manager.set_messages(history)
        return await manager.get_messages_for_request(token_budget=200)

    view = asyncio.run(scenario())
    assert view[0] == history[0]
    assert view[1:] == history[-len(view) + 1 :]
    assert view[1]["role"] == "user"
    assert len(view) < len(history)


def test_the_adapters_part_passes_and_every_failure_is_verified_and_classified():
    name = "llama_index:chat_memory_buffer"
    assert_judged(checked(name), ADAPTER_PART, by_name(name).findings)


def test_the_budget_reaches_the_buffer_as_its_token_limit(monkeypatch):
    from llama_index.core.memory import ChatMemoryBuffer as Buffer

    built: list = []
    real = Buffer.from_defaults.__func__

    def spy(cls, **kwargs):
        built.append(real(cls, **kwargs))
        return built[-1]

    monkeypatch.setattr(Buffer, "from_defaults", classmethod(spy))
    manager = ChatMemoryBuffer(max_tokens=777)

    async def scenario() -> None:
        await manager.add_message({"role": "user", "content": "hi"})
        await manager.get_messages_for_request(token_budget=123)
        await manager.get_messages_for_request()

    asyncio.run(scenario())
    assert [b.token_limit for b in built] == [123, 777]


def test_an_option_is_refused_with_a_sentence_saying_there_are_none():
    with pytest.raises(TypeError) as caught:
        ChatMemoryBuffer(chat_store_key="x")
    assert str(caught.value).startswith(
        "llama_index:chat_memory_buffer (ChatMemoryBuffer) has no option 'chat_store_key'; "
        "it has no options (and max_tokens"
    )


@pytest.mark.parametrize("option", ["token_limit", "tokenizer_fn"])
def test_what_the_adapter_sets_itself_is_refused_with_the_reason(option):
    with pytest.raises(TypeError, match=f"'{option}' cannot be set: "):
        ChatMemoryBuffer(**{option: None})
