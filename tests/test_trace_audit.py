"""``ctxkit audit``: recorded requests (OTLP/JSON traces, raw request bodies) checked for what
the conformance suite checks in a live manager, at the right request, with no false accusation
of a correct manager."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxkit.audit import Auditor, ConversationAudit, Request
from ctxkit.audit.bodies import request_of
from ctxkit.audit.files import UnknownFormat, in_order, read_paths
from ctxkit.audit.genai import content_hint, requests_of
from ctxkit.audit.otlp import BASE64_IDS, NotOtlp, Record, decode_json_line
from ctxkit.audit.request import Usage
from ctxkit.audit.windows import context_window
from tests.audit_fleet import Conversation, body_lines, fleet, otlp_exports, otlp_lines
from tests.otlp_files import collector_line, details_log, framed
from tests.schemas import valid

CLI = [sys.executable, "-m", "ctxkit", "audit"]


def _audit(tmp_path: Path, lines: list[str], *args: str) -> tuple[int, dict, str]:
    source = tmp_path / "recorded.jsonl"
    source.write_text("\n".join(lines) + "\n")
    return _audit_file(tmp_path, source, *args)


def _audit_file(tmp_path: Path, source: Path, *args: str) -> tuple[int, dict, str]:
    report = tmp_path / "report.json"
    done = subprocess.run(
        [*CLI, str(source), "--report-json", str(report), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    written = json.loads(report.read_text())
    valid("audit-report", written)
    return done.returncode, written, done.stdout


def _found(report: dict) -> dict[str, set[tuple[str, str, int]]]:
    return {
        c["key"]: {(f["property"], f["kind"], f["request"]) for f in c["findings"]}
        for c in report["conversations"]
    }


def _check_fleet(conversations: list[Conversation], report: dict) -> None:
    found = _found(report)
    for conv in conversations:
        assert found.get(conv.key, set()) == conv.expected, (conv.shape, conv.planted)
    assert report["exit_code"] == int(
        any(
            c.planted in ("split_pair", "reorder", "lost_reasoning", "gemini_count")
            for c in conversations
        )
    )


# -- the fleet ------------------------------------------------------------------------------


def test_a_fleet_recorded_as_otlp_is_judged_exactly_in_every_shape(tmp_path: Path):
    """Planted breakages (a split pair, a dropped system prompt, a reorder, a dropped user
    message, a reasoning item lost, a Gemini part count wrong) are found at their request;
    clean conversations, compacted the way correct managers compact, give nothing. The
    Collector's batches are written out of order."""
    conversations = fleet(seed=11, size=60)
    assert {c.planted for c in conversations} >= {
        "",
        "split_pair",
        "dropped_system",
        "reorder",
        "dropped_user",
        "lost_reasoning",
    }
    assert sum(c.clean_compactions for c in conversations if not c.planted) >= 5
    code, report, out = _audit(tmp_path, otlp_lines(conversations, batch=7, seed=3))
    _check_fleet(conversations, report)
    assert code == report["exit_code"]
    assert {c["keyed_by"] for c in report["conversations"]} == {"gen_ai.conversation.id"}
    assert "question" not in out  # content is never printed unless asked


