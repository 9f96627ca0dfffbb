"""Each recorded request is judged by the API it went to, told from what the recording says
(:mod:`ctxkit.audit.apis`), and only model calls are requests (:func:`genai.model_call`).

The records here carry the attributes the real instrumentations write (as printed by them
against the loopback fake provider: Logfire's ``instrument_openai`` on the Responses API,
OpenInference's google-genai); tests/test_audit_recordings.py runs the libraries themselves."""

from __future__ import annotations

import copy
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.audit import Auditor
from ctxkit.audit.apis import UNKNOWN, from_body, tell
from ctxkit.audit.bodies import NotABody, request_of
from ctxkit.audit.genai import model_call, requests_of
from ctxkit.audit.otlp import Record
from ctxkit.conformance.judge.invariants import check_tool_pairs
from ctxkit.conformance.judge.sent import as_sent
from tests.hostile import KEYS, json_values, spoiled


def _span(attributes: dict, *, name: str = "chat", span_id: str = "01", start: int = 5) -> Record:
    return Record("span", name, start, "aa", span_id, "", attributes, "x", {}, [])


def _findings(*records: Record) -> list:
    requests, problems = requests_of([(r, "f:1") for r in records])
    assert problems == []
    auditor = Auditor()
    found = []
    for request in sorted(requests, key=lambda r: r.time_ns):
        found.extend(auditor.add(request)[1])
    return found


def _genai(messages: list[dict]) -> str:
    return json.dumps(messages)


CALL = {
    "role": "assistant",
    "parts": [{"type": "tool_call", "id": "c1", "name": "ls", "arguments": {}}],
}
CALL_2 = {
    "role": "assistant",
    "parts": [{"type": "tool_call", "id": "c2", "name": "ls", "arguments": {"d": 1}}],
}
RESULT = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "a"}]}
RESULT_2 = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c2", "response": "b"}]}
USER = {"role": "user", "parts": [{"type": "text", "content": "list two dirs"}]}
LOGFIRE = {
    "gen_ai.system": "openai",
    "gen_ai.provider.name": "openai",
    "gen_ai.operation.name": "chat",
}
"""What Logfire's instrument_openai records on every OpenAI call, Chat or Responses."""


def test_logfire_responses_parallel_calls_as_separate_messages_pass():
    """Logfire writes each parallel function_call item as an assistant message of its own:
    as the Responses API received them (call items in a row, then their outputs) they hold."""
    span = _span(
        {**LOGFIRE, "gen_ai.input.messages": _genai([USER, CALL, CALL_2, RESULT, RESULT_2])},
        name="Responses API with 'gpt-4o-mini'",
    )
    assert _findings(span) == []
    (request,), _ = requests_of([(span, "f:1")])
    assert request.api == "responses"
    assert 'the span name "Responses API with' in request.api_told


def test_the_same_messages_to_chat_completions_fail_with_chat_s_own_error():
    """Chat Completions takes parallel calls in one assistant message only: split, the first
    call is unanswered at once, and the finding quotes Chat Completions' error."""
    span = _span(
        {**LOGFIRE, "gen_ai.input.messages": _genai([USER, CALL, CALL_2, RESULT, RESULT_2])},
        name="Chat Completion with 'gpt-4o-mini'",
    )
    found = _findings(span)
    assert {f.rule for f in found} >= {"openai.calls_answered"}
    assert all(f.api == "openai" for f in found)
    assert found[0].as_dict()["api"] == "OpenAI Chat Completions"
    assert "tool_call_ids did not have response messages" in found[0].provider_error


def test_a_broken_responses_request_is_found_at_the_recorded_message_with_responses_words():
    span = _span(
        {**LOGFIRE, "gen_ai.input.messages": _genai([USER, CALL, CALL_2, RESULT_2, USER])},
        name="Responses API with 'gpt-4o-mini'",
    )
    (finding,) = _findings(span)
    assert (finding.property, finding.rule, finding.messages) == (
        "tool_pair_integrity",
        "responses.calls_answered",
        (1,),  # the recorded message[1] holds the call c1
    )
    assert "message[1] calls c1" in finding.message
    assert finding.provider_error.startswith("No tool output found for function call")


