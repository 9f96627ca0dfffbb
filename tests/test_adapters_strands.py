"""The strands-agents adapters: messages cross to Strands' Bedrock-shaped messages and back
faithfully, in both shapes, including what Strands rewrites (truncated tool results) or makes
(summaries); the managers run on a real Agent; every option reaches the manager exactly as
written, or is refused naming the known ones; each failure the suite finds is verified and
classified."""

from __future__ import annotations

import asyncio
import functools

import pytest
from hypothesis import given, settings

from ctxkit.adapters import ADAPTERS, by_name
from ctxkit.adapters.base import split_system
from ctxkit.adapters.strands import (
    SlidingWindow,
    Summarizing,
    _recap_model_class,
    from_strands,
    to_strands,
)
from ctxkit.conformance.search.conversations import conversations
from tests.adapter_runs import assert_judged, checked
from tests.system import require_library

require_library("strands", "strands")

ADAPTER_PART = {"isolation", "robustness", "concurrency", "tool_pair_integrity", "ordering"}

LONG = "line of output\n" * 200
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"a": 1}'}},
        {"id": "c2", "type": "function", "function": {"name": "cat", "arguments": "{}"}},
    ],
}


@settings(max_examples=60, deadline=None)
@given(conversations(shapes=("openai",)) | conversations(shapes=("anthropic",)) | conversations())
def test_a_history_crosses_to_strands_and_back_unchanged(history):
    _system, rest = split_system(history)
    assert from_strands(to_strands(rest)) == rest
    assert all(m["role"] in ("user", "assistant") for m in to_strands(rest))


def test_strands_messages_carry_what_strands_reads():
    history = [
        {"role": "user", "content": "list the files"},
        CALL,
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "tool", "tool_call_id": "c2", "content": "print(1)"},
        {"role": "system", "content": "Reminder: be brief"},
    ]
    user, call, results, reminder = to_strands(history)
    assert user["content"] == [{"text": "list the files"}]
    assert [b["toolUse"]["toolUseId"] for b in call["content"]] == ["c1", "c2"]
    assert call["content"][0]["toolUse"]["input"] == {"a": 1}
    # both results in one user message, as Strands stores a cycle's results
    assert results["role"] == "user"
    assert [b["toolResult"]["toolUseId"] for b in results["content"]] == ["c1", "c2"]
    assert reminder == {**reminder, "role": "user", "content": [{"text": "Reminder: be brief"}]}


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_a_tool_result_strands_truncates_comes_back_truncated_in_its_own_shape(shape):
    from strands.agent.conversation_manager import SlidingWindowConversationManager

    if shape == "openai":
        answer = {"role": "tool", "tool_call_id": "c1", "content": LONG}
        call = {**CALL, "tool_calls": CALL["tool_calls"][:1]}
    else:
        call = {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "ls", "input": {}}],
        }
        answer = {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c1", "content": LONG}],
        }
    messages = to_strands([{"role": "user", "content": "go"}, call, answer])
    changed = SlidingWindowConversationManager()._truncate_tool_results(messages, 2)
    assert changed
    back = from_strands(messages)
    assert back[:2] == [{"role": "user", "content": "go"}, call]
    text = back[2]["content"] if shape == "openai" else back[2]["content"][0]["content"]
    assert "[truncated:" in text
    assert len(text) < len(LONG)
    assert back[2]["role"] == answer["role"]


def test_a_summary_strands_makes_comes_back_as_a_user_message():
    manager = Summarizing(preserve_recent_messages=2)
    history = [
        {"role": "system", "content": "You are terse."},
        *[
            {"role": "user" if k % 2 == 0 else "assistant", "content": f"turn {k} " + "x" * 300}
            for k in range(8)
        ],
    ]

    async def scenario() -> list[dict]:
        await manager.set_messages(history)
        return await manager.get_messages_for_request(token_budget=320)

    view = asyncio.run(scenario())
    assert view[0] == history[0]  # the system prompt: never summarized
    assert view[1]["role"] == "user"
    assert view[1]["content"].startswith("Recap of")
    assert view[-2:] == history[-2:]


