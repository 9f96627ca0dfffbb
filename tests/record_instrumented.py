"""Run a small agent conversation through a real client library under a real GenAI
instrumentation, against the loopback fake provider, and record its telemetry: into a file as
the Collector's file exporter writes it, or over OTLP/HTTP to an endpoint.

    python tests/record_instrumented.py INSTRUMENTATION [--file F] [--endpoint URL]

INSTRUMENTATION: one of :data:`CONTENT_SETTINGS`: OpenTelemetry's official openai-v2
(structured content on spans, or on log events), OpenLLMetry's openai and anthropic,
OpenInference's openai (Chat and Responses) and google-genai, Logfire's ``instrument_openai``
(Chat and Responses) and ``instrument_anthropic``. The conversation, in
the API's own form, has three requests in one trace: the second is clean but unusual
(parallel calls; Gemini's without ids), the third carries a result whose call the agent's
manager dropped, so an audit must find exactly :data:`EXPECTED` for its API, at request 2.
Run in a process of its own: instrumentations patch the client libraries for the whole
process.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONTENT_SETTINGS = {
    "openai-v2": {
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    },
    "openai-v2-events": {
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY",
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    },
    "openllmetry-openai": {"TRACELOOP_TRACE_CONTENT": "true"},
    "openllmetry-anthropic": {"TRACELOOP_TRACE_CONTENT": "true"},
    "openinference-openai": {},
    "openinference-openai-responses": {},
    "openinference-google-genai": {},
    "logfire-openai": {},
    "logfire-openai-responses": {},
    "logfire-anthropic": {},
}
"""Every instrumentation recorded, and what makes it record message content. (OpenLLMetry's
openai 0.62 records no span at all for a Responses call whose input holds function_call
items: there is nothing to audit.)"""

SYSTEM = "Be terse."
CALL = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
OPENAI_REQUESTS = [
    [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "list files"}],
    [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.py"},
    ],
    [  # the manager dropped the calling message and kept its result
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "list files"},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.py"},
        {"role": "assistant", "content": "one file"},
        {"role": "user", "content": "thanks"},
    ],
]
USE = {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}
ANTHROPIC_REQUESTS = [
    [{"role": "user", "content": "list files"}],
    [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": [USE]},
        {"role": "user", "content": [RESULT]},
    ],
    [
        {"role": "user", "content": "list files"},
        {"role": "user", "content": [RESULT]},
        {"role": "assistant", "content": "one file"},
        {"role": "user", "content": "thanks"},
    ],
]
_LS = {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"}
_CAT = {"type": "function_call", "call_id": "call_2", "name": "cat", "arguments": '{"f":"a.py"}'}
_LS_OUT = {"type": "function_call_output", "call_id": "call_1", "output": "a.py"}
_CAT_OUT = {"type": "function_call_output", "call_id": "call_2", "output": "print(1)"}
_ASK = {"role": "user", "content": "list files and show a.py"}
RESPONSES_REQUESTS = [
    [_ASK],
    [_ASK, _LS, _CAT, _LS_OUT, _CAT_OUT],  # parallel calls: clean, whatever the recorder writes
    [  # the manager dropped both calls and kept the first output
        _ASK,
        _LS_OUT,
        {"role": "assistant", "content": "one file"},
        {"role": "user", "content": "thanks"},
    ],
]
_ASK_GEMINI = {"role": "user", "parts": [{"text": "list files and show a.py"}]}
_CALLS = {
    "role": "model",
    "parts": [
        {"function_call": {"name": "ls", "args": {}}},
        {"function_call": {"name": "cat", "args": {"f": "a.py"}}},
    ],
}
_LS_RESPONSE = {"function_response": {"name": "ls", "response": {"out": "a.py"}}}
_CAT_RESPONSE = {"function_response": {"name": "cat", "response": {"out": "print(1)"}}}
GEMINI_REQUESTS = [
    [_ASK_GEMINI],
    # Two calls without ids, answered by name and position: clean.
    [_ASK_GEMINI, _CALLS, {"role": "user", "parts": [_LS_RESPONSE, _CAT_RESPONSE]}],
    [  # the manager dropped the second response
        _ASK_GEMINI,
        _CALLS,
        {"role": "user", "parts": [_LS_RESPONSE]},
        {"role": "model", "parts": [{"text": "one file"}]},
        {"role": "user", "parts": [{"text": "thanks"}]},
    ],
]

EXPECTED = {
    "openai": [("tool_pair_integrity", 2, "openai.result_has_call")],
    "anthropic": [("tool_pair_integrity", 2, "anthropic.result_has_call")],
    "responses": [("tool_pair_integrity", 2, "responses.output_has_call")],
    "gemini": [
        ("tool_pair_integrity", 2, "gemini.responses_match_calls"),
        ("tool_pair_integrity", 2, "gemini.responses_match_calls"),
    ],
}
"""What the audit must find in each API's conversation (property, 0-based request, rule), and
nothing else."""


def api_of(instrumentation: str) -> str:
    """The API an instrumentation's conversation goes to."""
    for suffix, api in (("-responses", "responses"), ("anthropic", "anthropic")):
        if instrumentation.endswith(suffix):
            return api
    return "gemini" if "google-genai" in instrumentation else "openai"


