"""The LangGraph adapters: messages cross a real create_react_agent's graph state and come back
unchanged; every option reaches trim_messages exactly as written (None included) or is refused
with a sentence; a brief suite run per adapter gets the real verdicts (the empty
llm_input_messages of langgraph #8925 under budget; the state rewritten by the documented
'messages' form under non_destructive), and the upstream report reproduces with LangGraph
alone."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from hypothesis import given, settings

from ctxkit.adapters import by_name
from ctxkit.adapters.langchain import from_langchain, to_langchain
from ctxkit.adapters.langgraph import (
    DOCS_OPTIONS,
    PreModelHook,
    RemoveMessages,
    bug_report,
    run_agent,
)
from ctxkit.conformance.judge.comes_from import equivalent
from ctxkit.conformance.runner import RunOptions, run
from ctxkit.conformance.search.conversations import conversations
from ctxkit.survey.matrix import row_from_report
from tests.adapter_runs import assert_judged
from tests.system import require_library

require_library("langgraph.prebuilt", "langgraph")

ADAPTER_PART = {"lifecycle", "isolation", "robustness", "concurrency"}
HISTORIES = conversations(shapes=("openai",)) | conversations(shapes=("anthropic",))
EVERYTHING = {"start_on": None, "end_on": None, "include_system": True}
"""Options with which a budget larger than the history keeps all of it."""


def same(back: list[dict], history: list[dict]) -> None:
    assert len(back) == len(history), (back, history)
    for got, want in zip(back, history, strict=True):
        assert equivalent(got, want), (got, want)


def _keep_all(state):
    return {"llm_input_messages": state["messages"]}


def _overwrite_with_all(state):
    from langchain_core.messages import RemoveMessage
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *state["messages"]]}


@settings(max_examples=30, deadline=None)
@given(HISTORIES)
def test_a_history_crosses_the_graph_state_to_the_model_and_back_unchanged(history):
    for hook in (_keep_all, _overwrite_with_all):
        received, state = run_agent(to_langchain(history), hook)
        same(from_langchain(received, history), history)
        same(from_langchain(state, history), history)


@settings(max_examples=20, deadline=None)
@given(HISTORIES)
def test_with_room_for_everything_the_view_and_the_stored_history_are_the_history(history):
    for adapter_class in (PreModelHook, RemoveMessages):
        adapter = adapter_class(**EVERYTHING)
        asyncio.run(adapter.set_messages(history))
        same(asyncio.run(adapter.get_messages_for_request(token_budget=10**9)), history)
        same(asyncio.run(adapter.get_messages()), history)


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
    check while it is built, then the hook's, in one request)."""
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
    assert calls[1]["max_tokens"] == 10_000
    return calls


@pytest.mark.parametrize("adapter_class", [PreModelHook, RemoveMessages])
@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("strategy", "last"),
        ("start_on", None),
        ("start_on", "ai"),
        ("start_on", ["human", "tool"]),
        ("end_on", None),
        ("end_on", "tool"),
        ("end_on", ["human", "tool"]),
        ("include_system", None),
        ("include_system", True),
        ("include_system", False),
        ("allow_partial", None),
        ("allow_partial", True),
    ],
)
def test_each_option_reaches_trim_messages_exactly_as_written(
    monkeypatch, adapter_class, option, value
):
    for kwargs in trim_calls(monkeypatch, adapter_class, **{option: value}):
        assert option in kwargs
        assert kwargs[option] is value or (kwargs[option] == value and value is not None)
        assert type(kwargs[option]) is type(value)


@pytest.mark.parametrize("adapter_class", [PreModelHook, RemoveMessages])
def test_strategy_none_and_first_reach_trim_messages(monkeypatch, adapter_class):
    for kwargs in trim_calls(monkeypatch, adapter_class, strategy="first", start_on=None):
        assert (kwargs["strategy"], kwargs["start_on"]) == ("first", None)
    # strategy=None is not a strategy: trim_messages refuses it, while the manager is built
    with pytest.raises(ValueError, match="Unrecognized strategy=None"):
        adapter_class(strategy=None)


