"""The Semantic Kernel adapter: messages cross to ChatMessageContent (text, function calls,
function results, in both shapes) and back unchanged; the reducer cuts by message count and
keeps pairs whole; its options reach it exactly as written, or are refused naming the known
ones; each failure the suite finds is verified and classified."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings

from ctxkit.adapters import by_name
from ctxkit.adapters.semantic_kernel import (
    TruncationReducer,
    from_semantic_kernel,
    to_semantic_kernel,
)
from ctxkit.conformance.search.conversations import conversations
from tests.adapter_runs import assert_judged, checked
from tests.system import require_library

require_library("semantic_kernel", "semantic-kernel")

ADAPTER_PART = {"lifecycle", "isolation", "robustness", "concurrency"}


@settings(max_examples=60, deadline=None)
@given(conversations(shapes=("openai",)) | conversations(shapes=("anthropic",)) | conversations())
def test_a_history_crosses_to_semantic_kernel_and_back_unchanged(history):
    assert from_semantic_kernel(to_semantic_kernel(history)) == history


def test_semantic_kernel_messages_carry_what_the_reducer_reads():
    from semantic_kernel.contents import FunctionCallContent, FunctionResultContent

    history = [
        {"role": "user", "content": "list"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "b"}]},
    ]
    user, call, result, use, answer = to_semantic_kernel(history)
    assert (user.role.value, user.content) == ("user", "list")
    assert [type(i) for i in call.items] == [FunctionCallContent]
    assert call.items[0].id == "c1"
    assert result.role.value == "tool"
    assert isinstance(result.items[0], FunctionResultContent)
    assert use.items[0].id == "t1"
    assert answer.role.value == "tool"  # as Semantic Kernel's connectors hold tool results
    assert answer.items[0].id == "t1"


def test_the_reducer_cuts_to_target_count_without_orphaning_a_result():
    manager = TruncationReducer(target_count=2)
    history = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    ]

    async def scenario() -> tuple[list[dict], list[dict]]:
        await manager.set_messages(history)
        view = await manager.get_messages_for_request(token_budget=100_000)
        return view, await manager.get_messages()

    view, stored = asyncio.run(scenario())
    assert view == history[3:]  # two messages: the call with its result, never one of them
    assert stored == view  # reduce() cuts the history itself


def test_the_adapters_part_passes_and_every_failure_is_verified_and_classified():
    name = "semantic_kernel:truncation_reducer"
    assert_judged(checked(name), ADAPTER_PART, by_name(name).findings)


@pytest.mark.parametrize(
    ("option", "value"), [("target_count", 4), ("threshold_count", 0), ("threshold_count", 3)]
)
def test_each_option_reaches_the_reducer_exactly_as_written(option, value):
    reducer = TruncationReducer(**{option: value}).reducer
    assert getattr(reducer, option) == value
    assert type(getattr(reducer, option)) is int


@pytest.mark.parametrize("option", ["target_count", "threshold_count"])
def test_none_reaches_the_reducer_which_refuses_it(option):
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as caught:
        TruncationReducer(**{option: None})
    (error,) = caught.value.errors()
    assert (error["loc"], error["input"]) == ((option,), None)


def test_no_option_written_means_target_count_10_and_the_libraries_threshold():
    from semantic_kernel.contents import ChatHistoryTruncationReducer

    reducer = TruncationReducer().reducer
    default = ChatHistoryTruncationReducer.model_fields["threshold_count"].default
    assert (reducer.target_count, reducer.threshold_count) == (10, default)


def test_an_unknown_option_is_refused_with_a_sentence_naming_the_known_ones():
    with pytest.raises(TypeError) as caught:
        TruncationReducer(auto_reduce=True)
    assert str(caught.value).startswith(
        "semantic_kernel:truncation_reducer (ChatHistoryTruncationReducer) has no option "
        "'auto_reduce'; its options are target_count, threshold_count"
    )
