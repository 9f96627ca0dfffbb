"""Gemini ``generateContent`` contents (rules: ``conformance/rules/gemini.json``).

A content is ``{"role": "user" | "model", "parts": [...]}``. A ``model`` turn's
``functionCall`` parts are answered by the next turn's ``functionResponse`` parts, as many
responses as calls, matched by ``id`` where the call has one, else by position and name (the
k-th response answers the k-th call, with the same name). Parts are read in the REST API's
camelCase and in the Python SDK's snake_case alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ctxkit.shapes.base import (
    InvalidMessage,
    MessageInfo,
    describe,
    no_duplicates,
    pairing_key,
    require_role,
    require_str,
)

__all__ = ["ROLES", "call_of", "claims", "read", "response_of", "texts"]

ROLES = frozenset({"user", "model"})


def claims(message: Mapping[str, Any]) -> bool:
    """A Gemini content: ``parts`` whose parts carry no ``type`` (GenAI parts do)."""
    parts = message.get("parts")
    if not isinstance(parts, list):
        return False
    if message.get("role") == "model":
        return True
    return not any(isinstance(part, Mapping) and "type" in part for part in parts)


def call_of(part: Mapping[str, Any]) -> Any:
    return part.get("functionCall", part.get("function_call"))


def response_of(part: Mapping[str, Any]) -> Any:
    return part.get("functionResponse", part.get("function_response"))


def read(content: Mapping[str, Any], index: int | None, size: int) -> MessageInfo:
    role = content.get("role", "user")
    require_role(role, ROLES, " for a Gemini content", index=index)
    calls: list[str] = []
    results: list[str] = []
    positional = False
    has_text = False
    error = False
    for position, part in enumerate(content["parts"]):
        where = f"parts[{position}]"
        if not isinstance(part, Mapping):
            raise InvalidMessage(
                f"a part must be a dict, got {describe(part)}", index=index, field=where
            )
        call, response = call_of(part), response_of(part)
        if call is not None:
            if role != "model":
                raise InvalidMessage(
                    "functionCall parts belong in model turns", index=index, field=where
                )
            body = _body(call, "functionCall", index=index, field=where)
            name, fixed = pairing_key(body, len(calls))
            calls.append(name)
            positional = positional or fixed
        elif response is not None:
            if role != "user":
                raise InvalidMessage(
                    "functionResponse parts belong in user turns", index=index, field=where
                )
            body = _body(response, "functionResponse", index=index, field=where)
            name, fixed = pairing_key(body, len(results))
            results.append(name)
            positional = positional or fixed
            answer = body.get("response")
            error = error or (isinstance(answer, Mapping) and "error" in answer)
        elif "text" in part:
            text = require_str(part["text"], "a text part", index=index, field=f"{where}.text")
            if not part.get("thought"):
                has_text = has_text or bool(text.strip())
        else:
            has_text = True  # inline data, files, code: the user's own material
    no_duplicates(calls, index=index, field="parts")
    no_duplicates(results, index=index, field="parts")
    return MessageInfo(
        role="assistant" if role == "model" else "user",
        call_ids=tuple(calls),
        result_ids=tuple(results),
        shape="gemini" if calls or results else None,
        user_turn=role == "user" and has_text,
        error_result=error,
        size=size,
        form="gemini",
        positional=positional,
    )


def _body(value: Any, what: str, *, index: int | None, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidMessage(
            f"a {what} must be a dict, got {describe(value)}", index=index, field=field
        )
    require_str(value.get("name"), f"a {what}", index=index, field=f"{field}.{what}.name")
    return value


def texts(content: Mapping[str, Any]) -> Iterable[str]:
    """The texts of a content's parts, and its function responses as JSON-ish text."""
    for part in content.get("parts") or ():
        if not isinstance(part, Mapping):
            continue
        if isinstance(part.get("text"), str):
            yield part["text"]
        response = response_of(part)
        if isinstance(response, Mapping) and response.get("response") is not None:
            yield str(response["response"])
