"""Run a small LangChain conversation (langchain-openai's ``ChatOpenAI``) against the loopback
fake provider under a real LangChain instrumentation, and record its spans into a file as the
Collector's file exporter writes them.

    python tests/record_langchain.py INSTRUMENTATION --file F [--chain]

INSTRUMENTATION: one of :data:`CONTENT_SETTINGS`: OpenInference's ``LangChainInstrumentor`` or
OpenLLMetry's ``LangchainInstrumentor``. Both hook LangChain's callback system, not the openai
client, so what they record is LangChain's messages, as the chat model was given them. The
conversation is three ``invoke`` calls in one trace, each given its whole message list
(:func:`conversation`): the first a question, the second a call and its result (clean), the
third a result whose calling message the agent's manager dropped (a break at request 2). A
chat model invoked on its own gives one LLM span per call and nothing else; with ``--chain``
each call goes through a two-step ``RunnableSequence``, so the recording also holds chain (or
workflow) spans whose input is the same message list, which an audit must not count as
requests. Run in a process of its own: instrumentations patch LangChain for the whole process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONTENT_SETTINGS: dict[str, dict[str, str]] = {
    "openinference-langchain": {},
    "openllmetry-langchain": {"TRACELOOP_TRACE_CONTENT": "true"},
}
"""Every instrumentation recorded, and what makes it record message content."""

SYSTEM = "Be terse."


def conversation() -> list[list[Any]]:
    """The three requests' message lists, as LangChain messages."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    system, ask = SystemMessage(SYSTEM), HumanMessage("list files")
    call = AIMessage("", tool_calls=[{"id": "call_1", "name": "ls", "args": {}}])
    result = ToolMessage(tool_call_id="call_1", content="a.py")
    return [
        [system, ask],
        [system, ask, call, result],
        # The manager dropped the calling message and kept its result: langchain-openai sends
        # it as it is (a role "tool" message no assistant message calls).
        [system, ask, result, AIMessage("one file"), HumanMessage("thanks")],
    ]


def _instrument(name: str, tracer_provider: Any) -> None:
    """Instrument LangChain for ``name``, its spans going to ``tracer_provider``."""
    if name == "openinference-langchain":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=tracer_provider)
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=tracer_provider)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("instrumentation", choices=sorted(CONTENT_SETTINGS))
    parser.add_argument("--file", type=Path, required=True, help="write what was recorded here")
    parser.add_argument("--chain", action="store_true", help="call the model through a chain")
    args = parser.parse_args()
    # Before the instrumentation is imported: OpenLLMetry reads the setting when it records.
    os.environ.update(CONTENT_SETTINGS[args.instrumentation])

    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.fake_provider import FakeProvider
    from tests.otlp_files import trace_lines

    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": "recorded-agent"}))
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    _instrument(args.instrumentation, tracer_provider)

    from langchain_core.runnables import RunnableLambda
    from langchain_openai import ChatOpenAI

    tracer = tracer_provider.get_tracer("recorded-agent")
    with FakeProvider() as fake:
        model: Any = ChatOpenAI(base_url=fake.url, api_key="k", model="gpt-4o-mini")
        if args.chain:  # a pass-through step first, as an agent's own preparation would be
            model = RunnableLambda(list) | model
        with tracer.start_as_current_span("conversation"):
            for messages in conversation():
                model.invoke(messages)
        requests = list(fake.requests)
    tracer_provider.shutdown()
    args.file.write_text("".join(line + "\n" for line in trace_lines(spans.get_finished_spans())))
    for path, body in requests:  # what langchain-openai really sent, to compare with the spans
        print(path, json.dumps(body.get("messages")), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
