"""Requests out of GenAI telemetry: the input messages of a model call, in each form the
instrumentations in use record them.

* ``gen_ai.input.messages`` (structured parts, JSON text or OTLP values) with
  ``gen_ai.system_instructions``, on the span, on its
  ``gen_ai.client.inference.operation.details`` event, or on a log record of that name
  (OpenTelemetry's GenAI conventions; openai-v2, OpenLLMetry 0.4x+, pydantic-ai, strands);
* ``gen_ai.prompt.N.role`` / ``.content`` / ``.tool_calls.M.*`` / ``.tool_call_id``
  (OpenLLMetry before the structured form);
* ``llm.input_messages.N.message.*`` (OpenInference);
* ``ai.prompt.messages`` (the Vercel AI SDK's own spans, :mod:`ctxkit.audit.ai_sdk`);
* one log record (or span event) per message, ``gen_ai.system.message``,
  ``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message``, with the
  message in its body (the conventions before ``gen_ai.input.messages``).

A span of a model call that carries none of them is not a request: if another span of the
same call does (an SDK's own span beside an instrumentation's), it is that one's twin; else the
instrumentation was told not to record content, and :func:`content_hint` says how to turn it on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from ctxkit.audit import ai_sdk
from ctxkit.audit.apis import tell
from ctxkit.audit.bodies import NotABody, body_messages, is_body
from ctxkit.audit.otlp import Record
from ctxkit.audit.request import Problem, Request, Usage, parse_json

__all__ = ["CONTEXT_KINDS", "Twins", "content_hint", "model_call", "requests_of"]

DETAILS_EVENT = "gen_ai.client.inference.operation.details"
MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CALL_OPERATIONS = frozenset({"chat", "generate_content", "text_completion", "responses"})

_OFFICIAL = (
    "set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY and "
    "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental where the agent runs"
)
_HINTS = (
    ("opentelemetry.instrumentation.openai_v2", _OFFICIAL),
    ("opentelemetry.util.genai", _OFFICIAL),
    (
        "com.anthropic.sdk",
        "the SDK's own spans never carry messages: add an instrumentation that records them "
        "(OpenLLMetry's opentelemetry-instrumentation-anthropic, TRACELOOP_TRACE_CONTENT=true)",
    ),
    (
        "opentelemetry.instrumentation.",
        "set TRACELOOP_TRACE_CONTENT=true where the agent runs (OpenLLMetry)",
    ),
    (
        "openinference.instrumentation.",
        "set OPENINFERENCE_HIDE_INPUTS=false and OPENINFERENCE_HIDE_INPUT_MESSAGES=false "
        "where the agent runs",
    ),
    ("pydantic-ai", "instrument the agent with InstrumentationSettings(include_content=True)"),
    (
        "strands",
        "set OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental where the agent runs",
    ),
)


def content_hint(scope: str) -> str:
    """What makes the instrumentation of this scope record message content (or, for an SDK's
    own spans, which never carry it, what to add beside them)."""
    if scope == ai_sdk.SCOPE:
        return ai_sdk.CONTENT_HINT
    for prefix, hint in _HINTS:
        if scope.startswith(prefix):
            return hint
    return (
        "turn on its instrumentation's setting to record message content (OpenTelemetry's "
        "GenAI instrumentations: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY)"
    )


def _json_value(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return parse_json(value)
        except ValueError:
            return None
    return value


def _structured(attributes: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """``gen_ai.input.messages`` with ``gen_ai.system_instructions`` first, if present."""
    if "gen_ai.input.messages" not in attributes:
        return None
    messages = _json_value(attributes["gen_ai.input.messages"])
    if not isinstance(messages, list):
        raise ValueError("gen_ai.input.messages is not a JSON list of messages")
    messages = [_ids_in_parts(m) if isinstance(m, dict) else m for m in messages]
    system = _json_value(attributes.get("gen_ai.system_instructions"))
    if isinstance(system, list) and system:
        return [{"role": "system", "parts": system}, *messages]
    return messages


def _ids_in_parts(message: dict[str, Any]) -> dict[str, Any]:
    """A message with parts whose calls or result id sit beside them, in Chat Completions'
    keys (LiteLLM's OTel callback: ``"parts": [], "tool_calls": [...]``, and a tool message's
    text part with its ``tool_call_id``), with them as the parts the conventions define."""
    calls, answered = message.get("tool_calls"), message.get("tool_call_id")
    if not (calls or answered) or not isinstance(message.get("parts"), list):
        return message
    calls = calls if isinstance(calls, list) else []
    parts = [p for p in message["parts"] if isinstance(p, Mapping)]
    if answered:
        text = "".join(str(p.get("content", "")) for p in parts if p.get("type") == "text")
        parts = [{"type": "tool_call_response", "id": str(answered), "response": text}]
    for call in calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            parts.append(
                {
                    "type": "tool_call",
                    "id": str(call.get("id", "")),
                    "name": str(function.get("name", "")),
                    "arguments": function.get("arguments"),
                }
            )
    rest = {k: v for k, v in message.items() if k not in ("tool_calls", "tool_call_id")}
    return {**rest, "parts": parts}


def _tree(attributes: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Flattened attributes under ``prefix`` as nested dicts (``a.0.b`` -> {"a": {"0": ...}})."""
    tree: dict[str, Any] = {}
    for key, value in attributes.items():
        if not key.startswith(prefix):
            continue
        node = tree
        *path, last = key[len(prefix) :].split(".")
        for step in path:
            node = node.setdefault(step, {})
            if not isinstance(node, dict):
                break
        else:
            node[last] = value
    return tree


