"""The LangChain adapter: messages cross to LangChain's types and back faithfully, in both
shapes; every option reaches trim_messages exactly as written (None included) or is refused
with a sentence; the adapter's own part (storing the history) passes; the library's findings
are found with verified reproducers; a missing library is a clear load error."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.adapters import ADAPTERS, Adapter, by_name
from ctxkit.adapters.langchain import (
    TrimMessagesFirst,
    TrimMessagesLast,
    bug_report,
    from_langchain,
    to_langchain,
)
from ctxkit.conformance.judge.comes_from import equivalent
from ctxkit.conformance.runner import RunOptions, run
from ctxkit.conformance.search.conversations import conversations, plain_messages
from ctxkit.conformance.targets.load import LoadError, load_target
from ctxkit.survey.matrix import row_from_report
from tests.adapter_runs import SHORT, assert_judged, checked
from tests.processes import ctxkit
from tests.system import require_library

require_library("langchain_core", "langchain")

ADAPTER_PART = {"non_destructive", "lifecycle", "isolation", "robustness", "concurrency"}


def same(back: list[dict], history: list[dict]) -> None:
    assert len(back) == len(history)
    for got, want in zip(back, history, strict=True):
        assert equivalent(got, want), (got, want)


@settings(max_examples=60, deadline=None)
@given(conversations(shapes=("openai",)) | conversations(shapes=("anthropic",)) | conversations())
def test_a_history_crosses_to_langchain_and_back_unchanged(history):
    same(from_langchain(to_langchain(history), history), history)


@settings(max_examples=40, deadline=None)
@given(st.lists(plain_messages(), max_size=6))
def test_plain_messages_cross_and_come_back_equal(history):
    assert from_langchain(to_langchain(history), history) == history


def test_langchain_types_carry_what_langchain_models():
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    history = [
        {"role": "user", "content": "hi", "metadata": {"k": 1}},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"a":1}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "out", "is_error": True},
                {"type": "text", "text": "and then?"},
            ],
        },
    ]
    human, ai, tool, result, rest = to_langchain(history)
    assert isinstance(human, HumanMessage)
    assert human.additional_kwargs == {"metadata": {"k": 1}}
    assert isinstance(ai, AIMessage)
    assert ai.tool_calls[0]["args"] == {"a": 1}
    assert (isinstance(tool, ToolMessage), tool.tool_call_id) == (True, "c1")
    assert (result.tool_call_id, result.status) == ("t1", "error")
    assert isinstance(rest, HumanMessage)
    back = from_langchain([human, ai, tool, result, rest], history)
    assert back[0] == history[0]
    assert back[3] == history[3]  # one user message again
    assert equivalent(back[1], history[1])  # the arguments re-serialized, JSON-equal


@pytest.mark.parametrize("adapter", [a.name for a in ADAPTERS if a.extra == "langchain"])
def test_the_adapters_own_part_passes_and_every_failure_is_verified_and_classified(adapter):
    assert_judged(checked(adapter), ADAPTER_PART, by_name(adapter).findings)


def test_keeping_the_oldest_messages_splits_a_tool_pair_and_the_upstream_report_shows_it(
    tmp_path,
):
    report = checked("langchain:trim_messages:first")
    (pairs,) = [p for p in report.properties if p.id == "tool_pair_integrity"]
    assert pairs.status == "failed"
    assert re.search(r"no (tool_)?result for it follows at once", pairs.message)  # either shape
    assert pairs.verified
    row = row_from_report("langchain:trim_messages:first", report.to_json())
    text = bug_report("tool_pair_integrity", row.cells["tool_pair_integrity"])
    script = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert "ctxkit" not in script  # the library's own types and function only
    path = tmp_path / "upstream.py"
    path.write_text(script)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1
    assert "AssertionError: tool ids without their other half in the view" in done.stderr


def test_a_missing_library_is_a_load_error_that_says_how_to_install_it(monkeypatch):
    missing = Adapter("nolib:trim", "nolib_ctxkit:Trim", "nolib-ctxkit", "nolib", "a test")
    monkeypatch.setattr("ctxkit.adapters.ADAPTERS", (*ADAPTERS, missing))
    with pytest.raises(
        LoadError, match=r"nolib:trim needs nolib-ctxkit: pip install 'ctxkit-llm\[nolib\]'"
    ):
        load_target("nolib:trim")


def test_list_adapters_names_each_with_its_library():
    done = ctxkit("conformance", "--list-adapters")
    assert done.returncode == 0, done.stderr
    for adapter in ADAPTERS:
        assert adapter.name in done.stdout
    assert "langchain-core 1." in done.stdout


def test_a_library_that_conflicts_with_the_others_says_to_install_it_apart(monkeypatch):
    apart = Adapter("nolib:trim", "nolib_ctxkit:Trim", "nolib-ctxkit", "nolib", "t", apart=True)
    monkeypatch.setattr("ctxkit.adapters.ADAPTERS", (*ADAPTERS, apart))
    with pytest.raises(LoadError, match="in an environment of its own") as caught:
        load_target("nolib:trim")
    assert "-m ctxkit.conformance.worker" in str(caught.value)


def _split(text: str) -> list[str]:
    return text.split()


HISTORY = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "list the files"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
]


def trim_calls(monkeypatch, adapter_class, **options) -> list[dict]:
    """The keyword arguments of every call the adapter makes to the real trim_messages (the
    check while it is built, then one request's view)."""
    import langchain_core.messages

    real = langchain_core.messages.trim_messages
    calls: list[dict] = []

    def spy(messages, **kwargs):
        calls.append(kwargs)
        return real(messages, **kwargs)

    monkeypatch.setattr(langchain_core.messages, "trim_messages", spy)
    adapter = adapter_class(**options)
    asyncio.run(adapter.set_messages(HISTORY))
    asyncio.run(adapter.get_messages_for_request(token_budget=10_000))
    assert len(calls) == 2
    return calls


@pytest.mark.parametrize(
    ("adapter_class", "option", "value"),
    [
        (TrimMessagesLast, "start_on", None),
        (TrimMessagesLast, "start_on", "ai"),
        (TrimMessagesLast, "start_on", ["human", "tool"]),
        (TrimMessagesLast, "include_system", None),
        (TrimMessagesLast, "include_system", False),
        (TrimMessagesLast, "end_on", None),
        (TrimMessagesLast, "end_on", "tool"),
        (TrimMessagesLast, "allow_partial", None),
        (TrimMessagesLast, "allow_partial", True),
        (TrimMessagesLast, "text_splitter", None),
        (TrimMessagesLast, "text_splitter", _split),
        (TrimMessagesFirst, "start_on", None),
        (TrimMessagesFirst, "include_system", None),
        (TrimMessagesFirst, "include_system", False),
        (TrimMessagesFirst, "end_on", None),
        (TrimMessagesFirst, "end_on", ["ai"]),
        (TrimMessagesFirst, "allow_partial", None),
        (TrimMessagesFirst, "allow_partial", True),
        (TrimMessagesFirst, "text_splitter", _split),
    ],
)
def test_each_option_reaches_trim_messages_exactly_as_written(
    monkeypatch, adapter_class, option, value
):
    for kwargs in trim_calls(monkeypatch, adapter_class, **{option: value}):
        assert option in kwargs
        assert kwargs[option] is value or (kwargs[option] == value and value is not None)
        assert type(kwargs[option]) is type(value)
        assert kwargs["strategy"] == adapter_class.strategy


def test_a_default_applies_only_to_an_option_not_written(monkeypatch):
    (_, last) = trim_calls(monkeypatch, TrimMessagesLast)
    assert (last["include_system"], last["start_on"]) == (True, "human")
    (_, last) = trim_calls(monkeypatch, TrimMessagesLast, start_on=None)
    assert (last["include_system"], last["start_on"]) == (True, None)
    (_, first) = trim_calls(monkeypatch, TrimMessagesFirst)
    assert not {"include_system", "start_on", "end_on", "allow_partial"} & set(first)


@pytest.mark.parametrize("adapter_class", [TrimMessagesLast, TrimMessagesFirst])
def test_an_unknown_option_is_refused_with_a_sentence_naming_the_known_ones(adapter_class):
    with pytest.raises(TypeError) as caught:
        adapter_class(startOn="human")
    assert str(caught.value) == (
        f"{adapter_class.name} (trim_messages) has no option 'startOn'; its options are "
        "include_system, start_on, end_on, allow_partial, text_splitter (and max_tokens, the "
        "budget when a request names none)"
    )


@pytest.mark.parametrize("option", ["strategy", "token_counter"])
def test_an_option_the_adapter_sets_itself_is_refused_with_the_reason(option):
    with pytest.raises(TypeError, match=f"'{option}' cannot be set: the adapter"):
        TrimMessagesLast(**{option: "first"})


def test_an_option_the_library_refuses_is_refused_when_the_manager_is_built():
    with pytest.raises(ValueError, match="start_on parameter is only valid with strategy='last'"):
        TrimMessagesFirst(start_on="human")


def test_the_cli_refuses_an_unknown_option_with_exit_2_naming_the_known_ones():
    done = ctxkit("conformance", "langchain:trim_messages", "--config", '{"startOn": null}')
    assert done.returncode == 2, done.stderr
    assert "has no option 'startOn'; its options are include_system, start_on" in done.stderr


def test_start_on_none_reaches_the_library_and_splits_a_tool_pair():
    """langchain #33245: without start_on="human", trim_messages can start a view at a tool
    result whose call it cut; the adapter used to put "human" back and hide it."""
    quick = {**SHORT, "max_examples": 3, "shrink_seconds": 1.0, "stability_steps": 0}
    report = run(
        RunOptions(
            target="langchain:trim_messages",
            config={"start_on": None},
            **quick,
        )
    )
    (pairs,) = [p for p in report.properties if p.id == "tool_pair_integrity"]
    assert pairs.status == "failed", pairs.message
    assert pairs.verified, pairs.verification
