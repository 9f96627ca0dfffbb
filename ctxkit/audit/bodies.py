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
    if value is None:
        return line_number
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value != value or value in (float("inf"), float("-inf")) or value < 0:
            raise NotABody(f"timestamp {value!r} is no time")
        if value > 1e17:
            return int(value)  # nanoseconds
        if value > 1e11:
            return int(value * 1_000_000)  # milliseconds
        return int(value * 1_000_000_000)
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1e9)
        except (ValueError, OverflowError):
            raise NotABody(f"timestamp {value!r} is neither a number nor ISO 8601") from None
    raise NotABody(f"timestamp is {_a(value)}, neither a number nor ISO 8601 text: {_shown(value)}")


def _a(value: Any) -> str:
    """A JSON value's type, in words: ``a list``, ``an object``."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Mapping):
        return "an object"
    return {
        str: "a string",
        list: "a list",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    """A short, printable form of a value a reason quotes."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_USAGE_FIELDS = (
    ("prompt_tokens", "input_tokens", "promptTokenCount"),
    ("cached_tokens", "cache_read_input_tokens", "cachedContentTokenCount"),
    ("completion_tokens", "output_tokens", "candidatesTokenCount"),
)
"""Usage's three counts, by the names each API gives them (cached tokens inside
``prompt_tokens_details`` / ``input_tokens_details`` too)."""


def _usage(line: Mapping[str, Any]) -> Usage | None:
    """The provider's reported usage, beside the body; a count that is not a number of
    tokens skips the line (:class:`NotABody` naming it), as any field of the wrong type."""
    usage, at = line.get("usage"), "usage"
    response = line.get("response")
    if usage is None and isinstance(response, Mapping):
        usage, at = response.get("usage"), "response.usage"
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        raise NotABody(f"{at} is {_a(usage)}, not an object of token counts")
    details_at = next(
        (name for name in ("prompt_tokens_details", "input_tokens_details") if usage.get(name)),
        None,
    )
    details = usage.get(details_at) if details_at else None
    if details is not None and not isinstance(details, Mapping):
        raise NotABody(f"{at}.{details_at} is {_a(details)}, not an object of token counts")
    counts = []
    for names in _USAGE_FIELDS:
        found = None
        for name in names:
            inside = details if name == "cached_tokens" else usage
            if inside is not None and inside.get(name) is not None:
                where = f"{at}.{details_at}.{name}" if inside is details else f"{at}.{name}"
                found = _tokens(inside[name], where)
                break
        counts.append(found)
    found_usage = Usage(*counts)
    return None if found_usage == Usage() else found_usage


def _tokens(value: Any, where: str) -> int:
    """A count of tokens (a whole number, as JSON may write it: ``12`` or ``12.0``)."""
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and value == value
        and 0 <= value < 1e15
        and value == int(value)
    ):
        return int(value)
    raise NotABody(f"{where} is {_a(value)}, not a number of tokens: {_shown(value)}")


def _instructions(value: Any) -> list[Any]:
    """A Responses request's ``instructions`` as the system prompt it is: a string, or a list
    of input items (each kept as it is)."""
    if isinstance(value, str) and value:
        return [{"role": "system", "content": value}]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, Mapping)]
    return []


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
        head = _instructions(body.get("instructions"))
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
    keyed_by = "metadata.conversation_id"
    if not key:
        key, keyed_by = line.get("conversation_id"), "conversation_id"
    if key is not None and (isinstance(key, bool) or not isinstance(key, str | int)):
        raise NotABody(f"conversation_id is {_a(key)}, not text: {_shown(key)}")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise NotABody(f"model is {_a(model)}, not a model's name: {_shown(model)}")
    stamp = line.get("timestamp", line.get("time")) if body is not line else None
    return Request(
        messages=[m for m in messages],
        time_ns=_time_ns(stamp, line_number),
        where=where,
        model=model or "",
        provider=api,
        key=str(key) if key else "",
        keyed_by=keyed_by if key else "",
        usage=_usage(line) if body is not line else None,
        partial=partial,
        source=f"{api} request body",
        api=api,
        api_told="told by the request body's own keys",
    )
