"""The LangChain adapter: messages cross to LangChain's types and back faithfully, in both
shapes; the adapter's own part (storing the history) passes; the library's findings are found
with verified reproducers; a missing library is a clear load error."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.conformance.matching import equivalent
from ctxkit.conformance.strategies import conversations, plain_messages
from ctxkit.conformance.target import LoadError, load_target

pytest.importorskip("langchain_core", reason="pip install 'ctxkit[langchain]'")

from ctxkit.adapters import ADAPTERS, Adapter, by_name
from ctxkit.adapters.langchain import bug_report, from_langchain, to_langchain
from ctxkit.survey.matrix import row_from_report
from tests.adapter_runs import assert_judged, checked
from tests.processes import ctxkit

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
    assert "no result for it follows at once" in pairs.message
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
        LoadError, match=r"nolib:trim needs nolib-ctxkit: pip install 'ctxkit\[nolib\]'"
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