def test_the_same_fleet_as_request_bodies_gives_the_same_findings(tmp_path: Path):
    conversations = [c for c in fleet(seed=12, size=60) if c.shape != "genai"]
    code, report, _ = _audit(tmp_path, body_lines(conversations, keyed=True))
    _check_fleet(conversations, report)
    assert {c["keyed_by"] for c in report["conversations"]} == {"metadata.conversation_id"}
    assert code == report["exit_code"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_any_seeded_conversation_is_judged_exactly(seed: int):
    for conv in fleet(seed, 6):
        auditor = Auditor()
        for index, messages in enumerate(conv.requests):
            auditor.add(
                Request(messages, index, f"r{index}", "gpt-4o", key=conv.key, keyed_by="session.id")
            )
        audit = auditor.conversations[conv.key]
        assert {(f.property, f.kind, f.request) for f in audit.findings} == conv.expected
        assert audit.state_bytes() < 64 * max(len(r) for r in conv.requests) + 512


def test_one_message_moved_ahead_of_four_is_one_finding():
    """The fewest moves that explain a reorder, one finding each (it was one finding per
    message the moved one jumped, four here), in the words the suite uses too."""
    said = [{"role": "user" if k % 2 == 0 else "assistant", "content": f"m{k}"} for k in range(6)]
    moved = [said[0], said[5], *said[1:5], {"role": "user", "content": "next"}]
    auditor = Auditor()
    for time, messages in ((1, said), (2, moved)):
        auditor.add(Request(messages, time, f"r{time}", "gpt-4o", key="c", keyed_by="session.id"))
    (finding,) = [f for f in auditor.conversations["c"].findings if f.property == "ordering"]
    assert finding.message.startswith(
        "message[1] (was message[5] of the previous request) moved ahead of 4 messages"
    )
    assert (finding.request, finding.messages) == (1, (1,))


def test_unkeyed_requests_are_grouped_by_trace_or_prefix(tmp_path: Path):
    """Without keys, an agent loop that only grows is one conversation (keyed by prefix)."""
    conversations = [
        c for c in fleet(seed=5, size=40) if not c.planted and not c.clean_compactions
    ][:8]
    assert len(conversations) >= 4
    code, report, out = _audit(tmp_path, body_lines(conversations, keyed=False), "--verbose")
    assert code == 0
    assert len(report["conversations"]) == len(conversations)
    assert sorted(c["requests"] for c in report["conversations"]) == sorted(
        len(c.requests) for c in conversations
    )
    assert {c["keyed_by"] for c in report["conversations"]} <= {"alone", "prefix"}
    # said as what it is: no key was recorded, and the requests were joined by their messages
    assert all(c["inferred_from"] == ["prefix"] for c in report["conversations"])
    assert "keyed by alone" not in out
    assert out.count("(no key recorded: inferred from messages that continue it)") == len(
        conversations
    )


# -- reading --------------------------------------------------------------------------------


def _span(
    attributes: dict,
    *,
    name: str = "chat",
    span_id: str = "01",
    parent: str = "",
    trace: str = "aa",
    events=(),
    scope: str = "x",
    start: int = 5,
) -> Record:
    return Record("span", name, start, trace, span_id, parent, attributes, scope, {}, list(events))


def test_openllmetry_flattened_prompts_are_read_as_chat_messages():
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "Be terse.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "list",
        "gen_ai.prompt.2.role": "assistant",
        "gen_ai.prompt.2.tool_calls.0.id": "c1",
        "gen_ai.prompt.2.tool_calls.0.name": "ls",
        "gen_ai.prompt.2.tool_calls.0.arguments": "{}",
        "gen_ai.prompt.10.role": "tool",  # index 10 sorts after 2, not after 1
        "gen_ai.prompt.10.tool_call_id": "c1",
        "gen_ai.prompt.10.content": "a.py",
    }
    (request,), problems = requests_of([(_span(attributes), "f:1")])
    assert problems == []
    assert request.source == "gen_ai.prompt"
    assert [m["role"] for m in request.messages] == ["system", "user", "assistant", "tool"]
    assert request.messages[2]["tool_calls"][0]["id"] == "c1"
    assert request.messages[3]["tool_call_id"] == "c1"


def test_openinference_messages_with_content_lists_are_read():
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.contents.0.message_content.type": "text",
        "llm.input_messages.0.message.contents.0.message_content.text": "hi",
        "llm.input_messages.1.message.role": "tool",
        "llm.input_messages.1.message.tool_call_id": "x",
        "llm.input_messages.1.message.content": "out",
    }
    (request,), _ = requests_of([(_span(attributes), "f:1")])
    assert request.model == "gpt-4o"
    assert request.messages[0]["content"] == [{"type": "text", "text": "hi"}]
    assert request.messages[1] == {"role": "tool", "content": "out", "tool_call_id": "x"}


def test_system_instructions_and_the_details_event_are_read():
    event = (
        "gen_ai.client.inference.operation.details",
        9,
        {
            "gen_ai.input.messages": [
                {"role": "user", "parts": [{"type": "text", "content": "q"}]}
            ],
            "gen_ai.system_instructions": [{"type": "text", "content": "Be terse."}],
        },
    )
    (request,), _ = requests_of([(_span({"gen_ai.operation.name": "chat"}, events=[event]), "f")])
    assert request.messages[0] == {
        "role": "system",
        "parts": [{"type": "text", "content": "Be terse."}],
    }
    assert request.messages[1]["parts"][0]["content"] == "q"


