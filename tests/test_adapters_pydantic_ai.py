"""The pydantic-ai adapter: messages cross to pydantic-ai's types and back faithfully (also
through pydantic-ai's own JSON); every option reaches ProcessHistory or the documented
processor exactly as written (None included) or is refused with a sentence; the model is sent
the newest user message once; and a brief run finds what pydantic-ai really does: its repair
keeps tool pairs whole after a keep-last-5 processor cuts them."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings

from ctxkit.adapters import by_name
from ctxkit.adapters.pydantic_ai import (
    HistoryProcessor,
    from_pydantic_ai,
    keep_recent_messages,
    to_pydantic_ai,
)
from ctxkit.conformance.search.conversations import conversations
from tests.adapter_runs import assert_judged, checked
from tests.system import require_library

require_library("pydantic_ai", "pydantic-ai")

ADAPTER_PART = {"non_destructive", "lifecycle", "isolation", "robustness", "concurrency"}
NAME = "pydantic_ai:history_processor"

CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
}
HISTORY = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "list the files"},
    CALL,
    {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
    {"role": "assistant", "content": "a.txt"},
    {"role": "user", "content": "and now?"},
]


def drop_tool_results(messages):
    """A processor that cuts every tool result, leaving their calls."""
    from dataclasses import replace

    kept = []
    for message in messages:
        parts = [p for p in message.parts if p.part_kind != "tool-return"]
        if parts:
            kept.append(replace(message, parts=parts))
    return kept


def view(adapter: HistoryProcessor, history: list[dict]) -> list[dict]:
    async def go() -> list[dict]:
        await adapter.set_messages(history)
        return await adapter.get_messages_for_request()

    return asyncio.run(go())


@settings(max_examples=60, deadline=None)
@given(conversations(shapes=("openai",)) | conversations(shapes=("anthropic",)) | conversations())
def test_a_history_crosses_to_pydantic_ai_and_back_unchanged(history):
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    converted = to_pydantic_ai(history)
    assert from_pydantic_ai(converted.messages, converted, history) == history
    stored = ModelMessagesTypeAdapter.dump_json(converted.messages)  # as a store keeps them
    assert from_pydantic_ai(ModelMessagesTypeAdapter.validate_json(stored), converted, history) == (
        history
    )


def test_pydantic_ai_types_carry_what_pydantic_ai_models():
    from pydantic_ai.messages import ModelRequest, ModelResponse

    converted = to_pydantic_ai(HISTORY)
    kinds = [[p.part_kind for p in m.parts] for m in converted.messages]
    assert kinds == [
        ["system-prompt"],
        ["user-prompt"],
        ["tool-call"],
        ["tool-return"],
        ["text"],
        ["user-prompt"],
    ]
    assert isinstance(converted.messages[2], ModelResponse)
    assert isinstance(converted.messages[3], ModelRequest)
    assert converted.messages[3].parts[0].tool_name == "ls"


def test_the_model_is_sent_the_newest_user_message_once():
    adapter = HistoryProcessor(keep=100)
    assert view(adapter, HISTORY) == HISTORY


def test_a_history_ending_with_an_answer_is_sent_as_the_next_turn_without_the_empty_prompt():
    adapter = HistoryProcessor(keep=100)
    assert view(adapter, HISTORY[:5]) == HISTORY[:5]
    assert view(adapter, []) == []


def test_pydantic_ai_drops_a_result_whose_call_the_processor_cut():
    # Merged, the history is 4 pydantic-ai messages: [system+user], [call], [result], [answer+user]
    # ... keep=2 starts at the result: pydantic-ai drops it before the model is called.
    adapter = HistoryProcessor(keep=2)
    assert view(adapter, HISTORY) == [HISTORY[4], HISTORY[5]]


def test_pydantic_ai_answers_a_call_the_processor_left_alone_with_an_interrupted_result():
    adapter = HistoryProcessor(processor=drop_tool_results)
    got = view(adapter, HISTORY)
    assert got[:3] == HISTORY[:3]
    assert got[3] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "The tool call was interrupted before a result was produced.",
    }
    assert got[4:] == HISTORY[4:]


def test_pydantic_ai_orders_a_requests_results_as_their_calls():
    two = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            for n in (1, 2)
        ],
    }
    results = [{"role": "tool", "tool_call_id": f"c{n}", "content": f"r{n}"} for n in (2, 1)]
    history = [{"role": "user", "content": "go"}, two, *results]
    assert view(HistoryProcessor(keep=100), history) == [history[0], two, results[1], results[0]]


def processors(monkeypatch) -> list:
    """Every processor the adapter hands to the real ProcessHistory."""
    import pydantic_ai.capabilities

    real = pydantic_ai.capabilities.ProcessHistory
    given: list = []

    def spy(processor):
        given.append(processor)
        return real(processor)

    monkeypatch.setattr(pydantic_ai.capabilities, "ProcessHistory", spy)
    return given


@pytest.mark.parametrize(
    "value", [drop_tool_results, "tests.test_adapters_pydantic_ai:drop_tool_results"]
)
def test_the_processor_reaches_process_history_exactly_as_written(monkeypatch, value):
    given = processors(monkeypatch)
    HistoryProcessor(processor=value)
    assert given == [drop_tool_results]


def test_processor_none_reaches_process_history_and_pydantic_ai_refuses_it_at_build(monkeypatch):
    given = processors(monkeypatch)
    with pytest.raises(TypeError, match="None is not a callable object"):
        HistoryProcessor(processor=None)
    assert given == [None]


@pytest.mark.parametrize(("keep", "kept"), [(1, 1), (2, 2), (5, 5)])
def test_keep_is_the_documented_processors_n(keep, kept):
    adapter = HistoryProcessor(keep=keep)
    got = view(adapter, [{"role": "user", "content": f"q{n}"} for n in range(4)])
    # Adjacent requests merge into one pydantic-ai message: the processor keeps it whole.
    assert len(got) == 4
    messages = [{"role": r, "content": f"m{n}"} for n, r in enumerate(["user", "assistant"] * 3)]
    got = view(adapter, [*messages, {"role": "user", "content": "last"}])
    assert got == [*messages, {"role": "user", "content": "last"}][-kept:]


def test_keep_none_reaches_the_documented_processor_which_cannot_compare_it():
    with pytest.raises(TypeError, match="'>' not supported"):
        HistoryProcessor(keep=None)


def test_the_default_is_the_documented_processor_keeping_5():
    import inspect

    source = inspect.getsource(keep_recent_messages)
    assert "messages[-keep:] if len(messages) > keep else messages" in source
    messages = [{"role": r, "content": f"m{n}"} for n, r in enumerate(["user", "assistant"] * 4)]
    history = [*messages, {"role": "user", "content": "last"}]
    assert view(HistoryProcessor(), history) == history[-5:]


def test_an_unknown_option_is_refused_with_a_sentence_naming_the_known_ones():
    with pytest.raises(TypeError) as caught:
        HistoryProcessor(history_processors=[drop_tool_results])
    assert str(caught.value) == (
        "pydantic_ai:history_processor (ProcessHistory) has no option 'history_processors'; "
        "its options are processor, keep (and max_tokens, the budget when a request names none)"
    )


def test_keep_with_a_processor_is_refused_with_a_sentence():
    with pytest.raises(TypeError, match="'keep' is the N of the default processor"):
        HistoryProcessor(processor=drop_tool_results, keep=3)


def test_a_brief_run_finds_pydantic_ais_repair_keeps_pairs_whole_after_keep_last_5():
    report = checked(NAME)
    statuses = {p.id: p.status for p in report.properties}
    assert statuses["tool_pair_integrity"] == "passed"
    assert statuses["budget"] == "failed"  # it counts messages
    assert_judged(report, ADAPTER_PART, by_name(NAME).findings)