OPENINFERENCE_GEMINI = {
    "llm.provider": "google",
    "openinference.span.kind": "LLM",
    "llm.model_name": "gemini-2.0-flash",
    "llm.input_messages.0.message.role": "user",
    "llm.input_messages.0.message.content": "list two dirs",
    "llm.input_messages.1.message.role": "model",
    "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": "ls",
    "llm.input_messages.1.message.tool_calls.1.tool_call.function.name": "cat",
    "llm.input_messages.1.message.tool_calls.1.tool_call.function.arguments": '{"f": 1}',
    "llm.input_messages.2.message.role": "tool",
    "llm.input_messages.2.message.name": "ls",
    "llm.input_messages.2.message.content": '{"r": "a"}',
    "llm.input_messages.3.message.role": "tool",
    "llm.input_messages.3.message.name": "cat",
    "llm.input_messages.3.message.content": '{"r": "b"}',
}
"""What OpenInference's google-genai instrumentation records (its input.value left out, so
that the provider tells the API)."""


def test_openinference_gemini_results_pair_by_name_and_position():
    span = _span(OPENINFERENCE_GEMINI, name="GenerateContent")
    assert _findings(span) == []
    (request,), _ = requests_of([(span, "f:1")])
    assert (request.api, request.api_told) == ("gemini", "told by llm.provider google")


def test_openinference_gemini_with_a_result_gone_fails_with_gemini_s_error():
    attributes = {
        k: v for k, v in OPENINFERENCE_GEMINI.items() if not k.startswith("llm.input_messages.3")
    }
    found = _findings(_span(attributes, name="GenerateContent"))
    assert {f.rule for f in found} == {"gemini.responses_match_calls"}
    assert [f.messages for f in found] == [(2,), (1,)]  # the short turn, the call left over
    assert "message[1] calls cat#1, but no functionResponse" in found[1].message
    assert "number of function response parts" in found[0].provider_error


def test_the_recorded_body_tells_the_api_before_the_provider():
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    told = tell("GenerateContent", {"llm.provider": "openai", "input.value": json.dumps(body)}, [])
    assert (told.api, told.how) == ("gemini", "told by the request body recorded in input.value")


@pytest.mark.parametrize(
    ("body", "api"),
    [
        (
            {"model": "gpt-4o", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]},
            "openai",
        ),
        (
            {"model": "claude", "system": "s", "messages": [{"role": "user", "content": "x"}]},
            "anthropic",
        ),
        ({"model": "m", "input": "x"}, "responses"),
        ({"contents": []}, "gemini"),
        (
            {"messages": [{"role": "user", "content": [{"toolResult": {"toolUseId": "t"}}]}]},
            "bedrock",
        ),
        ({"model": "m"}, UNKNOWN),
    ],
)
def test_a_body_s_own_keys_say_its_api(body, api):
    """``max_tokens`` is a Chat Completions parameter too: it no longer makes a body
    Anthropic's."""
    assert from_body(body) == api


def test_an_unknown_api_is_judged_by_the_rules_every_api_shares():
    """No provider, no span name that says: split parallel calls pass (some APIs take them),
    a result with no call fails, and no provider's error is quoted."""
    messages = [USER, CALL, CALL_2, RESULT, RESULT_2]
    assert _findings(_span({"gen_ai.input.messages": _genai(messages)}, name="llm")) == []
    (finding,) = _findings(
        _span({"gen_ai.input.messages": _genai([USER, RESULT, USER])}, name="llm")
    )
    assert (finding.property, finding.api, finding.rule, finding.provider_error) == (
        "tool_pair_integrity",
        UNKNOWN,
        "",
        "",
    )
    assert finding.judged == "by the rules every API shares (the recording names no API)"
    assert finding.as_dict()["api"] == "the rules every API shares"