def _instrument(name: str, fake_url: str) -> Any:
    """Instrument the client library for ``name``; returns the client to call."""
    api = api_of(name)
    if name.startswith("logfire"):
        import logfire

        client = _client(api, fake_url)
        if api == "anthropic":
            logfire.instrument_anthropic(client)
        else:
            logfire.instrument_openai(client)
        return client
    if name.startswith("openai-v2"):
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as Instrumentor
    elif name.startswith("openllmetry-openai"):
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as Instrumentor
    elif name.startswith("openinference-openai"):
        from openinference.instrumentation.openai import OpenAIInstrumentor as Instrumentor
    elif name == "openinference-google-genai":
        from openinference.instrumentation.google_genai import (
            GoogleGenAIInstrumentor as Instrumentor,
        )
    else:
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor as Instrumentor
    Instrumentor().instrument()
    return _client(api, fake_url)


def _client(api: str, fake_url: str) -> Any:
    if api == "anthropic":
        import anthropic

        return anthropic.Anthropic(base_url=fake_url.removesuffix("/v1"), api_key="k")
    if api == "gemini":
        from google import genai
        from google.genai import types

        return genai.Client(
            api_key="k", http_options=types.HttpOptions(base_url=fake_url.removesuffix("/v1"))
        )
    import openai

    return openai.OpenAI(base_url=fake_url, api_key="k")


def _converse(api: str, client: Any) -> None:
    """The API's three requests, through the real client."""
    if api == "anthropic":
        for messages in ANTHROPIC_REQUESTS:
            client.messages.create(
                model="claude-sonnet-4-5", max_tokens=64, system=SYSTEM, messages=messages
            )
    elif api == "responses":
        for items in RESPONSES_REQUESTS:
            client.responses.create(model="gpt-4o-mini", instructions=SYSTEM, input=items)
    elif api == "gemini":
        for contents in GEMINI_REQUESTS:
            client.models.generate_content(model="gemini-2.0-flash", contents=contents)
    else:
        for messages in OPENAI_REQUESTS:
            client.chat.completions.create(model="gpt-4o-mini", messages=messages)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("instrumentation", choices=sorted(CONTENT_SETTINGS))
    parser.add_argument("--file", type=Path, help="write what was recorded here")
    parser.add_argument("--endpoint", help="and/or export it over OTLP/HTTP to this URL")
    args = parser.parse_args()
    if not (args.file or args.endpoint):
        parser.error("give --file, --endpoint or both")
    os.environ.update(CONTENT_SETTINGS[args.instrumentation])

    from opentelemetry import _logs, trace
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.fake_provider import FakeProvider
    from tests.otlp_files import log_lines, trace_lines

    resource = Resource.create({"service.name": "recorded-agent"})
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    span_processors = [SimpleSpanProcessor(spans)]
    logger_provider = LoggerProvider(resource=resource)
    if args.endpoint:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        span_processors.append(
            SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{args.endpoint}/v1/traces"))
        )
        logger_provider.add_log_record_processor(
            SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{args.endpoint}/v1/logs"))
        )
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    _logs.set_logger_provider(logger_provider)
    if args.instrumentation.startswith("logfire"):
        import logfire  # its own tracer provider, which it makes the global one

        logfire.configure(
            send_to_logfire=False,
            console=False,
            service_name="recorded-agent",
            additional_span_processors=span_processors,
        )
        flush = logfire.force_flush
    else:
        tracer_provider = TracerProvider(resource=resource)
        for processor in span_processors:
            tracer_provider.add_span_processor(processor)
        trace.set_tracer_provider(tracer_provider)
        flush = tracer_provider.shutdown

    tracer = trace.get_tracer("recorded-agent")
    with FakeProvider() as fake:
        client = _instrument(args.instrumentation, fake.url)
        with tracer.start_as_current_span("invoke_agent"):
            _converse(api_of(args.instrumentation), client)
    flush()
    logger_provider.shutdown()
    if args.file:
        lines = trace_lines(spans.get_finished_spans()) + log_lines(logs.get_finished_logs())
        args.file.write_text("".join(line + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
