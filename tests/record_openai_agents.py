"""Run a small OpenAI Agents SDK conversation against the loopback fake provider's Responses
API under OpenInference's openai-agents instrumentation, and record its spans into a file as
the Collector's file exporter writes them.

    python tests/record_openai_agents.py openinference-openai-agents --file F

The conversation is three ``Runner.run_sync`` calls in one trace, each given its whole input as
Responses items (``RESPONSES_REQUESTS`` of tests/record_instrumented.py): the first a question,
the second parallel calls and their outputs (clean), the third an output whose call the agent's
manager dropped (a break at request 2). The Agents SDK records its runs with its own tracing,
not OpenTelemetry: the instrumentor registers a processor that turns the SDK's traces and spans
into OTel spans, and (``exclusive_processor``, its default) replaces the SDK's own processors,
so nothing is exported to OpenAI's trace backend. The SDK's tracing must therefore stay
enabled. Each run is an SDK trace of its own; its root span starts in the current OTel context,
so the three sit under the ``conversation`` span here, in one OTel trace. Run in a process of
its own.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NAMES = ("openinference-openai-agents",)
"""The instrumentations this script records."""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("instrumentation", choices=NAMES)
    parser.add_argument("--file", type=Path, required=True, help="write what was recorded here")
    args = parser.parse_args()

    from agents import Agent, Runner
    from agents.models.openai_responses import OpenAIResponsesModel
    from openai import AsyncOpenAI
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.fake_provider import FakeProvider
    from tests.otlp_files import trace_lines
    from tests.record_instrumented import RESPONSES_REQUESTS, SYSTEM

    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": "recorded-agent"}))
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    # Replaces the SDK's default processor (the one exporting to OpenAI) with OpenInference's.
    OpenAIAgentsInstrumentor().instrument(tracer_provider=tracer_provider)

    tracer = tracer_provider.get_tracer("recorded-agent")
    with FakeProvider() as fake:
        model = OpenAIResponsesModel(
            model="gpt-4o-mini", openai_client=AsyncOpenAI(base_url=fake.url, api_key="k")
        )
        agent = Agent(name="assistant", instructions=SYSTEM, model=model)
        with tracer.start_as_current_span("conversation"):
            for items in RESPONSES_REQUESTS:
                Runner.run_sync(agent, input=items)
        requests = list(fake.requests)
    tracer_provider.shutdown()
    args.file.write_text("".join(line + "\n" for line in trace_lines(spans.get_finished_spans())))
    for path, body in requests:  # what the SDK really sent, to compare with the spans
        print(path, json.dumps(body.get("input")), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
