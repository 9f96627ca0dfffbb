"""A view as the API it is sent to receives it.

Instrumentations record requests in forms of their own (chat-like messages, GenAI parts), and
those forms lose what an API's rules turn on: Logfire and OpenInference write each parallel
Responses ``function_call`` item as an assistant message of its own, OpenInference writes a
Gemini turn's ``functionResponse`` parts as one ``tool`` message each, with a name and no id.
Judged by the Chat Completions rules, both look broken; as the API received them, neither is.
:func:`as_sent` writes such messages as the API's own items, keeping for each the position of
the message it came from, so a verdict still names what was recorded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxkit.conformance.judge.parts import family

__all__ = ["UNKNOWN", "as_sent"]

UNKNOWN = ""
"""The API of a request whose recording does not say: judged by the rules every API shares."""


@dataclass(slots=True)
class _Generic:
    """A chat-like or GenAI-parts message, read: what every API can say."""

    role: str
    texts: list[str]
    calls: list[tuple[str, str, Any]]
    """(id, name, arguments)"""
    results: list[tuple[str, str, Any]]
    """(id, name, output)"""


def _list(value: Any) -> list[Any]:
    """A recorded list, or none where the recording holds something else there."""
    return value if isinstance(value, list) else []


def _tool(call_id: Any, name: Any, value: Any) -> tuple[str, str, Any]:
    """(id, name, value) of a call or a result; an absent id (None, "", "None", as recorders
    write it) is empty."""
    return ("" if call_id in (None, "", "None") else str(call_id), str(name or ""), value)


def _read(message: Mapping[str, Any]) -> _Generic | None:
    """A chat-form or GenAI-parts message as what every API can say; None for a message in
    an API's own shape (left as it is)."""
    shape = family(message)
    if shape not in ("openai", "genai") or "type" in message:
        return None
    role = str(message.get("role") or "user")
    texts: list[str] = []
    calls: list[tuple[str, str, Any]] = []
    results: list[tuple[str, str, Any]] = []
    if shape == "genai":
        for part in _list(message.get("parts")):
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind == "tool_call":
                calls.append(_tool(part.get("id"), part.get("name"), part.get("arguments")))
            elif kind == "tool_call_response":
                results.append(_tool(part.get("id"), part.get("name"), part.get("response")))
            elif isinstance(part.get("content"), str):
                texts.append(part["content"])
        return _Generic(role, texts, calls, results)
    content = message.get("content")
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        texts.extend(
            str(b.get("text", "")) for b in content if isinstance(b, Mapping) and "text" in b
        )
    for call in _list(message.get("tool_calls")):
        if isinstance(call, Mapping):
            function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
            calls.append(_tool(call.get("id"), function.get("name"), function.get("arguments")))
    if role == "tool":
        results.append(_tool(message.get("tool_call_id"), message.get("name"), "\n".join(texts)))
        texts = []
    return _Generic(role, texts, calls, results)


def as_sent(messages: list[Any], api: str) -> tuple[list[Any], list[int] | None]:
    """The messages as ``api`` received them, and for each the position of the recorded
    message it came from (None: the messages are as recorded).

    Chat-like and GenAI-parts messages become Responses items for Responses and Gemini turns
    (a run of results one turn) for Gemini; for an unknown API, the looser of those that fits
    (Gemini's when a call or result has no id). Messages already in an API's own shape, and
    those of the other APIs, whose recorded form groups calls and results as they do, are
    left as they are."""
    if api not in ("responses", "gemini", UNKNOWN) or not _regrouping_matters(messages):
        return messages, None
    read = [_read(m) if isinstance(m, Mapping) else None for m in messages]
    if not any(g is not None and (g.calls or g.results) for g in read):
        return messages, None
    if api == UNKNOWN:
        ids = [i for g in read if g is not None for i, _, _ in (*g.calls, *g.results)]
        api = "responses" if all(ids) else "gemini"
    sent: list[Any] = []
    positions: list[int] = []
    answering: dict[str, Any] | None = None
    """Gemini: the turn of results being written, which the results right after join."""
    named = _Named()
    for position, (message, generic) in enumerate(zip(messages, read, strict=True)):
        if generic is not None and api == "gemini":
            named.fill(generic, answering is not None)
        if generic is None or not (generic.calls or generic.results):
            written = [message]
        elif api == "responses":
            written = _responses(generic)
        elif answering is not None and not generic.calls and not any(generic.texts):
            answering["parts"].extend(_gemini(generic)["parts"])
            continue
        else:
            written = [_gemini(generic)]
        results_only = generic is not None and generic.results and not generic.calls
        answering = written[0] if api == "gemini" and results_only else None
        sent.extend(written)
        positions.extend([position] * len(written))
    return sent, positions


