"""Which API a recorded request went to, told from what the recording itself says.

An instrumentation records a request in a form of its own (chat-like messages, GenAI parts),
and that form loses what the API's rules turn on: Logfire and OpenInference write each parallel
Responses ``function_call`` item as an assistant message of its own, OpenInference writes a
Gemini turn's ``functionResponse`` parts as one ``tool`` message each, with a name and no id.
Judged by the Chat Completions rules, both look broken; as the API received them, neither is.
So each request is told its API (:func:`tell`), and its messages are judged as that API
received them (:func:`ctxkit.conformance.judge.sent.as_sent`), as the API's raw request
bodies are.

A request whose API the recording does not say is judged by the rules every API shares, with
calls and results grouped as the loosest API groups them (a run of calls, then a run of
results answering all of them) and no provider's error quoted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxkit.conformance.judge.parts import family
from ctxkit.conformance.judge.sent import UNKNOWN

__all__ = ["API_NAMES", "UNKNOWN", "Told", "from_body", "tell"]

API_NAMES = {
    "openai": "OpenAI Chat Completions",
    "responses": "OpenAI Responses",
    "anthropic": "Anthropic Messages",
    "gemini": "Gemini generateContent",
    "bedrock": "Bedrock Converse",
    UNKNOWN: "the rules every API shares",
}


@dataclass(frozen=True, slots=True)
class Told:
    """A request's API (a rule set's shape, or :data:`UNKNOWN`) and what told it."""

    api: str
    how: str


_NATIVE = frozenset({"responses", "anthropic", "gemini", "bedrock"})

_PROVIDERS = {
    "anthropic": "anthropic",
    "gcp.gemini": "gemini",
    "gcp.vertex_ai": "gemini",
    "gcp.gen_ai": "gemini",
    "google": "gemini",
    "google_genai": "gemini",
    "gemini": "gemini",
    "vertexai": "gemini",
    "vertex_ai": "gemini",
    "aws.bedrock": "bedrock",
    "aws": "bedrock",
    "bedrock": "bedrock",
    "amazon-bedrock": "bedrock",
}
"""Providers with one API for messages."""

_OPENAI = frozenset({"openai", "azure.ai.openai", "azure", "azure_openai"})

_AI_SDK = {
    "openai.responses": "responses",
    "azure.responses": "responses",
    "openai.chat": "openai",
    "azure.chat": "openai",
    "anthropic.messages": "anthropic",
    "google.generative-ai": "gemini",
    "google.vertex.chat": "gemini",
    "amazon-bedrock": "bedrock",
}
"""The AI SDK's ``ai.model.provider`` values (``provider.api``)."""

_SPAN_NAMES = (
    ("Responses API", "responses"),
    ("openai.response", "responses"),
    ("Chat Completion", "openai"),
    ("openai.chat", "openai"),
    ("anthropic.chat", "anthropic"),
    ("Message with", "anthropic"),
)
"""Span names that say the API (Logfire's message templates, OpenLLMetry's span names)."""

_RECORDED_BODIES = ("input.value", "request_data")


def from_body(body: Mapping[str, Any]) -> str:
    """The API of a request body, by its own keys: ``input`` (Responses), ``contents``
    (Gemini), ``messages`` with a top-level ``system``, ``anthropic_version`` or Anthropic
    blocks (Anthropic), with Bedrock blocks or ``inferenceConfig`` (Bedrock), else Chat
    Completions. :data:`UNKNOWN` when it has none of them."""
    if "input" in body:
        return "responses"
    if isinstance(body.get("contents"), list):
        return "gemini"
    messages = body.get("messages")
    if not isinstance(messages, list):
        return UNKNOWN
    shapes = {family(m) for m in messages if isinstance(m, Mapping)}
    if "bedrock" in shapes or "inferenceConfig" in body:
        return "bedrock"
    if "anthropic" in shapes or "anthropic_version" in body:
        return "anthropic"
    if "system" in body and not any(
        isinstance(m, Mapping) and m.get("role") in ("system", "developer", "tool")
        for m in messages
    ):
        return "anthropic"
    return "openai"


def _recorded_body(attributes: Mapping[str, Any]) -> tuple[str, str]:
    """The API of the request body an instrumentation recorded beside the messages, by its
    keys; or of the bare list of input items OpenInference records for the Agents SDK, when
    one of them is a Responses item."""
    for name in _RECORDED_BODIES:
        value = attributes.get(name)
        if isinstance(value, str) and value[:1] in ("{", "["):
            try:
                value = json.loads(value)
            except ValueError:
                continue
        if isinstance(value, Mapping):
            api = from_body(value)
            if api:
                return api, f"the request body recorded in {name}"
        elif isinstance(value, list) and any(
            isinstance(item, Mapping) and family(item) == "responses" for item in value
        ):
            return "responses", f"the Responses items recorded in {name}"
    return UNKNOWN, ""


def tell(name: str, attributes: Mapping[str, Any], messages: Sequence[Any]) -> Told:
    """The API of a recorded model call, from its span (or log record) name, its attributes
    and the messages read from it, strongest first: the messages' own shape (Responses items,
    Anthropic or Bedrock blocks, Gemini parts); the AI SDK's ``ai.model.provider``; a request
    body recorded beside the messages (OpenInference ``input.value``, Logfire
    ``request_data``); the span's name (Logfire's ``Responses API with ...``, OpenLLMetry's
    ``openai.response``); the provider, where it has one API, or OpenAI with operation
    ``chat``."""
    shapes = {family(m) for m in messages if isinstance(m, Mapping)} & _NATIVE
    if len(shapes) == 1:
        (api,) = shapes
        return Told(api, f"told by its messages, which are {API_NAMES[api]} items")
    sdk = attributes.get("ai.model.provider")
    if isinstance(sdk, str):
        api = _AI_SDK.get(sdk) or _AI_SDK.get(sdk.partition(".")[0], UNKNOWN)
        if api:
            return Told(api, f"told by ai.model.provider {sdk}")
    api, what = _recorded_body(attributes)
    if api:
        return Told(api, f"told by {what}")
    for prefix, api in _SPAN_NAMES:
        if name.startswith(prefix):
            return Told(api, f"told by the span name {name!r}")
    for field in ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"):
        provider = attributes.get(field)
        if not isinstance(provider, str):
            continue
        provider = provider.lower()
        if provider in _PROVIDERS:
            return Told(_PROVIDERS[provider], f"told by {field} {provider}")
        if provider in _OPENAI and attributes.get("gen_ai.operation.name") == "chat":
            return Told("openai", f"told by {field} {provider} and gen_ai.operation.name chat")
    return Told(UNKNOWN, "the recording names no API")