def test_per_message_log_events_join_their_span():
    span = _span({"gen_ai.operation.name": "chat", "gen_ai.system": "openai"}, span_id="0a")
    logs = [
        Record(
            "log", "gen_ai.user.message", 6, "aa", "0a", "", {}, "x", {}, body={"content": "hi"}
        ),
        Record(
            "log",
            "gen_ai.assistant.message",
            7,
            "aa",
            "0a",
            "",
            {},
            "x",
            {},
            body={"tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]},
        ),
        Record(
            "log",
            "gen_ai.tool.message",
            8,
            "aa",
            "0a",
            "",
            {},
            "x",
            {},
            body={"content": "r", "id": "c"},
        ),
    ]
    (request,), _ = requests_of([(r, "f") for r in [span, *logs]])
    assert [m["role"] for m in request.messages] == ["user", "assistant", "tool"]
    assert request.messages[2]["tool_call_id"] == "c"
    assert request.provider == "openai"


def _ai_sdk_step(prompt: list[dict], span_id: str, start: int) -> Record:
    """A model call as the Vercel AI SDK records it (its source: ai 6's generateText, a
    ``doGenerate`` span per step, the provider-level prompt as JSON text)."""
    return _span(
        {
            "operation.name": "ai.generateText.doGenerate weather-agent",
            "ai.operationId": "ai.generateText.doGenerate",
            "ai.model.provider": "openai.responses",
            "gen_ai.system": "openai.responses",
            "gen_ai.request.model": "gpt-4o",
            "ai.prompt.messages": json.dumps(prompt),
            "gen_ai.usage.input_tokens": 40,
        },
        name="ai.generateText.doGenerate",
        span_id=span_id,
        scope="ai",
        start=start,
    )


AI_SDK_PROMPT = [
    {"role": "system", "content": "Be terse."},
    {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "I should look it up."},
            {"type": "tool-call", "toolCallId": "call_1", "toolName": "weather",
             "input": {"city": "Oslo"}},
            {"type": "tool-call", "toolCallId": "ws_1", "toolName": "web_search",
             "input": {}, "providerExecuted": True},
            {"type": "tool-result", "toolCallId": "ws_1", "toolName": "web_search",
             "output": {"type": "json", "value": []}},
        ],
    },
    {
        "role": "tool",
        "content": [
            {"type": "tool-result", "toolCallId": "call_1", "toolName": "weather",
             "output": {"type": "json", "value": {"celsius": 4}}},
        ],
    },
]  # fmt: skip


def test_the_vercel_ai_sdks_own_spans_are_requests_and_a_lost_result_is_found():
    outer = _span({"ai.operationId": "ai.generateText", "ai.prompt": "{}"}, scope="ai")
    steps = [
        _ai_sdk_step(AI_SDK_PROMPT[:2], "02", 10),
        _ai_sdk_step(AI_SDK_PROMPT, "03", 20),
        _ai_sdk_step(AI_SDK_PROMPT[:3], "04", 30),  # the tool result lost
    ]
    requests, problems = requests_of([(r, "f") for r in (outer, *steps)])
    assert problems == []
    assert [r.source for r in requests] == ["ai.prompt.messages"] * 3
    assert requests[1].messages == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"celsius": 4}'},
    ]  # fmt: skip
    assert requests[1].usage == Usage(input_tokens=40)
    auditor = Auditor()
    found = [auditor.add(request)[1] for request in requests]
    assert found[:2] == [[], []]
    assert {f.property for f in found[2]} == {"tool_pair_integrity"}


def test_ai_sdk_4_prompts_and_a_call_recorded_without_inputs():
    old = [
        {"role": "assistant", "content": [
            {"type": "tool-call", "toolCallId": "c1", "toolName": "ls", "args": {"path": "."}}]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "c1", "toolName": "ls", "result": "a.py"}]},
    ]  # fmt: skip
    step = _ai_sdk_step(old, "02", 10)
    (request,), _ = requests_of([(step, "f")])
    assert request.messages[0]["tool_calls"][0]["function"]["arguments"] == '{"path": "."}'
    assert request.messages[1]["content"] == "a.py"
    del step.attributes["ai.prompt.messages"]
    requests, (problem,) = requests_of([(step, "f")])
    assert requests == []
    assert "recordInputs: true" in problem.hint
    broken = _ai_sdk_step([], "05", 10)
    broken.attributes["ai.prompt.messages"] = '{"not": "a list"}'
    requests, (problem,) = requests_of([(broken, "f")])
    assert "ai.prompt.messages is not a JSON list of messages" in problem.reason


def test_a_call_without_content_is_named_with_the_setting_that_records_it():
    silent = _span(
        {"gen_ai.operation.name": "chat", "gen_ai.response.id": "r-9"},
        scope="opentelemetry.instrumentation.openai_v2",
    )
    requests, (problem,) = requests_of([(silent, "t.jsonl:3")])
    assert requests == []
    assert "t.jsonl:3" in problem.where
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in problem.hint
    assert "TRACELOOP_TRACE_CONTENT" in content_hint("opentelemetry.instrumentation.anthropic")