@pytest.mark.parametrize(
    ("attributes", "is_call"),
    [
        ({"gen_ai.operation.name": "invoke_agent"}, False),
        ({"gen_ai.operation.name": "execute_tool"}, False),
        ({"gen_ai.operation.name": "chat"}, True),
        ({"openinference.span.kind": "AGENT"}, False),
        ({"openinference.span.kind": "CHAIN"}, False),
        ({"openinference.span.kind": "LLM"}, True),
        ({"traceloop.span.kind": "workflow"}, False),
        ({"llm.request.type": "chat"}, True),
        ({"ai.operationId": "ai.generateText"}, False),
        ({"ai.operationId": "ai.streamText.doStream"}, True),
        ({}, None),
    ],
)
def test_model_call_tells_calls_from_their_context(attributes, is_call):
    assert model_call(_span(attributes)) is is_call


def test_an_agent_span_with_messages_is_no_request():
    """The AI SDK's invoke_agent span carries the run's input: counted, it would shift every
    request's index and compare calls with an unedited history."""
    messages = _genai([USER])
    agent = _span(
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.input.messages": messages},
        name="invoke_agent",
        span_id="01",
        start=1,
    )
    call = _span(
        {"gen_ai.operation.name": "chat", "gen_ai.input.messages": messages},
        name="chat gpt-4o",
        span_id="02",
        start=2,
    )
    requests, problems = requests_of([(agent, "f:1"), (call, "f:2")])
    assert problems == []
    assert [r.where for r in requests] == ["f:2 span 02 (chat gpt-4o)"]


_results = st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True)


@settings(max_examples=60, deadline=None)
@given(ids=_results, split=st.booleans(), api=st.sampled_from(["responses", "gemini", UNKNOWN]))
def test_regrouping_keeps_every_answered_call_answered(ids, split, api):
    """Calls answered at once in the generic form stay answered as each API received them,
    whether the recorder split the calls into messages of their own or not; and each written
    item points back at a recorded message."""
    calls = [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
    ]
    callers = (
        [{"role": "assistant", "content": None, "tool_calls": [c]} for c in calls]
        if split
        else [{"role": "assistant", "content": None, "tool_calls": calls}]
    )
    messages = [
        {"role": "user", "content": "go"},
        *callers,
        *({"role": "tool", "tool_call_id": i, "content": "ok"} for i in ids),
    ]
    sent, positions = as_sent(messages, api)
    if positions is None:  # nothing a regrouping would change: judged as recorded
        assert sent is messages
        assert not (split and len(ids) > 1)
        positions = list(range(len(messages)))
    assert len(positions) == len(sent)
    assert positions == sorted(positions)
    assert set(positions) <= set(range(len(messages)))
    if api == "gemini" and split and len(ids) > 1:
        return  # Gemini takes one turn of calls: split calls are a break there
    assert check_tool_pairs(sent) == []


