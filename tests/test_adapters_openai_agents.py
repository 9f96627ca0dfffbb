"""The Agents SDK adapter: Responses items go into a real SQLiteSession and come back
unchanged; the view is what Runner.run sends its model (checked against a real Runner); the
limit reaches SessionSettings exactly as written (None included) and unknown options are
refused with a sentence; a brief run with a small limit finds what 0.24 really does: outputs
whose call the limit cut are pruned (openai-agents-python #4322 no longer shows), but a call
whose reasoning item was cut is sent alone, with a verified, openai-agents-only report."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from hypothesis import given, settings

from ctxkit.adapters import by_name
from ctxkit.adapters.openai_agents import SQLiteSessionAdapter, bug_report
from ctxkit.conformance.runner import RunOptions, run
from ctxkit.conformance.search.conversations import conversations
from ctxkit.messages import InvalidMessage
from ctxkit.survey.matrix import row_from_report
from tests.adapter_runs import SHORT, assert_judged
from tests.system import require_library

require_library("agents", "openai-agents")

ADAPTER_PART = {"non_destructive", "lifecycle", "isolation", "robustness", "concurrency"}
NAME = "openai_agents:sqlite_session"

HISTORY = [
    {"role": "user", "content": "list the files"},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "ls", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
    {"role": "assistant", "content": "a.txt"},
]


async def stored_and_viewed(adapter: SQLiteSessionAdapter, history: list[dict]):
    await adapter.set_messages(history)
    return await adapter.get_messages(), await adapter.get_messages_for_request()


@settings(max_examples=40, deadline=None)
@given(conversations(shapes=("responses",)))
def test_items_go_into_the_session_and_come_back_unchanged(history):
    stored, viewed = asyncio.run(stored_and_viewed(SQLiteSessionAdapter(), history))
    assert stored == history
    assert viewed == history  # with no limit, Runner sends a whole conversation as it is


class Sent(Exception):
    pass


def runner_input(session) -> list:
    """What a real Runner.run sends its model for this session (the model stops the run)."""
    from agents import Agent, Runner
    from agents.models.interface import Model

    class RecordInput(Model):
        async def get_response(self, system_instructions, input, *args, **kwargs):
            raise Sent(input)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError

    async def go():
        try:
            await Runner.run(Agent("a", model=RecordInput()), [], session=session)
        except Sent as sent:
            return list(sent.args[0])
        raise AssertionError("the model was not called")

    return asyncio.run(go())


@pytest.mark.parametrize("limit", [None, 1, 2, 3, 4])
def test_the_view_is_what_a_real_runner_sends_its_model(limit):
    adapter = SQLiteSessionAdapter(limit=limit)
    _, viewed = asyncio.run(stored_and_viewed(adapter, HISTORY))
    assert viewed == runner_input(adapter.session)
    assert asyncio.run(adapter.get_messages()) == HISTORY  # the run left the session alone


def test_a_limit_that_cuts_a_call_drops_its_output_too():
    """openai-agents-python #4322: a limit began the input with an output whose call was left
    out. 0.24's Runner prunes it (drop_orphan_function_calls)."""
    adapter = SQLiteSessionAdapter(limit=2)
    _, viewed = asyncio.run(stored_and_viewed(adapter, HISTORY))
    assert viewed == [HISTORY[4]]


def test_a_limit_that_cuts_a_reasoning_item_sends_its_call_alone():
    adapter = SQLiteSessionAdapter(limit=3)
    _, viewed = asyncio.run(stored_and_viewed(adapter, HISTORY))
    assert viewed == HISTORY[2:]


@pytest.mark.parametrize("limit", [None, 0, 3, 100])
def test_limit_reaches_session_settings_exactly_as_written(limit):
    adapter = SQLiteSessionAdapter(limit=limit)
    assert adapter.session.session_settings.limit == limit
    assert adapter.session.session_settings.limit is limit or limit is not None


def test_no_limit_written_is_the_sdks_default():
    from agents import SessionSettings

    assert SQLiteSessionAdapter().session.session_settings == SessionSettings()


def test_an_unknown_option_is_refused_with_a_sentence_naming_the_known_ones():
    with pytest.raises(TypeError) as caught:
        SQLiteSessionAdapter(max_items=3)
    assert str(caught.value) == (
        "openai_agents:sqlite_session (SessionSettings) has no option 'max_items'; its options "
        "are limit (and max_tokens, the budget when a request names none)"
    )


def test_chat_completions_messages_are_refused_and_plain_ones_taken():
    adapter = SQLiteSessionAdapter()
    asyncio.run(adapter.add_message({"role": "user", "content": "hi"}))
    with pytest.raises(InvalidMessage, match="an Agents SDK session holds Responses API items"):
        asyncio.run(adapter.add_message({"role": "tool", "tool_call_id": "c1", "content": "x"}))


def test_a_brief_run_with_a_small_limit_finds_the_reasoning_item_cut_and_reports_it(tmp_path):
    report = run(RunOptions(target=NAME, config={"limit": 3}, **SHORT))
    (pairs,) = [p for p in report.properties if p.id == "tool_pair_integrity"]
    assert pairs.status == "failed"
    assert "reasoning item" in pairs.message
    assert pairs.verified
    assert_judged(report, ADAPTER_PART, by_name(NAME).findings)
    row = row_from_report(NAME, report.to_json())
    text = bug_report("tool_pair_integrity", row.cells["tool_pair_integrity"])
    script = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert "ctxkit" not in script  # openai-agents only
    path = tmp_path / "upstream.py"
    path.write_text(script)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "is sent without rs_" in done.stderr
