"""Record, like ``record_instrumented.py``, a small agent conversation through a real client
library under a real GenAI instrumentation against the loopback fake provider, for the
instrumentations that one does not cover: Bedrock's Converse API (OpenLLMetry's and
OpenInference's bedrock instrumentations), OpenTelemetry's official and OpenLLMetry's google-genai
instrumentations, LiteLLM's own OpenTelemetry callback and OpenInference's litellm instrumentation.

    python tests/record_more.py NAME --file OUT.jsonl

NAME: one of :data:`CONTENT_SETTINGS`. The conversation, in the API's own form, has three
requests in one trace (under a span ``conversation``): a question; the question, a call and its
result; then the same with the calling message dropped and its result kept, followed by an
assistant text and a user "thanks". An audit must find exactly one break, at request 2, judged
under the API the conversation went to. Run in a process of its own: instrumentations patch the
client libraries for the whole process.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.record_instrumented import OPENAI_REQUESTS, SYSTEM  # noqa: E402

CONTENT_SETTINGS = {
    "openllmetry-bedrock": {"TRACELOOP_TRACE_CONTENT": "true"},
    "openinference-bedrock": {},
    "otel-google-genai": {
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    },
    "litellm-otel": {
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        # Without it, a call made under an active span writes its attributes onto that span
        # (each call overwriting the last) instead of opening a ``litellm_request`` span.
        "USE_OTEL_LITELLM_REQUEST_SPAN": "true",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of its price list at import
    },
    "openinference-litellm": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    "openllmetry-google-genai": {"TRACELOOP_TRACE_CONTENT": "true"},
}
"""Every recording, and what makes it record message content (and, for LiteLLM, one span per
call)."""

BEDROCK_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
_ASK_BEDROCK = {"role": "user", "content": [{"text": "list files"}]}
_TOOL_USE = {"toolUse": {"toolUseId": "call_1", "name": "ls", "input": {}}}
_TOOL_RESULT = {"toolResult": {"toolUseId": "call_1", "content": [{"text": "a.py"}]}}
BEDROCK_REQUESTS = [
    [_ASK_BEDROCK],
    [
        _ASK_BEDROCK,
        {"role": "assistant", "content": [_TOOL_USE]},
        {"role": "user", "content": [_TOOL_RESULT]},
    ],
    [  # the manager dropped the calling message and kept its result
        _ASK_BEDROCK,
        {"role": "user", "content": [_TOOL_RESULT]},
        {"role": "assistant", "content": [{"text": "one file"}]},
        {"role": "user", "content": [{"text": "thanks"}]},
    ],
]
_ASK_GEMINI = {"role": "user", "parts": [{"text": "list files"}]}
_LS_RESPONSE = {"function_response": {"name": "ls", "response": {"out": "a.py"}}}
_RESPONSE = {"role": "user", "parts": [_LS_RESPONSE]}
GEMINI_REQUESTS = [
    [_ASK_GEMINI],
    [
        _ASK_GEMINI,
        {"role": "model", "parts": [{"function_call": {"name": "ls", "args": {}}}]},  # no id
        _RESPONSE,
    ],
    [  # the manager dropped the call and kept its response
        _ASK_GEMINI,
        _RESPONSE,
        {"role": "model", "parts": [{"text": "one file"}]},
        {"role": "user", "parts": [{"text": "thanks"}]},
    ],
]


def _bedrock(name: str, fake_url: str) -> Any:
    """Instrument botocore for ``name`` (before the client is made: both instrumentations wrap
    client creation) and return a ``bedrock-runtime`` client pointed at the fake."""
    if name == "openllmetry-bedrock":
        from opentelemetry.instrumentation.bedrock import BedrockInstrumentor
    else:
        from openinference.instrumentation.bedrock import BedrockInstrumentor
    BedrockInstrumentor().instrument()
    import boto3

    return boto3.client(
        "bedrock-runtime",
        endpoint_url=fake_url.removesuffix("/v1"),
        region_name="us-east-1",
        aws_access_key_id="k",
        aws_secret_access_key="k",
    )


def _gemini(name: str, fake_url: str) -> Any:
    """A google-genai client pointed at the fake, under OpenLLMetry's instrumentation
    (``opentelemetry-instrumentation-google-generativeai``, which wraps google-genai) or the
    official one, whose declared ``google-genai<3`` bound the installed 3.x does not meet: its
    dependency check is skipped, the API is the same. Every release of the official one that
    imports with opentelemetry-api 1.45 needs opentelemetry-util-genai >= 1.0b0, with which
    openai-v2 2.4b0 no longer imports; so the two go in a directory of their own:
    ``pip install --no-deps --target DIR opentelemetry-util-genai==1.3b0
    opentelemetry-instrumentation-google-genai==1.3b0`` and run with ``PYTHONPATH=DIR``."""
    from google import genai
    from google.genai import types

    if name == "openllmetry-google-genai":
        from opentelemetry.instrumentation.google_generativeai import (
            GoogleGenerativeAiInstrumentor,
        )

        GoogleGenerativeAiInstrumentor().instrument()
    else:
        from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor

        GoogleGenAiSdkInstrumentor().instrument(skip_dep_check=True)
    return genai.Client(
        api_key="k", http_options=types.HttpOptions(base_url=fake_url.removesuffix("/v1"))
    )


def _litellm(name: str, tracer_provider: Any) -> Any:
    """LiteLLM under OpenInference's instrumentation (which replaces ``litellm.completion`` and
    the like on the module), or LiteLLM's callback on our tracer provider: its config would
    otherwise build an exporter (console by default) from the environment."""
    import litellm

    if name == "openinference-litellm":
        from openinference.instrumentation.litellm import LiteLLMInstrumentor

        LiteLLMInstrumentor().instrument(tracer_provider=tracer_provider)
        return litellm
    from litellm.integrations.opentelemetry import OpenTelemetry, OpenTelemetryConfig

    callback = OpenTelemetry(
        config=OpenTelemetryConfig(capture_message_content="SPAN_ONLY"),
        tracer_provider=tracer_provider,
    )
    litellm.callbacks = [callback]
    return litellm


def _converse(name: str, client: Any, fake_url: str) -> None:
    """The API's three requests, through the real client."""
    if name.endswith("bedrock"):
        for messages in BEDROCK_REQUESTS:
            client.converse(modelId=BEDROCK_MODEL, system=[{"text": SYSTEM}], messages=messages)
    elif name.endswith("google-genai"):
        from google.genai import types

        config = types.GenerateContentConfig(system_instruction=SYSTEM)
        for contents in GEMINI_REQUESTS:
            if name == "openllmetry-google-genai":
                # It reads calls and responses from typed parts or camelCase dicts only; the
                # snake_case dicts (which the client takes alike) it records as their str().
                contents = [types.Content.model_validate(content) for content in contents]
            client.models.generate_content(
                model="gemini-2.0-flash", contents=contents, config=config
            )
    else:
        for messages in OPENAI_REQUESTS:
            client.completion(
                model="openai/gpt-4o-mini", api_base=fake_url, api_key="k", messages=messages
            )
        # Its callbacks run on a pool of its own, after each call returns.
        from litellm.litellm_core_utils.thread_pool_executor import executor

        executor.shutdown(wait=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("name", choices=sorted(CONTENT_SETTINGS))
    parser.add_argument("--file", type=Path, required=True, help="write what was recorded here")
    args = parser.parse_args()
    os.environ.update(CONTENT_SETTINGS[args.name])

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
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    _logs.set_logger_provider(logger_provider)
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tracer_provider)

    tracer = trace.get_tracer("recorded-agent")
    with FakeProvider() as fake:
        if args.name.endswith("bedrock"):
            client = _bedrock(args.name, fake.url)
        elif args.name.endswith("google-genai"):
            client = _gemini(args.name, fake.url)
        else:
            client = _litellm(args.name, tracer_provider)
        with tracer.start_as_current_span("conversation"):
            _converse(args.name, client, fake.url)
    tracer_provider.shutdown()
    logger_provider.shutdown()
    lines = trace_lines(spans.get_finished_spans()) + log_lines(logs.get_finished_logs())
    args.file.write_text("".join(line + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