def test_litellm_ids_beside_the_parts_are_read():
    """LiteLLM's OTel callback keeps Chat Completions' tool_calls and tool_call_id beside
    empty or text parts: read as the parts they are, a result with no call is found."""
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": "list"}]},
        {"role": "tool", "parts": [{"type": "text", "content": "a.py"}], "tool_call_id": "call_1"},
    ]
    attributes = {**LOGFIRE, "gen_ai.input.messages": _genai(messages)}
    (finding,) = _findings(_span(attributes, name="chat gpt-4o-mini"))
    assert (finding.rule, finding.messages) == ("openai.result_has_call", (1,))
    clean = [
        messages[0],
        {
            "role": "assistant",
            "parts": [],
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        messages[1],
    ]
    attributes = {**LOGFIRE, "gen_ai.input.messages": _genai(clean)}
    assert _findings(_span(attributes, name="chat gpt-4o-mini")) == []


def test_an_api_that_keeps_the_system_prompt_beside_the_list_counts_without_it():
    """The finding names the recorded message; the provider's error, the API's own index."""
    messages = [
        {"role": "system", "parts": [{"type": "text", "content": "Be terse."}]},
        USER,
        {"role": "user", "parts": [{"type": "tool_call_response", "id": "t1", "response": "a"}]},
    ]
    attributes = {"gen_ai.provider.name": "aws.bedrock", "gen_ai.input.messages": _genai(messages)}
    (finding,) = _findings(_span(attributes))
    assert finding.messages == (2,)
    assert "at messages.1.content" in finding.provider_error


_json = json_values(KEYS)
HOSTILE_EXAMPLES = int(os.environ.get("CTXKIT_HOSTILE_EXAMPLES", "300"))
"""Examples per hostile-input property (CTXKIT_HOSTILE_EXAMPLES=6000 for a deep local run)."""


@settings(max_examples=HOSTILE_EXAMPLES, deadline=None)
@given(
    messages=st.lists(_json, max_size=6),
    api=st.sampled_from(["openai", "responses", "gemini", "anthropic", "bedrock", UNKNOWN]),
    name=st.sampled_from(["chat", "Responses API with x", "GenerateContent"]),
)
def test_hostile_messages_are_judged_or_skipped_never_a_crash(messages, api, name):
    """Whatever a recording holds in its messages (ints for lists, lists for dicts), telling
    the API, regrouping and judging it end in findings or a skipped record, never an error."""
    tell(name, {"input.value": json.dumps({"messages": messages})}, messages)
    as_sent(list(messages), api)
    span = _span({"gen_ai.provider.name": "openai", "gen_ai.input.messages": _genai(messages)})
    requests, _ = requests_of([(span, "f:1")])
    auditor = Auditor()
    for request in requests:
        auditor.add(request)


_BODIES = [
    {"model": "gpt-4o", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a b"},
        {"role": "user", "content": [{"type": "text", "text": "more"}]}]},
    {"model": "gpt-5", "instructions": "be brief", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "list"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a b"},
        {"role": "user", "content": "again"}]},
    {"model": "claude-sonnet-4", "system": "be brief", "messages": [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "s"},
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a"}]},
        {"role": "user", "content": "thanks"}]},
    {"model": "gemini-2.5-pro", "systemInstruction": {"parts": [{"text": "be brief"}]},
     "contents": [
        {"role": "user", "parts": [{"text": "list"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {"r": "a"}}}]},
        {"role": "user", "parts": [{"text": "more"}]}]},
    {"modelId": "anthropic.claude-3", "system": [{"text": "be brief"}], "messages": [
        {"role": "user", "content": [{"text": "list"}]},
        {"role": "assistant", "content": [
            {"toolUse": {"toolUseId": "t1", "name": "ls", "input": {}}}]},
        {"role": "user", "content": [
            {"toolResult": {"toolUseId": "t1", "content": [{"text": "a"}]}}]},
        {"role": "user", "content": [{"text": "more"}]}]},
]  # fmt: skip
"""A request of each API, with a tool call and its result, for hostile values to go into."""


@settings(max_examples=HOSTILE_EXAMPLES, deadline=None)
@given(body=spoiled(st.sampled_from(_BODIES).map(copy.deepcopy), _json), kept=st.integers(0, 5))
def test_hostile_request_bodies_are_judged_or_skipped_never_a_crash(body, kept):
    """A request log's body (a number where a message goes, a number where the calls go, any
    system prompt) is judged by its API's rules or skipped as not a body, never an error; two
    requests, the first a start of the second, so the checks between requests run too."""
    listed = next((key for key in ("input", "contents", "messages") if key in body), "messages")
    held = body[listed]
    first = {**body, listed: held[:kept] if isinstance(held, list) else held}
    auditor = Auditor()
    for number, sent in enumerate((first, body), start=1):
        try:
            request = request_of({"timestamp": number, "body": sent}, "f", number)
        except NotABody:
            continue
        auditor.add(request)


_KEYS = [
    "gen_ai.operation.name", "openinference.span.kind", "traceloop.span.kind", "ai.operationId",
    "llm.request.type", "gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system",
    "ai.model.provider", "input.value", "request_data", "gen_ai.response.id",
    "gen_ai.conversation.id", "session.id", "gen_ai.system_instructions",
]  # fmt: skip


@settings(max_examples=HOSTILE_EXAMPLES, deadline=None)
@given(attributes=st.dictionaries(st.sampled_from(_KEYS), _json, max_size=6))
def test_hostile_attributes_are_read_or_skipped_never_a_crash(attributes):
    """Any value under the attributes the audit reads (an OTLP array where text is expected,
    a dict, a number) tells what it can and never raises."""
    span = _span({**attributes, "gen_ai.input.messages": _genai([USER, CALL, RESULT])})
    requests, _ = requests_of([(span, "f:1")])
    auditor = Auditor()
    for request in requests:
        auditor.add(request)