def _indexed(node: Any) -> list[Any]:
    """A dict keyed by list positions (``{"0": .., "1": ..}``) as a list in index order."""
    if not isinstance(node, dict):
        return []
    return [node[k] for k in sorted((k for k in node if k.isdigit()), key=int)]


def _content(value: Any) -> Any:
    """A recorded content: text, or content blocks recorded as JSON text."""
    if isinstance(value, str) and value.startswith("[{"):
        blocks = _json_value(value)
        if isinstance(blocks, list) and all(isinstance(b, dict) and "type" in b for b in blocks):
            return blocks
    return value


def _chat_message(
    role: Any, content: Any, calls: list[dict[str, Any]], call_id: Any, name: Any = None
) -> dict:
    message: dict[str, Any] = {"role": str(role or "user")}
    message["content"] = _content(content) if content is not None else ("" if not calls else None)
    if calls:
        message["tool_calls"] = calls
    if call_id is not None:
        message["tool_call_id"] = str(call_id)
    if name is not None and message["role"] == "tool":
        message["name"] = str(name)  # Gemini answers a call by its name where it has no id
    return message


def _openllmetry(
    attributes: Mapping[str, Any], prefix: str = "gen_ai.prompt."
) -> list[dict[str, Any]] | None:
    entries = _indexed(_tree(attributes, prefix))
    if not entries:
        return None
    messages = []
    for entry in entries:
        calls = [
            {
                "id": str(call.get("id", "")),
                "type": "function",
                "function": {"name": call.get("name", ""), "arguments": call.get("arguments", "")},
            }
            for call in _indexed(entry.get("tool_calls"))
        ]
        messages.append(
            _chat_message(entry.get("role"), entry.get("content"), calls, entry.get("tool_call_id"))
        )
    return messages


def _openinference(
    attributes: Mapping[str, Any], prefix: str = "llm.input_messages."
) -> list[dict[str, Any]] | None:
    entries = _indexed(_tree(attributes, prefix))
    if not entries:
        return None
    messages = []
    for entry in entries:
        body = entry.get("message", {})
        calls = []
        for call in _indexed(body.get("tool_calls")):
            call = call.get("tool_call", {})
            function = call.get("function", {})
            calls.append(
                {
                    "id": str(call.get("id", "")),
                    "type": "function",
                    "function": {
                        "name": function.get("name", ""),
                        "arguments": function.get("arguments", ""),
                    },
                }
            )
        content = body.get("content")
        if content is None and "contents" in body:
            content = [
                {"type": "text", "text": part.get("message_content", {}).get("text", "")}
                for part in _indexed(body["contents"])
            ]
        messages.append(
            _chat_message(
                body.get("role"), content, calls, body.get("tool_call_id"), body.get("name")
            )
        )
    return messages