def test_a_request_that_cannot_shrink_is_refused_not_retried_for_ever():
    from strands.types.exceptions import ContextWindowOverflowException

    manager = SlidingWindow()

    async def scenario() -> None:
        await manager.add_message({"role": "user", "content": "word " * 400})
        await manager.get_messages_for_request(token_budget=50)

    with pytest.raises(ContextWindowOverflowException):
        asyncio.run(scenario())


@pytest.mark.parametrize("adapter", [a.name for a in ADAPTERS if a.extra == "strands"])
def test_the_adapters_part_passes_and_every_failure_is_verified_and_classified(adapter):
    assert_judged(checked(adapter), ADAPTER_PART, by_name(adapter).findings)


MANAGERS = {
    SlidingWindow: "SlidingWindowConversationManager",
    Summarizing: "SummarizingConversationManager",
}


def built_with(monkeypatch, adapter_class, **options):
    """The real manager the adapter built, and the keyword arguments it was built with."""
    import strands.agent.conversation_manager as module

    real = getattr(module, MANAGERS[adapter_class])
    calls: list[dict] = []

    class Spy(real):  # type: ignore[misc, valid-type]
        @functools.wraps(real.__init__)
        def __init__(self, *args, **kwargs):
            calls.append(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(module, MANAGERS[adapter_class], Spy)
    adapter = adapter_class(**options)
    assert adapter.agent.conversation_manager is adapter.manager
    return adapter.manager, calls[0]


def _summarizer():
    from strands import Agent

    return Agent(model=_recap_model_class()(), callback_handler=None)


@pytest.mark.parametrize(
    ("adapter_class", "option", "value"),
    [
        (SlidingWindow, "window_size", 4),
        (SlidingWindow, "should_truncate_results", False),
        (SlidingWindow, "per_turn", True),
        (SlidingWindow, "per_turn", 3),
        (SlidingWindow, "pin_first", None),
        (SlidingWindow, "pin_first", 1),
        (SlidingWindow, "proactive_compression", None),
        (SlidingWindow, "proactive_compression", True),
        (Summarizing, "summary_ratio", 0.5),
        (Summarizing, "preserve_recent_messages", 2),
        (Summarizing, "summarization_agent", None),
        (Summarizing, "summarization_agent", "agent"),
        (Summarizing, "summarization_system_prompt", None),
        (Summarizing, "summarization_system_prompt", "Summarize."),
        (Summarizing, "pin_first", None),
        (Summarizing, "proactive_compression", None),
    ],
)
def test_each_option_reaches_the_strands_manager_exactly_as_written(
    monkeypatch, adapter_class, option, value
):
    value = _summarizer() if value == "agent" else value
    manager, kwargs = built_with(monkeypatch, adapter_class, **{option: value})
    assert kwargs == {option: value}
    assert kwargs[option] is value
    if option != "proactive_compression":  # the manager keeps it as a threshold
        assert getattr(manager, option) is value


def test_no_option_written_means_the_managers_own_defaults(monkeypatch):
    for adapter_class in MANAGERS:
        _, kwargs = built_with(monkeypatch, adapter_class)
        assert kwargs == {}


def test_a_none_the_manager_cannot_take_reaches_it_and_it_refuses():
    with pytest.raises(TypeError, match="'<' not supported between instances of 'NoneType'"):
        SlidingWindow(window_size=None)


@pytest.mark.parametrize("adapter_class", list(MANAGERS))
def test_an_unknown_option_is_refused_with_a_sentence_naming_the_known_ones(adapter_class):
    with pytest.raises(TypeError) as caught:
        adapter_class(windowSize=4)
    known = (
        "window_size, should_truncate_results"
        if adapter_class is SlidingWindow
        else ("summary_ratio, preserve_recent_messages, summarization_agent")
    )
    assert f"{adapter_class.name} ({MANAGERS[adapter_class]}) has no option 'windowSize'" in str(
        caught.value
    )
    assert f"its options are {known}" in str(caught.value)
