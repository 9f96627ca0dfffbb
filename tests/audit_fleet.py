"""A seeded fleet of recorded conversations for the audit: agent loops in every shape, some
compacted the way correct managers compact (whole oldest turns dropped, or replaced by a
summary; a message recalled), and some with one breakage planted in their last request.

Each conversation is the list of requests its agent sent (each request the messages of one
model call) and the findings the audit must report: (property, kind, request index)."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ctxkit.shapes.convert import convert

BREAKAGES = (
    "split_pair",
    "dropped_system",
    "reorder",
    "dropped_user",
    "lost_reasoning",
    "gemini_count",
)
"""What can be planted, and the finding each must give (see :data:`EXPECTED`)."""

EXPECTED = {
    "split_pair": ("tool_pair_integrity", "stray"),
    "dropped_system": ("preservation", "dropped-system"),
    "reorder": ("ordering", "reordered"),
    "dropped_user": ("preservation", "dropped-user"),
    "lost_reasoning": ("tool_pair_integrity", "reasoning-separated"),
    "gemini_count": ("tool_pair_integrity", "unanswered"),
}

SHAPES = ("openai", "anthropic", "responses", "gemini", "bedrock", "genai")


@dataclass
class Conversation:
    key: str
    shape: str
    requests: list[list[dict[str, Any]]] = field(default_factory=list)
    planted: str = ""
    clean_compactions: int = 0

    @property
    def expected(self) -> set[tuple[str, str, int]]:
        if not self.planted:
            return set()
        prop, kind = EXPECTED[self.planted]
        return {(prop, kind, len(self.requests) - 1)}


def _turn(key: str, turn: int, calls: int) -> list[list[dict[str, Any]]]:
    """One turn in the OpenAI form: [question], [calling message, results...], [answer]."""
    question = [{"role": "user", "content": f"{key}: question {turn}"}]
    ids = [f"{key.replace('-', '')}t{turn}c{j}" for j in range(calls)]
    calling = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"n": turn, "j": j})},
            }
            for j, call_id in enumerate(ids)
        ],
    }
    results = [
        {"role": "tool", "tool_call_id": call_id, "content": f"result {turn}.{j} " * 3}
        for j, call_id in enumerate(ids)
    ]
    answer = [{"role": "assistant", "content": f"answer {turn}"}]
    return [question, [calling, *results], answer]


def _in_shape(messages: list[dict[str, Any]], shape: str) -> list[dict[str, Any]]:
    system = [m for m in messages if m.get("role") == "system"]
    rest = [m for m in messages if m.get("role") != "system"]
    if shape == "openai":
        return copy.deepcopy(system + rest)
    return copy.deepcopy(system) + convert(rest, shape)  # the chat-form system prompt stays


def _with_reasoning(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Responses items with a reasoning item before each run of function calls."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.get("type") == "function_call" and (
            not out or out[-1].get("type") not in ("function_call", "reasoning")
        ):
            out.append({"type": "reasoning", "id": f"rs_{message['call_id']}", "summary": []})
        out.append(message)
    return out


def conversation(rng: random.Random, key: str, shape: str, planted: str = "") -> Conversation:
    """An agent loop of a few turns; each turn's requests are the history so far (a model
    call before the tools, one after their results), compacted cleanly now and then."""
    found = Conversation(key, shape, planted=planted)
    system = {"role": "system", "content": f"You are agent {key}."}
    history: list[list[dict[str, Any]]] = []  # units, oldest first
    dropped_from = 0
    summary: list[dict[str, Any]] = []
    turns = rng.randint(2, 5)
    for turn in range(turns):
        calls = 2 if planted == "gemini_count" and turn == turns - 1 else rng.randint(1, 2)
        question, calling, answer = _turn(key, turn, calls)
        for unit in (question, calling):
            history.append(unit)
            if len(history) - dropped_from > 5 and rng.random() < 0.4:
                # a correct sliding window: whole oldest units out, a summary in their place
                # (or not); the newest user message and the system prompt stay
                newest_user = max(i for i, u in enumerate(history) if u[0]["role"] == "user")
                dropped_from = min(dropped_from + 2, newest_user)
                if rng.random() < 0.5:
                    summary = [
                        {"role": "assistant", "content": f"(summary of {dropped_from} units)"}
                    ]
                found.clean_compactions += 1
            view = [system, *summary, *(m for u in history[dropped_from:] for m in u)]
            found.requests.append(view)
        history.append(answer)
    found.requests = [_in_shape(view, shape) for view in found.requests]
    if shape == "responses":
        found.requests = [_with_reasoning(view) for view in found.requests]
    if planted:
        broken = _plant(planted, found.requests[-1], found.requests[-2])
        if broken is None:
            found.planted = ""  # nothing in this conversation to break that way
        else:
            found.requests[-1] = broken
    return found


def _plain(message: dict[str, Any]) -> bool:
    """A message with text only: no calls, no results, not the system prompt."""
    if message.get("role") in (None, "system", "tool") or _calls(message) or _responses(message):
        return False
    content = message.get("content")
    blocks = content if isinstance(content, list) else message.get("parts") or []
    return not any(
        isinstance(b, dict)
        and (b.get("type") in ("tool_result", "tool_call_response") or "toolResult" in b)
        for b in blocks
    )


def _plant(
    breakage: str, view: list[dict[str, Any]], before: list[dict[str, Any]]
) -> list[dict[str, Any]] | None:
    view = copy.deepcopy(view)
    if breakage == "split_pair":
        caller = max(i for i, m in enumerate(view) if _calls(m))
        del view[caller]
    elif breakage == "dropped_system":
        del view[0]
    elif breakage == "reorder":
        # two text messages the previous request had, next to each other, swapped
        swappable = [
            i
            for i in range(1, len(view) - 1)
            if _plain(view[i])
            and _plain(view[i + 1])
            and view[i] in before
            and view[i + 1] in before
            and view[i] != view[i + 1]
        ]
        if not swappable:
            return None
        at = swappable[0]
        view[at], view[at + 1] = view[at + 1], view[at]
    elif breakage == "dropped_user":
        newest = max(i for i, m in enumerate(view) if _user_text(m))
        del view[newest]
    elif breakage == "lost_reasoning":
        # a reasoning item the previous request had before the same call
        seen = [
            i
            for i, m in enumerate(view[:-1])
            if m.get("type") == "reasoning" and m in before and view[i + 1] in before
        ]
        if not seen:
            return None
        del view[seen[-1]]
    elif breakage == "gemini_count":
        answers = max(i for i, m in enumerate(view) if _responses(m))
        view[answers]["parts"] = view[answers]["parts"][:1]
    return view


def _calls(message: dict[str, Any]) -> bool:
    if message.get("tool_calls") or message.get("type") == "function_call":
        return True
    blocks = message.get("content") if isinstance(message.get("content"), list) else []
    parts = message.get("parts") or []
    return any(
        isinstance(b, dict) and (b.get("type") == "tool_use" or "toolUse" in b) for b in blocks
    ) or any("functionCall" in p or p.get("type") == "tool_call" for p in parts)


def _responses(message: dict[str, Any]) -> bool:
    return any("functionResponse" in p for p in message.get("parts") or [])


def _user_text(message: dict[str, Any]) -> bool:
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, str):
        return not content.startswith("(summary")
    parts = content if isinstance(content, list) else message.get("parts") or []
    return any(
        isinstance(p, dict)
        and ("text" in p or p.get("type") in ("text", "input_text"))
        and "summary of" not in str(p)
        for p in parts
    )


def plantable(shape: str) -> tuple[str, ...]:
    """The breakages a conversation in this shape can carry."""
    return tuple(
        b
        for b in BREAKAGES
        if (b != "lost_reasoning" or shape == "responses")
        and (b != "gemini_count" or shape == "gemini")
    )


def fleet(seed: int, size: int) -> list[Conversation]:
    """``size`` conversations over every shape; about half carry one planted breakage."""
    rng = random.Random(seed)
    found = []
    for number in range(size):
        shape = SHAPES[number % len(SHAPES)]
        planted = rng.choice(plantable(shape)) if rng.random() < 0.5 else ""
        found.append(conversation(rng, f"conv-{seed}-{number}", shape, planted))
    return found


# -- as recorded ------------------------------------------------------------------------------

START_NS = 1_760_000_000_000_000_000


def _times(conversations: list[Conversation]) -> list[tuple[int, Conversation, int]]:
    """(time, conversation, request index): the fleet's requests interleaved in time, each
    conversation's in order, one millisecond apart."""
    stamped = []
    for number, conv in enumerate(conversations):
        for index in range(len(conv.requests)):
            stamped.append((START_NS + (index * 1000 + number) * 1_000_000, conv, index))
    return sorted(stamped, key=lambda t: t[0])