def test_an_sdk_span_beside_a_recorded_call_and_an_agent_span_are_not_requests():
    recorded = _span(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.response.id": "msg_1",
            "gen_ai.input.messages": "[]",
        },
        span_id="02",
    )
    sdk_own = _span(
        {"gen_ai.operation.name": "chat", "gen_ai.response.id": "msg_1"},
        span_id="03",
        trace="bb",
        scope="com.anthropic.sdk.python",
    )
    agent = _span({"gen_ai.operation.name": "invoke_agent"}, span_id="04")
    requests, problems = requests_of([(r, "f") for r in (recorded, sdk_own, agent)])
    assert len(requests) == 1
    assert problems == []


def test_otlp_json_ids_are_hex_and_bad_lines_are_named(tmp_path: Path):
    line = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "session.id", "value": {"stringValue": "s1"}}]},
                "scopeSpans": [
                    {
                        "scope": {"name": "x"},
                        "spans": [
                            {
                                "traceId": "5b8efff798038103d269b633813fc60c",
                                "spanId": "eee19b7ec3c1b174",
                                "name": "chat",
                                "startTimeUnixNano": "1700000000000000000",
                                "attributes": [
                                    {
                                        "key": "gen_ai.input.messages",
                                        "value": {
                                            "stringValue": json.dumps(
                                                [
                                                    {
                                                        "role": "user",
                                                        "parts": [
                                                            {"type": "text", "content": "hi"}
                                                        ],
                                                    }
                                                ]
                                            )
                                        },
                                    }
                                ],
                            }
                        ],
                    }
                ],
            }
        ]
    }
    (record,) = decode_json_line(json.loads(json.dumps(line)))
    assert record.trace_id == "5b8efff798038103d269b633813fc60c"
    assert record.span_id == "eee19b7ec3c1b174"
    with pytest.raises(NotOtlp):
        decode_json_line({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]})
    source = tmp_path / "t.jsonl"
    source.write_text(json.dumps(line) + "\n{broken\n" + json.dumps({"resourceSpans": 5}) + "\n")
    read = read_paths([str(source)])
    assert len(read.requests) == 1
    assert read.requests[0].key == "s1"
    assert read.requests[0].keyed_by == "session.id"
    assert [p.where for p in read.problems] == [f"{source}:2", f"{source}:3"]


def test_base64_ids_as_protobufs_json_format_writes_them_are_read_and_said_once(
    tmp_path: Path,
):
    """protobuf's json_format writes ids in base64, where OTLP/JSON says hex: the audit reads
    them (they were skipped, and nothing was audited) and says so once."""
    conversations = fleet(seed=4, size=3)
    hexed = [json.loads(line) for line in otlp_lines(conversations, batch=5, seed=1)]
    lines = [json.dumps(_base64_ids(line)) for line in hexed]
    code, report, out = _audit(tmp_path, lines)
    _check_fleet(conversations, report)
    assert code == report["exit_code"] != 2
    assert out.count("note: trace and span ids were base64") == 1, out
    assert report["notes"] == [BASE64_IDS]


def _base64_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: base64.b64encode(bytes.fromhex(v)).decode()
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str) and v
            else _base64_ids(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_base64_ids(v) for v in value]
    return value


def test_nothing_audited_is_exit_2_with_the_reasons_counted_and_the_commonest_fix(
    tmp_path: Path,
):
    """A recording made without content capture (the likeliest slip) reads as spans of model
    calls with no messages: no request is audited, and that is no pass."""
    silent = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "scope": {"name": "opentelemetry.instrumentation.openai_v2"},
                        "spans": [
                            {
                                "traceId": f"{k:032x}",
                                "spanId": f"{k:016x}",
                                "name": "chat gpt-4o",
                                "startTimeUnixNano": str(1_700_000_000_000_000_000 + k),
                                "attributes": [
                                    {
                                        "key": "gen_ai.operation.name",
                                        "value": {"stringValue": "chat"},
                                    }
                                ],
                            }
                            for k in range(1, 4)
                        ],
                    }
                ]
            }
        ]
    }
    code, report, _ = _audit(tmp_path, [json.dumps(silent)])
    assert code == report["exit_code"] == 2
    said = report["nothing_audited"]
    assert said.startswith("nothing audited: 3 records skipped (3 a model call recorded without")
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in said
    done = subprocess.run([*CLI, str(tmp_path / "recorded.jsonl")], capture_output=True, text=True)
    assert done.returncode == 2
    assert "nothing audited: 3 records skipped" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("option", ["--report-json", "--junit", "--html"])
