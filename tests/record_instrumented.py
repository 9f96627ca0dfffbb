"""Run a small agent conversation through a real client library under a real GenAI
instrumentation, against the loopback fake provider, and record its telemetry: into a file as
the Collector's file exporter writes it, or over OTLP/HTTP to an endpoint.

    python tests/record_instrumented.py INSTRUMENTATION [--file F] [--endpoint URL]

INSTRUMENTATION: ``openai-v2`` (OpenTelemetry's official, structured content on spans),
``openai-v2-events`` (the same, content on log events), ``openllmetry-openai``,
``openllmetry-anthropic``, ``openinference-openai``. The conversation has three requests in
one trace; the third carries a tool result whose call the agent's manager dropped, so an
audit must find exactly one ``tool_pair_integrity`` failure, at request 2. Run in a process of
its own: instrumentations patch the client libraries for the whole process.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

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
}

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


def _instrument(name: str) -> None:
    if name.startswith("openai-v2"):
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    elif name == "openllmetry-openai":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    elif name == "openinference-openai":
        from openinference.instrumentation.openai import OpenAIInstrumentor
    else:
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

        AnthropicInstrumentor().instrument()
        return
    OpenAIInstrumentor().instrument()


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
    tracer_provider = TracerProvider(resource=resource)
    logger_provider = LoggerProvider(resource=resource)
    if args.endpoint:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        tracer_provider.add_span_processor(
            SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{args.endpoint}/v1/traces"))
        )
        logger_provider.add_log_record_processor(
            SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{args.endpoint}/v1/logs"))
        )
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    trace.set_tracer_provider(tracer_provider)
    _logs.set_logger_provider(logger_provider)
    _instrument(args.instrumentation)

    tracer = trace.get_tracer("recorded-agent")
    with FakeProvider() as fake, tracer.start_as_current_span("invoke_agent"):
        if args.instrumentation == "openllmetry-anthropic":
            import anthropic

            client = anthropic.Anthropic(base_url=fake.url.removesuffix("/v1"), api_key="k")
            for messages in ANTHROPIC_REQUESTS:
                client.messages.create(
                    model="claude-sonnet-4-5", max_tokens=64, system=SYSTEM, messages=messages
                )
        else:
            import openai

            client = openai.OpenAI(base_url=fake.url, api_key="k")
            for messages in OPENAI_REQUESTS:
                client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    tracer_provider.shutdown()
    logger_provider.shutdown()
    if args.file:
        lines = trace_lines(spans.get_finished_spans()) + log_lines(logs.get_finished_logs())
        args.file.write_text("".join(line + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