class _Named:
    """Gemini pairs a response with the call at its place in the turn before: a response
    recorded with neither id nor name (OpenLLMetry's google-genai) takes the name of the call
    at its place."""

    def __init__(self) -> None:
        self.called: list[str] = []
        self.answered = 0

    def fill(self, generic: _Generic, continuing: bool) -> None:
        if generic.calls:
            self.called = [name for _, name, _ in generic.calls]
            self.answered = 0
            return
        if not continuing:
            self.answered = 0
        for place, (call_id, name, output) in enumerate(generic.results):
            at = self.answered + place
            if not call_id and not name and at < len(self.called):
                generic.results[place] = (call_id, self.called[at], output)
        self.answered += len(generic.results)


_ABSENT = (None, "", "None")


def _regrouping_matters(messages: list[Any]) -> bool:
    """Whether writing the messages as Responses items or Gemini turns can change a verdict
    of the generic reading: a call or result without an id (paired by name and position), or
    calls in messages of their own one after another (parallel calls as items). Read lean:
    this runs on every request."""
    calling_before = False
    for message in messages:
        if type(message) is not dict or "type" in message:
            calling_before = False
            continue
        ids: list[Any] = []
        calling = False
        tool_calls = _list(message.get("tool_calls"))
        if tool_calls:
            calling = True
            ids = [c.get("id") if type(c) is dict else None for c in tool_calls]
        elif message.get("role") == "tool" and "parts" not in message:
            ids = [message.get("tool_call_id")]
        else:
            for part in _list(message.get("parts")):
                if type(part) is dict:
                    kind = part.get("type")
                    if kind == "tool_call" or kind == "tool_call_response":
                        ids.append(part.get("id"))
                        calling = calling or kind == "tool_call"
                    elif "functionCall" in part or "functionResponse" in part:
                        return True  # Gemini's own parts among generic messages
        if calling and calling_before:
            return True
        if any(i in _ABSENT for i in ids):
            return True
        calling_before = calling
    return False


def _responses(generic: _Generic) -> list[Any]:
    items: list[Any] = []
    if any(generic.texts):
        items.append({"role": generic.role, "content": "\n".join(generic.texts)})
    items.extend(
        {"type": "function_call", "call_id": call_id, "name": name, "arguments": _text(arguments)}
        for call_id, name, arguments in generic.calls
    )
    items.extend(
        {"type": "function_call_output", "call_id": call_id, "output": _text(output)}
        for call_id, _, output in generic.results
    )
    return items


def _gemini(generic: _Generic) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"text": text} for text in generic.texts if text]
    parts.extend(
        {"functionCall": _body(call_id, name, "args", arguments)}
        for call_id, name, arguments in generic.calls
    )
    parts.extend(
        {"functionResponse": _body(call_id, name, "response", output)}
        for call_id, name, output in generic.results
    )
    return {"role": "model" if generic.calls else "user", "parts": parts}


def _body(call_id: str, name: str, field: str, value: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, field: value}
    if call_id:
        body["id"] = call_id
    return body


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