def test_an_output_in_a_folder_that_does_not_exist_is_exit_2_and_creates_nothing(
    tmp_path: Path, option: str
):
    source = tmp_path / "recorded.jsonl"
    source.write_text("\n".join(otlp_lines(fleet(seed=1, size=1), batch=5, seed=1)) + "\n")
    done = subprocess.run(
        [*CLI, str(source), option, str(tmp_path / "reprots" / "out")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"no folder {tmp_path / 'reprots'}; create it first" in done.stderr
    assert not (tmp_path / "reprots").exists()


def test_a_pretty_printed_export_is_read_whole(tmp_path: Path):
    source = tmp_path / "one.json"
    source.write_text(
        json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}, indent=2)
    )
    assert len(read_paths([str(source)]).requests) == 1


HOSTILE_LINES = [
    "{oops",
    "[" * 100_000,  # deeper than Python's parser goes
    '{"a": ' * 2_000 + "1" + "}" * 2_000,
    '{"model": "m", "max_tokens": ' + "9" * 5_000 + "}",  # past int's digit limit
    "\ufffd\x00 binary",
]


def _body(text: str) -> str:
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]})


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(
        st.one_of(
            st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\n\r"))
            .map(_body)
            .map(lambda body: ("body", body)),
            st.sampled_from(HOSTILE_LINES).map(lambda line: ("bad", line)),
            # never JSON, nor part of a document spread over lines
            st.text(
                alphabet=st.characters(
                    codec="utf-8", exclude_characters="\n\r\x1c\x1d\x1e\x85\u2028\u2029"
                )
            ).map(lambda text: ("bad", "x" + text)),
        ),
        min_size=1,
        max_size=8,
    ).filter(lambda lines: any(kind == "body" for kind, _ in lines))
)
def test_any_mix_of_hostile_and_good_lines_reads_every_good_one(tmp_path: Path, lines):
    """A line that does not read is a problem at its own line, whatever it holds (first, too
    deep for the parser, not text), and every other line is still read."""
    source = tmp_path / "mixed.jsonl"
    source.write_text("\n".join(line for _, line in lines) + "\n", encoding="utf-8")
    read = read_paths([str(source)])
    assert len(read.requests) == sum(kind == "body" for kind, _ in lines)
    bad = [f"{source}:{n}" for n, (kind, _) in enumerate(lines, 1) if kind == "bad"]
    assert [p.where for p in read.problems] == bad


