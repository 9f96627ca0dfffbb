"""Instructions are the system prompt: the Responses API's ``instructions`` (a string or a list
of items) and the Agents SDK's instructions that OpenInference records only as
``llm.input_messages.0`` are the request's system prompt, so losing them mid-conversation is
the preservation finding a dropped system message is."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxkit.audit import Auditor
from ctxkit.audit.bodies import request_of
from ctxkit.audit.genai import requests_of
from ctxkit.audit.otlp import Record

INSTRUCTIONS = "You are the release agent. Never push on Fridays."


def _items(turns: int) -> list[dict[str, Any]]:
    """The input items of a request after ``turns`` earlier turns."""
    items: list[dict[str, Any]] = []
    for turn in range(turns + 1):
        items.append({"role": "user", "content": f"step {turn}"})
        if turn < turns:
            items.append({"role": "assistant", "content": f"done {turn}"})
    return items


def _agents_sdk_span(turn: int, with_instructions: bool) -> Record:
    """An LLM span as openinference-instrumentation-openai-agents writes one: the items in
    input.value (a bare list), the flattened messages from index 1, the instructions (from the
    response) at index 0."""
    items = _items(turn)
    attributes: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.system": "openai",
        "llm.model_name": "gpt-4.1",
        "input.value": json.dumps(items),
        "input.mime_type": "application/json",
    }
    if with_instructions:
        attributes["llm.input_messages.0.message.role"] = "system"
        attributes["llm.input_messages.0.message.content"] = INSTRUCTIONS
    for index, item in enumerate(items, 1):
        attributes[f"llm.input_messages.{index}.message.role"] = item["role"]
        attributes[f"llm.input_messages.{index}.message.content"] = item["content"]
    span_id = f"{turn + 1:016x}"
    return Record("span", "response", turn, "ab" * 16, span_id, "", attributes, "x", {}, [])


def _audited(requests: list[Any]) -> list[Any]:
    """The findings of the requests audited as one conversation."""
    auditor = Auditor()
    for request in requests:
        request.key, request.keyed_by = "run", "test"
        auditor.add(request)
    return auditor.conversations["run"].findings


def _findings(requests: list[Any]) -> list[tuple[int, str]]:
    return [(f.request, f.kind) for f in _audited(requests)]


@pytest.mark.parametrize("vanish_at", [2, 3])
def test_agents_sdk_instructions_lost_mid_conversation_are_a_preservation_finding(vanish_at):
    spans = [(_agents_sdk_span(turn, turn < vanish_at), f"f:{turn}") for turn in range(4)]
    requests, problems = requests_of(spans)
    assert problems == []
    assert requests[0].messages[0] == {"role": "system", "content": INSTRUCTIONS}
    assert ("preservation", "dropped-system") in {(f.property, f.kind) for f in _audited(requests)}
    assert _findings(requests) == [(vanish_at, "dropped-system")]


def test_agents_sdk_instructions_kept_throughout_are_clean():
    spans = [(_agents_sdk_span(turn, True), f"f:{turn}") for turn in range(4)]
    requests, _ = requests_of(spans)
    assert _findings(requests) == []


@pytest.mark.parametrize(
    "instructions",
    [INSTRUCTIONS, [{"role": "developer", "content": INSTRUCTIONS}]],
)
def test_responses_instructions_lost_mid_conversation_are_a_preservation_finding(instructions):
    requests = []
    for turn in range(4):
        body: dict[str, Any] = {"model": "gpt-4.1", "input": _items(turn)}
        if turn < 2:
            body["instructions"] = instructions
        requests.append(request_of({"timestamp": turn, "body": body}, "f", turn + 1))
    assert requests[0].messages[0]["content"] == INSTRUCTIONS
    assert _findings(requests) == [(2, "dropped-system")]