@pytest.mark.parametrize("adapter_class", [PreModelHook, RemoveMessages])
def test_a_default_is_the_docs_value_and_applies_only_to_an_option_not_written(
    monkeypatch, adapter_class
):
    (_, hook) = trim_calls(monkeypatch, adapter_class)
    assert {k: hook[k] for k in DOCS_OPTIONS} == {
        "strategy": "last",
        "start_on": "human",
        "end_on": ("human", "tool"),
    }
    assert not {"include_system", "allow_partial"} & set(hook)  # the docs leave them unset
    (_, hook) = trim_calls(monkeypatch, adapter_class, end_on=None)
    assert (hook["end_on"], hook["start_on"]) == (None, "human")


@pytest.mark.parametrize("adapter_class", [PreModelHook, RemoveMessages])
def test_an_unknown_option_is_refused_with_a_sentence_naming_the_known_ones(adapter_class):
    with pytest.raises(TypeError) as caught:
        adapter_class(startOn="human")
    assert str(caught.value) == (
        f"{adapter_class.name} (trim_messages in a pre_model_hook) has no option 'startOn'; its "
        "options are strategy, start_on, end_on, include_system, allow_partial (and max_tokens, "
        "the budget when a request names none)"
    )


def test_the_token_counter_is_the_adapters_and_says_why():
    with pytest.raises(TypeError, match="'token_counter' cannot be set: the adapter counts"):
        PreModelHook(token_counter=len)


def test_an_option_the_library_refuses_is_refused_when_the_manager_is_built():
    with pytest.raises(ValueError, match="start_on parameter is only valid with strategy='last'"):
        RemoveMessages(strategy="first")  # the docs' start_on="human" stays


def test_when_nothing_fits_the_model_gets_everything_or_the_state_is_emptied():
    """What the suite finds, shown directly: trim_messages returns [] (a view cannot start at
    the only user message and fit); create_react_agent then sends the whole history
    (langgraph #8925), and the 'messages' form empties the state."""
    hook = PreModelHook()
    asyncio.run(hook.set_messages(HISTORY))
    assert asyncio.run(hook.get_messages_for_request(token_budget=5)) == HISTORY
    assert asyncio.run(hook.get_messages()) == HISTORY
    removing = RemoveMessages()
    asyncio.run(removing.set_messages(HISTORY))
    assert asyncio.run(removing.get_messages_for_request(token_budget=5)) == []
    assert asyncio.run(removing.get_messages()) == []


BRIEF = {"profile": "quick", "seed": 1, "max_examples": 8, "shrink_seconds": 2.0}


def brief_run(name: str):
    return run(RunOptions(target=name, stability_steps=0, **BRIEF))


def failed(report) -> set[str]:
    return {p.id for p in report.properties if p.status == "failed"}


def test_the_llm_input_messages_form_breaks_the_budget_and_the_report_reproduces_it(tmp_path):
    report = brief_run("langgraph:pre_model_hook")
    assert failed(report) == {"budget", "preservation"}  # ctxkit keeps the history
    assert_judged(report, ADAPTER_PART | {"non_destructive"}, by_name(report.target).findings)
    row = row_from_report("langgraph:pre_model_hook", report.to_json())
    text = bug_report("budget", row.cells["budget"])
    assert "langgraph #8925" in text
    script = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert "ctxkit" not in script  # LangGraph's and langchain-core's own code only
    path = tmp_path / "upstream.py"
    path.write_text(script)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "AssertionError: the model got" in done.stderr


def test_the_messages_form_rewrites_the_history_and_keeps_within_the_budget():
    report = brief_run("langgraph:remove_messages")
    # budget passes: the state is [] then, and [] reaches the model, with nothing to fall back on
    assert failed(report) == {"non_destructive", "preservation"}
    assert_judged(report, ADAPTER_PART, by_name(report.target).findings)