def otlp_exports(conversations: list[Conversation], *, batch: int, seed: int) -> list[Any]:
    """The fleet as the Collector's exporters receive it: a span per request with
    ``gen_ai.input.messages``, keyed by ``gen_ai.conversation.id``, in export requests of
    ``batch`` spans (protobuf, encoded by the SDK's OTLP encoder) in shuffled order (exporters
    deliver out of order)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("fleet")
    for time_ns, conv, index in _times(conversations):
        span = tracer.start_span("chat gpt-4o", start_time=time_ns)
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.request.model", "gpt-4o")
        span.set_attribute("gen_ai.conversation.id", conv.key)
        span.set_attribute("gen_ai.input.messages", json.dumps(conv.requests[index]))
        span.end(end_time=time_ns + 500_000)
    spans = exporter.get_finished_spans()
    exports = [encode_spans(spans[i : i + batch]) for i in range(0, len(spans), batch)]
    random.Random(seed).shuffle(exports)
    provider.shutdown()
    return exports


def otlp_lines(conversations: list[Conversation], *, batch: int, seed: int) -> list[str]:
    """:func:`otlp_exports` as the Collector's file exporter writes them by default: a line
    of OTLP/JSON each."""
    from tests.otlp_files import collector_line

    return [collector_line(e) for e in otlp_exports(conversations, batch=batch, seed=seed)]


def _body(shape: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A request body of the shape's API, the system prompt where that API puts it."""
    system = messages[0]["content"] if messages and messages[0].get("role") == "system" else None
    rest = messages[1:] if system is not None else messages
    if shape == "openai":
        return {"model": "gpt-4o", "messages": messages}
    if shape == "responses":
        return {"model": "gpt-4o", "input": rest, **({"instructions": system} if system else {})}
    if shape == "gemini":
        body: dict[str, Any] = {"contents": rest}
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        return body
    if shape == "bedrock":
        return {"messages": rest, **({"system": [{"text": system}]} if system else {})}
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": rest,
        **({"system": system} if system else {}),
    }


def body_lines(conversations: list[Conversation], *, keyed: bool) -> list[str]:
    """The fleet as JSON Lines of request bodies, in time order, each wrapped with its
    timestamp; ``keyed``: OpenAI's ``metadata.conversation_id`` in every body."""
    lines = []
    for time_ns, conv, index in _times(conversations):
        body = _body(conv.shape, conv.requests[index])
        if keyed:
            body["metadata"] = {"conversation_id": conv.key}
        lines.append(json.dumps({"timestamp": time_ns, "body": body}))
    return lines


def one_request_lines(conversations: int) -> Iterator[str]:
    """``conversations`` one-shot calls as JSON Lines of Chat Completions bodies, one
    conversation a line (``metadata.conversation_id``, a system and a user message), in time
    order: a day of one-shot calls, whose audit must hold one conversation at a time."""
    for number in range(conversations):
        body = {
            "model": "gpt-4o",
            "metadata": {"conversation_id": f"one-shot-{number:07d}"},
            "messages": [
                {"role": "system", "content": "You answer questions about arithmetic."},
                {"role": "user", "content": f"What is {number} plus {number}?"},
            ],
        }
        yield json.dumps({"timestamp": START_NS + number * 1_000_000, "body": body})