def test_a_file_of_unreadable_lines_is_exit_2_naming_the_first(tmp_path: Path):
    source = tmp_path / "deep.jsonl"
    source.write_text("\n".join(HOSTILE_LINES[1:3]) + "\n")
    done = subprocess.run([*CLI, str(source)], capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stderr
    assert f"{source}:1: not JSON: nested too deeply to read" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_message_list_nested_too_deeply_is_a_problem_of_its_span_only():
    deep = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[" * 100_000}
    good = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": []}]),
    }
    requests, problems = requests_of([(_span(deep), "f:1"), (_span(good, span_id="02"), "f:2")])
    assert [r.where for r in requests] == ["f:2 span 02 (chat)"]
    assert [p.where for p in problems] == ["f:1 span 01 (chat)"]


def test_a_directory_stands_for_its_files_and_gzip_is_read_as_it_is(tmp_path: Path):
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "traces.jsonl").write_text(_body("newest") + "\n")
    with gzip.open(folder / "traces-2026-11-25T10-00-00.000.jsonl", "wt") as rotated:
        rotated.write(_body("older") + "\n" + _body("oldest") + "\n")
    (folder / ".partial").write_text("{oops\n")
    (folder / "nested").mkdir()
    assert len(read_paths([str(folder)]).requests) == 3
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run([*CLI, str(empty)], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr.strip()) == (
        2,
        f"ctxkit: {empty}: a directory with no file in it",
    )
    done = subprocess.run([*CLI, str(folder)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "3 requests" in done.stdout
    rotated = (folder / "traces-2026-11-25T10-00-00.000.jsonl").read_bytes()
    piped = subprocess.run([*CLI, "-"], input=rotated, capture_output=True, check=False)
    assert piped.returncode == 0, piped.stderr
    assert b"2 requests" in piped.stdout, "stdin is told gzip by its first bytes too"


def _seen(requests: list[Request]) -> list[tuple]:
    return [(r.key, r.time_ns, json.dumps(r.messages)) for r in requests]


def test_the_file_exporters_framed_forms_read_as_its_json_lines(tmp_path: Path):
    """``format: proto`` and ``compression: zstd`` (each export behind its length) give the
    requests the default JSON lines give, traces and logs told apart frame by frame; and a
    framed file is judged like any other."""
    conversations = fleet(seed=13, size=24)
    exports = otlp_exports(conversations, batch=5, seed=2)
    lines = tmp_path / "traces.jsonl"
    lines.write_text("\n".join(collector_line(e) for e in exports) + "\n")
    expected = _seen(read_paths([str(lines)]).requests)
    assert len(expected) > 24
    for form, zstd in (("proto", False), ("proto", True), ("json", True)):
        source = tmp_path / f"traces-{form}-{zstd}.bin"
        source.write_bytes(framed([*exports, details_log()], form=form, zstd=zstd))
        read = read_paths([str(source)])
        assert read.problems == [], (form, zstd)
        assert _seen(read.requests)[0][1] == 1, "the logs frame's call"
        assert _seen(read.requests[1:]) == expected, (form, zstd)
    source.write_bytes(framed(exports, form="proto", zstd=True))
    code, report, _ = _audit_file(tmp_path, source)
    _check_fleet(conversations, report)
    assert code == report["exit_code"]


def test_a_cut_off_frame_is_a_problem_after_what_came_before(tmp_path: Path, monkeypatch):
    exports = otlp_exports(fleet(seed=14, size=4), batch=3, seed=1)
    whole = framed(exports)
    source = tmp_path / "traces.bin"
    source.write_bytes(whole[:-10])  # the exporter was still writing the last frame
    read = read_paths([str(source)])
    assert [p.where for p in read.problems] == [f"{source}:frame {len(exports)}"]
    assert "cut off" in read.problems[0].reason
    assert len(read.requests) == sum(
        len(s.spans) for e in exports[:-1] for r in e.resource_spans for s in r.scope_spans
    )
    source.write_bytes(framed(exports, zstd=True))
    monkeypatch.setitem(sys.modules, "zstandard", None)
    needs = r"needs the zstandard package: pip install 'ctxkit-llm\[audit\]'"
    with pytest.raises(UnknownFormat, match=needs):
        read_paths([str(source)])


def test_request_bodies_of_every_api_are_read():
    anthropic = request_of(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 9,
            "system": [{"type": "text", "text": "S"}],
            "messages": [{"role": "user", "content": "q"}],
        },
        "f:1",
        0,
    )
    assert anthropic.messages[0] == {"role": "system", "content": "S"}
    gemini = request_of(
        {
            "contents": [{"role": "user", "parts": [{"text": "q"}]}],
            "systemInstruction": {"parts": [{"text": "S"}]},
        },
        "f:2",
        1,
    )
    assert gemini.messages[0] == {"role": "system", "content": "S"}
    responses = request_of(
        {"model": "gpt-5", "input": "q", "instructions": "S", "previous_response_id": "resp_1"},
        "f:3",
        2,
    )
    assert responses.messages == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "q"},
    ]
    assert "previous_response_id" in responses.partial
    wrapped = request_of(
        {
            "timestamp": "2026-01-01T00:00:00Z",
            "usage": {"prompt_tokens": 12},
            "body": {"model": "gpt-4o", "messages": [], "metadata": {"conversation_id": "k"}},
        },
        "f:4",
        3,
    )
    assert wrapped.key == "k"
    assert wrapped.usage.input_tokens == 12
    assert wrapped.time_ns == 1_767_225_600 * 10**9


def test_a_partial_responses_request_is_not_accused_of_outputs_without_calls():
    """With previous_response_id, the calls are on the provider's side."""
    auditor = Auditor()
    partial = request_of(
        {
            "model": "gpt-5",
            "previous_response_id": "resp_1",
            "input": [{"type": "function_call_output", "call_id": "fc1", "output": "42"}],
        },
        "f:1",
        0,
    )
    audit, found = auditor.add(partial)
    assert found == []
    assert audit.partial == 1
    whole = request_of(
        {
            "model": "gpt-5",
            "input": [{"type": "function_call_output", "call_id": "fc1", "output": "42"}],
        },
        "f:2",
        1,
    )
    assert [f.rule for f in auditor.add(whole)[1]] == ["responses.output_has_call"]