def _outputs(attributes: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The model's answer, where the recording keeps it: ``gen_ai.output.messages``,
    OpenLLMetry's ``gen_ai.completion.N.*``, OpenInference's ``llm.output_messages.N.*``. None
    where it is not kept, or not readable: it is what ``ctxkit replay`` scores references
    against, never what the audit judges, so a reading of it that fails costs nothing else."""
    try:
        value = _json_value(attributes.get("gen_ai.output.messages"))
        if isinstance(value, list):
            return [m for m in value if isinstance(m, dict)] or None
        return _openllmetry(attributes, "gen_ai.completion.") or _openinference(
            attributes, "llm.output_messages."
        )
    except (ValueError, TypeError, AttributeError):
        return None


def _openinference_body(value: Any) -> list[Any] | None:
    """The messages of the request body OpenInference records in ``input.value`` beside the
    flattened ``llm.input_messages``, which lose what the body has (a tool message's
    ``tool_call_id``, for LiteLLM): a body of messages, input items or contents, or a bare list
    of input items (the Agents SDK). None when it is something else (LangChain's serialized
    objects)."""
    value = _json_value(value)
    if isinstance(value, list):
        value = {"input": value}
    if not isinstance(value, Mapping) or not is_body(value):
        return None
    try:
        messages, _, _ = body_messages(value)
    except NotABody:
        return None
    if not all(isinstance(m, Mapping) and ("role" in m or "type" in m) for m in messages):
        return None
    return messages


_SYSTEM_ROLES = ("system", "developer")


def _with_instructions(flattened: list[Any], body: list[Any]) -> list[Any]:
    """The recorded body, with the system prompt the flattened messages begin with where the
    body has none: the Agents SDK's OpenInference spans keep the request's items in
    ``input.value`` and its ``instructions`` only as ``llm.input_messages.0``, and those are
    the request's system prompt (their loss mid-conversation is a finding)."""
    head = []
    for message in flattened:
        if not (isinstance(message, Mapping) and message.get("role") in _SYSTEM_ROLES):
            break
        head.append(message)
    if not head or any(isinstance(m, Mapping) and m.get("role") in _SYSTEM_ROLES for m in body):
        return body
    return head + body


def _from_message_events(events: Iterable[tuple[str, Any]]) -> list[dict[str, Any]] | None:
    """Messages from per-message events: (event name, body) in recorded order."""
    messages = []
    for name, body in events:
        role = MESSAGE_EVENTS.get(name)
        if role is None:
            continue
        body = body if isinstance(body, Mapping) else {"content": body}
        calls = [dict(call) for call in body.get("tool_calls") or () if isinstance(call, Mapping)]
        for call in calls:
            call.setdefault("type", "function")
        messages.append(
            _chat_message(
                body.get("role", role),
                body.get("content"),
                calls,
                body.get("id") if role == "tool" else None,
            )
        )
    return messages or None


def _usage(attributes: Mapping[str, Any]) -> Usage | None:
    def first(*names: str) -> int | None:
        for name in names:
            value = attributes.get(name)
            if value is None:
                continue
            if (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and 0 <= value < 1e15  # not NaN, nor infinite
            ):
                return int(value)
            raise ValueError(f"{name} is {value!r}, not a number of tokens")
        return None

    usage = Usage(
        first("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"),
        first(
            "gen_ai.usage.cache_read.input_tokens",
            "gen_ai.usage.cache_read_input_tokens",
            "llm.token_count.prompt_details.cache_read",
        ),
        first(
            "gen_ai.usage.output_tokens",
            "gen_ai.usage.completion_tokens",
            "llm.token_count.completion",
        ),
    )
    return None if usage == Usage() else usage


CONTEXT_KINDS = {
    "gen_ai.operation.name": CALL_OPERATIONS,
    "openinference.span.kind": frozenset({"LLM"}),
    "traceloop.span.kind": frozenset(),
    "ai.operationId": ai_sdk.CALL_OPERATIONS,
}
"""Attributes that name what a span is, and the values that make it one call to a model: any
other value (``invoke_agent``, ``execute_tool``, OpenInference's ``AGENT`` and ``CHAIN``,
OpenLLMetry's workflow and task spans, the AI SDK's outer ``ai.generateText``) makes it the
context of calls, whatever messages it carries."""


def model_call(record: Record) -> bool | None:
    """Whether a record is one call to a model: only those are requests. An agent, workflow,
    chain or tool span records messages too (an agent's input, the history of its run), but
    counting it would add requests that were never sent and compare calls with it. True or
    False by the first attribute of :data:`CONTEXT_KINDS` it has (OpenLLMetry's model calls
    carry ``llm.request.type`` instead); None when it names none."""
    attributes = record.attributes
    for name, calls in CONTEXT_KINDS.items():
        value = attributes.get(name)
        if isinstance(value, str):
            return value in calls
    if attributes.get("llm.request.type") in ("chat", "completion"):
        return True
    return None


def _text(attributes: Mapping[str, Any], *names: str) -> str:
    """The first of ``names`` the record has, as text (an id may be recorded as a number).

    Raises ``ValueError`` for a value of another type (a list, a map, a boolean): the record
    is skipped, as any of the wrong type.
    """
    for name in names:
        value = attributes.get(name)
        if value is None or value == "":
            continue
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise ValueError(f"{name} is {value!r}, not text")
        return str(value)
    return ""


def _request(record: Record, messages: list[dict[str, Any]], source: str, where: str) -> Request:
    """A request of a record. Raises ``ValueError`` for a key or a model of the wrong type."""
    attributes = {**record.resource, **record.attributes}
    key, keyed_by = "", ""
    for rule in ("gen_ai.conversation.id", "session.id"):
        key = _text(attributes, rule)
        if key:
            keyed_by = rule
            break
    told = tell(record.name, attributes, messages)
    return Request(
        messages=messages,
        time_ns=record.time_ns,
        where=where,
        model=_text(attributes, "gen_ai.request.model", "llm.model_name", "gen_ai.response.model"),
        provider=_text(
            attributes, "gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"
        ),
        key=key,
        keyed_by=keyed_by,
        trace_id=record.trace_id,
        usage=_usage(record.attributes),
        source=source,
        api=told.api,
        api_told=told.how,
        output=_outputs(record.attributes),
    )


def _messages_of(
    record: Record, linked: list[Record]
) -> tuple[list[dict[str, Any]], str] | tuple[None, str]:
    """The record's input messages and the form they were in (None: it carries none)."""
    found = _structured(record.attributes)
    if found is not None:
        return found, "gen_ai.input.messages"
    for name, _, attributes in record.events:
        if name == DETAILS_EVENT and "gen_ai.input.messages" in attributes:
            return _structured(attributes) or [], f"{DETAILS_EVENT} event"
    for log in linked:
        if log.name == DETAILS_EVENT and "gen_ai.input.messages" in log.attributes:
            return _structured(log.attributes) or [], f"{DETAILS_EVENT} log"
    found = _openllmetry(record.attributes)
    if found is not None:
        return found, "gen_ai.prompt"
    found = _openinference(record.attributes)
    if found is not None:
        body = _openinference_body(record.attributes.get("input.value"))
        if body is not None:
            return _with_instructions(found, body), "input.value"
        return found, "llm.input_messages"
    if ai_sdk.PROMPT in record.attributes:
        return ai_sdk.chat_messages(_json_value(record.attributes[ai_sdk.PROMPT])), ai_sdk.PROMPT
    per_message = [(name, attributes) for name, _, attributes in record.events]
    found = _from_message_events(
        [(n, a.get("body", a)) for n, a in per_message]
        if any(n in MESSAGE_EVENTS for n, _ in per_message)
        else [(log.name, log.body) for log in linked]
    )
    if found is not None:
        return found, "gen_ai.*.message events"
    return None, ""


class Twins:
    """What marks a content-less span as the twin of a recorded call (an SDK's own span around
    an instrumentation's, or in a trace of its own): the same response id, or being its parent
    or child. Kept across the calls of one long read (a file read window by window, a live
    stream), the newest :attr:`KEPT` marks; a content-less span waits :attr:`WAIT` calls for
    its twin before it counts as a call recorded without its messages."""

    KEPT = 65_536
    WAIT = 2

    def __init__(self) -> None:
        self._marks: dict[tuple[str, str, str], None] = {}
        self._waiting: list[tuple[int, Record, str]] = []
        self._calls = 0

    def add(self, record: Record) -> None:
        """A span that recorded a call's messages."""
        response_id = record.attributes.get("gen_ai.response.id")
        if response_id:
            self._marks[("response", "", str(response_id))] = None
        self._marks[("span", record.trace_id, record.span_id)] = None
        self._marks[("parent", record.trace_id, record.parent_span_id)] = None
        while len(self._marks) > self.KEPT:
            del self._marks[next(iter(self._marks))]

    def _has_twin(self, record: Record) -> bool:
        response_id = record.attributes.get("gen_ai.response.id")
        return (
            ("response", "", str(response_id)) in self._marks
            or ("parent", record.trace_id, record.span_id) in self._marks
            or ("span", record.trace_id, record.parent_span_id) in self._marks
        )

    def unrecorded(self, silent: list[tuple[Record, str]], *, final: bool) -> list[Problem]:
        """Of the content-less model calls (these and those still waiting), the ones that
        are not an SDK's own span around a recorded call: no more waiting when ``final``."""
        self._calls += 1
        waiting = [*self._waiting, *((self._calls, r, at) for r, at in silent)]
        self._waiting = []
        problems = []
        for since, record, at in waiting:
            if self._has_twin(record):
                continue
            if final or self._calls - since >= self.WAIT:
                problems.append(
                    Problem(
                        at,
                        "a model call recorded without its input messages",
                        hint=content_hint(record.scope),
                    )
                )
            else:
                self._waiting.append((since, record, at))
        return problems


def requests_of(
    records: Iterable[tuple[Record, str]],
    twins: Twins | None = None,
    *,
    final: bool = True,
) -> tuple[list[Request], list[Problem]]:
    """The requests in a set of records (each with where it was read), and the problems.

    Log records join the span whose id they carry; a log record of a model call with no span
    in the input is a request of its own. ``twins`` carries what tells an SDK's content-less
    span from a call recorded without content across calls (one read of many windows); until
    ``final``, such a span may wait for its twin in the next call.
    """
    spans: list[tuple[Record, str]] = []
    logs_by_span: dict[str, list[Record]] = defaultdict(list)
    lone_logs: list[tuple[Record, str]] = []
    for record, where in records:
        if record.kind == "span":
            spans.append((record, where))
        elif record.span_id:
            logs_by_span[record.span_id].append(record)
            lone_logs.append((record, where))
        elif record.name == DETAILS_EVENT:
            lone_logs.append((record, where))
    twins = twins if twins is not None else Twins()
    requests: list[Request] = []
    problems: list[Problem] = []
    silent: list[tuple[Record, str]] = []
    span_ids = set()
    for record, where in spans:
        span_ids.add(record.span_id)
        linked = sorted(logs_by_span.get(record.span_id, ()), key=lambda r: r.time_ns)
        at = f"{where} span {record.span_id or '?'} ({record.name})"
        try:
            messages, source = _messages_of(record, linked)
            if messages is None:
                if model_call(record):
                    silent.append((record, at))
                continue
            if model_call(record) is False:
                continue  # an agent's or a workflow's span: the calls inside it are requests
            requests.append(_request(record, messages, source, at))
        except ValueError as exc:
            problems.append(Problem(at, str(exc)))
            continue
        twins.add(record)
    for record, where in lone_logs:
        if record.span_id in span_ids or record.name != DETAILS_EVENT:
            continue
        at = f"{where} log record ({record.name})"
        try:
            messages = _structured(record.attributes)
            if messages is not None:
                requests.append(_request(record, messages, f"{DETAILS_EVENT} log", at))
        except ValueError as exc:
            problems.append(Problem(at, str(exc)))
    problems.extend(twins.unrecorded(silent, final=final))
    return requests, problems
