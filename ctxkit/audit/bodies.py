"""Requests out of raw request bodies, one JSON object per line, as a proxy or an SDK hook logs
them: OpenAI Chat Completions (``messages``), OpenAI Responses (``input``, ``instructions``,
``previous_response_id``), Anthropic Messages (``messages`` with a top-level ``system``), Gemini
``generateContent`` (``contents``, ``systemInstruction``) and Bedrock Converse (``messages``
of keyed blocks, ``system`` as a list).

A line is the body itself, or an object that holds it under ``body`` or ``request`` with
optional ``timestamp`` (seconds, milliseconds or nanoseconds since the epoch, or ISO 8601),
``usage`` or ``response.usage``, and ``conversation_id``. Without a timestamp, line order is
time order. The system prompt, wherever the API puts it, becomes the first message in the
chat form (``{"role": "system", "content": ...}``), which every shape takes beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ctxkit.audit.apis import from_body
from ctxkit.audit.request import Request, Usage

__all__ = ["NotABody", "body_messages", "is_body", "is_body_line", "request_of"]


class NotABody(ValueError):
    """A JSON object that is not a request body of a known API."""


def _body(line: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in ("body", "request"):
        inner = line.get(key)
        if isinstance(inner, Mapping) and is_body(inner):
            return inner
    return line


def is_body(data: Any) -> bool:
    """Whether ``data`` looks like a request body of one of the known APIs."""
    return isinstance(data, Mapping) and (
        isinstance(data.get("messages"), list)
        or isinstance(data.get("contents"), list)
        or "input" in data
    )


def is_body_line(data: Any) -> bool:
    """Whether a line holds a request body, itself or wrapped (``body`` / ``request``)."""
    return isinstance(data, Mapping) and is_body(_body(data))


def _time_ns(value: Any, line_number: int) -> int:
    if isinstance(value, bool) or value is None:
        return line_number
    if isinstance(value, int | float):
        if value > 1e17:
            return int(value)  # nanoseconds
        if value > 1e11:
            return int(value * 1_000_000)  # milliseconds
        return int(value * 1_000_000_000)
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1e9)
        except ValueError:
            raise NotABody(f"timestamp {value!r} is neither a number nor ISO 8601") from None
    raise NotABody(f"timestamp {value!r} is neither a number nor ISO 8601")


def _usage(line: Mapping[str, Any]) -> Usage | None:
    usage = line.get("usage")
    if not isinstance(usage, Mapping):
        response = line.get("response")
        usage = response.get("usage") if isinstance(response, Mapping) else None
    if not isinstance(usage, Mapping):
        return None
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    if cached is None:
        cached = usage.get("cache_read_input_tokens", usage.get("cachedContentTokenCount"))
    found = Usage(
        usage.get("prompt_tokens", usage.get("input_tokens", usage.get("promptTokenCount"))),
        cached,
        usage.get(
            "completion_tokens", usage.get("output_tokens", usage.get("candidatesTokenCount"))
        ),
    )
    return None if found == Usage() else found


def _system_text(system: Any) -> Any:
    """A top-level system prompt (text, or text blocks of any shape) as chat-form content."""
    if isinstance(system, str):
        return system
    if isinstance(system, Mapping):  # Gemini: {"parts": [{"text": ...}]}
        system = system.get("parts")
    if isinstance(system, list):
        texts = [b.get("text") for b in system if isinstance(b, Mapping)]
        if all(isinstance(t, str) for t in texts):
            return "\n".join(texts)
    raise NotABody("the system prompt is neither text nor a list of text blocks")


def body_messages(body: Mapping[str, Any]) -> tuple[list[Any], str, str]:
    """The body's messages (system prompt first), its API, and why it is partial."""
    if isinstance(body.get("contents"), list):
        system = body.get("systemInstruction", body.get("system_instruction"))
        head = [{"role": "system", "content": _system_text(system)}] if system else []
        return head + list(body["contents"]), "gemini", ""
    if "input" in body:
        items = body["input"]
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        if not isinstance(items, list):
            raise NotABody("input is neither text nor a list of items")
        head = (
            [{"role": "system", "content": body["instructions"]}]
            if isinstance(body.get("instructions"), str) and body["instructions"]
            else []
        )
        partial = (
            f"it continues response {body['previous_response_id']} (previous_response_id): "
            "the items before it are on the provider's side"
            if body.get("previous_response_id")
            else ""
        )
        return head + list(items), "responses", partial
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise NotABody("no messages, input or contents")
    system = body.get("system")
    head = [{"role": "system", "content": _system_text(system)}] if system else []
    return head + list(messages), from_body(body), ""


def request_of(line: Mapping[str, Any], where: str, line_number: int) -> Request:
    """One line's request. Raises :class:`NotABody` naming what is wrong."""
    if not isinstance(line, Mapping):
        raise NotABody("not a JSON object")
    body = _body(line)
    if not is_body(body):
        raise NotABody("not a request body: no messages, input or contents")
    messages, api, partial = body_messages(body)
    metadata = body.get("metadata")
    key = metadata.get("conversation_id") if isinstance(metadata, Mapping) else None
    key = key or line.get("conversation_id")
    stamp = line.get("timestamp", line.get("time")) if body is not line else None
    return Request(
        messages=[m for m in messages],
        time_ns=_time_ns(stamp, line_number),
        where=where,
        model=str(body.get("model") or ""),
        provider=api,
        key=str(key) if key else "",
        keyed_by="metadata.conversation_id" if key else "",
        usage=_usage(line) if body is not line else None,
        partial=partial,
        source=f"{api} request body",
        api=api,
        api_told="told by the request body's own keys",
    )