def test_requests_are_put_in_time_order_within_the_window():
    stream = [Request([], t, str(t)) for t in (5, 1, 9, 7, 30, 12)]
    assert [r.time_ns for r in in_order(stream, held=2)] == [1, 5, 7, 9, 12, 30]
    # Further out of place than the window: given out when its turn has passed.
    stream = [Request([], t, str(t)) for t in (5, 6, 7, 8, 1)]
    assert [r.time_ns for r in in_order(stream, held=2)] == [5, 6, 1, 7, 8]


def test_windows_known_and_overridden():
    assert context_window("gpt-4o-2024-08-06") == 128_000
    assert context_window("gpt-4o-mini") == 128_000
    assert context_window("mystery") is None
    assert context_window("mystery-7b", {"mystery": 8000}) == 8000


def test_over_the_window_is_a_budget_finding_and_usage_gives_the_count_error():
    auditor = Auditor(windows={"tiny": 10})
    request = Request(
        [{"role": "user", "content": "word " * 50}],
        1,
        "f:1",
        "tiny",
        key="k",
        keyed_by="session.id",
    )
    audit, (finding,) = auditor.add(request)
    assert finding.property == "budget"
    assert finding.level == "recommended"
    assert audit.verdict == "warn"


# -- the command ----------------------------------------------------------------------------


def test_a_file_in_neither_form_is_exit_2_with_a_sentence(tmp_path: Path):
    source = tmp_path / "x.json"
    source.write_text('{"hello": 1}\n')
    done = subprocess.run([*CLI, str(source)], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "neither OTLP/JSON" in done.stderr
    assert "Traceback" not in done.stderr
    missing = subprocess.run(
        [*CLI, str(tmp_path / "nope")], capture_output=True, text=True, check=False
    )
    assert missing.returncode == 2
    assert "no such file or directory" in missing.stderr
    with pytest.raises(UnknownFormat):
        read_paths([str(source)])


def test_junit_and_exit_code_agree_and_content_shows_only_when_asked(tmp_path: Path):
    lines = [
        json.dumps(
            {
                "model": "gpt-4o",
                "metadata": {"conversation_id": "broken"},
                "messages": [
                    {"role": "user", "content": "secret words"},
                    {"role": "tool", "tool_call_id": "c1", "content": "orphan"},
                ],
            }
        ),
        json.dumps(
            {
                "model": "gpt-4o",
                "metadata": {"conversation_id": "warned"},
                "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}],
            }
        ),
        json.dumps(
            {
                "model": "gpt-4o",
                "metadata": {"conversation_id": "warned"},
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "yo"},
                    {"role": "user", "content": "more"},
                ],
            }
        ),
    ]
    junit = tmp_path / "audit.xml"
    code, report, out = _audit(tmp_path, lines, "--junit", str(junit))
    assert code == 1
    assert "secret words" not in out
    assert "preceeding message with 'tool_calls'" in out  # the provider's own error
    xml = junit.read_text()
    assert 'failures="1"' in xml
    assert xml.count("<failure") == 1
    assert {c["key"]: c["verdict"] for c in report["conversations"]} == {
        "broken": "fail",
        "warned": "warn",
    }
    code, _, out = _audit(tmp_path, lines, "--show-content", "--strict")
    assert code == 1
    assert "orphan" in out
    code, report, _ = _audit(tmp_path, lines[1:], "--strict")
    assert code == 1
    assert report["strict"]
    code, _, _ = _audit(tmp_path, lines[1:])
    assert code == 0


class _Whole(ConversationAudit):
    """Checks every request whole: what the incremental check must always agree with."""

    def _carried(self, prints):
        return None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), window=st.integers(3, 12))
def test_checking_what_a_request_adds_finds_what_checking_it_whole_finds(seed, window):
    """Agent loops, sliding windows that keep the system prompt, planted breakages: the
    incremental pair check gives the same findings at the same requests as a whole check."""
    from ctxkit.tokens import TokenCounter

    counter = TokenCounter()
    for conv in fleet(seed, 6):
        requests = [r if len(r) <= window else [r[0], *r[-window:]] for r in conv.requests]
        quick, whole = ConversationAudit("k", "x", counter), _Whole("k", "x", counter)
        for index, messages in enumerate(requests):
            for audit in (quick, whole):
                audit.add(Request(messages, index, f"r{index}", "gpt-4o"))
        assert {(f.property, f.rule, f.request) for f in quick.findings} == {
            (f.property, f.rule, f.request) for f in whole.findings
        }


