"""Run a small pydantic-ai Agent conversation against the loopback fake OpenAI provider under
pydantic-ai's own instrumentation, and record its spans into a file as the Collector's file
exporter writes them.

    python tests/record_pydantic_ai.py --version V --file F

V: an instrumentation data-format version pydantic-ai's ``InstrumentationSettings`` accepts
(:data:`VERSIONS`). The conversation has three ``run_sync`` calls in one trace, each given the
``message_history`` built here: the first has none, the second carries a clean call and its
result, the third a result whose calling response the agent's manager dropped (see
:func:`histories`), which pydantic-ai itself removes before sending: what is recorded is three
clean requests of one conversation. pydantic-ai 2.68's ``Agent`` takes no ``instrument=``
argument: the settings go in through the ``Instrumentation`` capability. Run in a process of
its own.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VERSIONS = (2, 3, 4, 5, 6)
"""What ``InstrumentationSettings(version=...)`` accepts in pydantic-ai 2.68 (2-4 deprecated)."""

SYSTEM = "Be terse."
CONVERSATION = "conv-pydantic-ai"
"""pydantic-ai's own conversation key (``gen_ai.conversation.id``, with the version): one for
the three runs, as an agent that passes a run's messages on to the next keeps it."""


def histories() -> list[tuple[list[Any] | None, str]]:
    """The three runs: (message_history, user prompt)."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    # With a history given, the agent adds no system prompt of its own: the history carries it.
    ask = ModelRequest(
        parts=[SystemPromptPart(content=SYSTEM), UserPromptPart(content="list files")]
    )
    call = ModelResponse(
        parts=[ToolCallPart(tool_name="ls", args={}, tool_call_id="call_1")],
        model_name="gpt-4o-mini",
    )
    result = ModelRequest(
        parts=[ToolReturnPart(tool_name="ls", content="a.py", tool_call_id="call_1")]
    )
    answer = ModelResponse(parts=[TextPart(content="one file")], model_name="gpt-4o-mini")
    return [
        (None, "list files"),
        ([ask, call, result], "and?"),
        # The call's response dropped, its result kept. pydantic-ai 2.68 does not refuse this: its
        # `_clean_message_history` silently drops the orphaned result before the run starts, so
        # neither the request sent nor the spans carry it.
        ([ask, result, answer], "thanks"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", type=int, choices=VERSIONS, required=True)
    parser.add_argument("--file", type=Path, required=True, help="write what was recorded here")
    args = parser.parse_args()

    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from tests.fake_provider import FakeProvider
    from tests.otlp_files import trace_lines

    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": "recorded-agent"}))
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    with warnings.catch_warnings():  # versions 2-4 are deprecated, and say so
        warnings.simplefilter("ignore")
        settings = InstrumentationSettings(
            version=args.version, include_content=True, tracer_provider=tracer_provider
        )

    tracer = tracer_provider.get_tracer("recorded-agent")
    with FakeProvider() as fake:
        model = OpenAIChatModel(
            "gpt-4o-mini", provider=OpenAIProvider(base_url=fake.url, api_key="k")
        )
        agent = Agent(
            model, system_prompt=SYSTEM, capabilities=[Instrumentation(settings=settings)]
        )
        with tracer.start_as_current_span("conversation"):
            for history, prompt in histories():
                agent.run_sync(
                    prompt,
                    message_history=history,
                    conversation_id=f"{CONVERSATION}-v{args.version}",
                )
        requests = list(fake.requests)
    tracer_provider.shutdown()
    args.file.write_text("".join(line + "\n" for line in trace_lines(spans.get_finished_spans())))
    print(f"{len(requests)} request bodies", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