def test_the_html_page_escapes_what_was_recorded(tmp_path: Path):
    """Recorded text (a conversation key, a call id) reaches the page as text, never markup."""
    hostile = "<script>alert(1)</script>"
    lines = [
        json.dumps({"model": "gpt-4o", "metadata": {"conversation_id": hostile}, "messages": [
            {"role": "tool", "tool_call_id": "<b>id</b>", "content": "x"}]}),
    ]  # fmt: skip
    page = tmp_path / "audit.html"
    code, _, _ = _audit(tmp_path, lines, "--html", str(page))
    assert code == 1
    text = page.read_text()
    assert hostile not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<b>id</b>" not in text
    assert 'class="verdict fail"' in text
    assert "tool_pair_integrity (required)" in text


def test_each_link_of_the_html_page_lands_on_its_conversations_findings(tmp_path: Path):
    """A conversation with findings after a passing one: its link and its section share one
    anchor (they counted conversations differently, so the link went nowhere)."""
    import re

    clean = {"role": "user", "content": "hello"}
    orphan = {"role": "tool", "tool_call_id": "c1", "content": "x"}
    lines = [
        json.dumps({"model": "gpt-4o", "metadata": {"conversation_id": key}, "messages": [m]})
        for key, m in (("passes", clean), ("fails", orphan))
    ]
    page = tmp_path / "audit.html"
    assert _audit(tmp_path, lines, "--html", str(page))[0] == 1
    text = page.read_text()
    links = re.findall(r'<a href="#(c\d+)">fails</a>', text)
    anchors = re.findall(r'<h2 id="(c\d+)" class="key">fails</h2>', text)
    assert links
    assert links == anchors


def test_a_cache_breakpoint_moving_to_the_newest_message_is_no_compaction():
    """Agents on Anthropic's API move cache_control to the newest message every turn: the
    messages before are unchanged, not dropped and rewritten."""

    def marked(text: str) -> dict:
        return {
            "role": "user",
            "content": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}],
        }

    def plain(text: str) -> dict:
        return {"role": "user", "content": [{"type": "text", "text": text}]}

    answer = {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}
    auditor = Auditor()
    for request in (
        [marked("one")],
        [plain("one"), answer, marked("two")],
        [plain("one"), answer, plain("two"), answer, marked("three")],
    ):
        auditor.add(Request(request, 0, "f", "claude-sonnet-4-5", key="k", keyed_by="session.id"))
    audit = auditor.conversations["k"]
    assert audit.findings == []
    assert audit.compactions == []
    assert audit.prefix_kept == 1.0


def test_two_agents_in_one_trace_are_two_conversations():
    """A handoff or a supervisor with its worker: requests of one trace, no recorded key,
    told apart by their system prompts, so neither reads as the other's dropped history."""
    planner = [{"role": "system", "content": "You plan."}, {"role": "user", "content": "go"}]
    worker = [{"role": "system", "content": "You work."}, {"role": "user", "content": "task"}]
    auditor = Auditor()
    turns = [
        planner,
        worker,
        [*planner, {"role": "assistant", "content": "plan"}, {"role": "user", "content": "ok"}],
        [*worker, {"role": "assistant", "content": "done"}, {"role": "user", "content": "more"}],
    ]
    for at, messages in enumerate(turns):
        auditor.add(Request(messages, at, f"f:{at}", "gpt-4o", trace_id="t1"))
    assert sorted(a.requests for a in auditor.conversations.values()) == [2, 2]
    assert all(a.findings == [] for a in auditor.conversations.values())
    # A request of the trace that lost its system prompt still joins the trace's agent.
    single = Auditor()
    single.add(Request(planner, 0, "f:0", "gpt-4o", trace_id="t2"))
    _, found = single.add(Request(planner[1:], 1, "f:1", "gpt-4o", trace_id="t2"))
    assert [f.kind for f in found] == ["dropped-system"]


@pytest.mark.parametrize(
    ("line", "keyed_by"),
    [
        ({"body": {"model": "m", "messages": [], "metadata": {"conversation_id": "a"}}},
         "metadata.conversation_id"),
        ({"conversation_id": "a", "body": {"model": "m", "messages": []}}, "conversation_id"),
    ],
)  # fmt: skip
def test_a_conversation_id_is_named_where_it_was_found(line, keyed_by):
    request = request_of({"timestamp": 1, **line}, "f", 1)
    assert (request.key, request.keyed_by) == ("a", keyed_by)
