"""What every reader yields: one request an agent sent to a model, and bad input it skipped."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["KEY_RULES", "Problem", "Request", "Usage", "parse_json"]

KEY_RULES = (
    "gen_ai.conversation.id",
    "session.id",
    "metadata.conversation_id",
    "conversation_id",
    "trace",
    "prefix",
    "alone",
)
"""How a request's conversation was told, strongest first: the recorded keys (a body's
``conversation_id`` in its metadata, then at its line's top), then by inference (requests of
one trace; a request that extends an earlier request's messages; a request that starts a
conversation of its own)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts the provider reported for the request (None where not recorded)."""

    input_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(slots=True)
class Request:
    """One request: its messages (system prompt first, wherever the record kept it), in one of
    the shapes :mod:`ctxkit.shapes` knows."""

    messages: list[dict[str, Any]]
    time_ns: int
    where: str
    """Where it was read: ``FILE:LINE`` (and the span id for a trace)."""
    model: str = ""
    provider: str = ""
    key: str = ""
    keyed_by: str = ""
    """The rule of :data:`KEY_RULES` that keyed ``key`` (empty until keyed)."""
    trace_id: str = ""
    usage: Usage | None = None
    partial: str = ""
    """Why the messages are not the whole request (``previous_response_id``), else empty."""
    source: str = ""
    """The record form it was read from (``gen_ai.input.messages``, ``openinference``, ...)."""
    api: str = ""
    """The API it went to (a rule set's shape: ``openai``, ``responses``, ...; empty when the
    recording does not say), whose rules judge it: see :mod:`ctxkit.audit.apis`."""
    api_told: str = ""
    """What told the API, said for the report."""
    output: list[dict[str, Any]] | None = None
    """The model's answer, where the recording keeps it (``ctxkit replay`` reads it)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """Input that could not be read, skipped while the rest goes on."""

    where: str
    reason: str
    hint: str = ""
    details: dict[str, Any] = field(default_factory=dict)


def parse_json(text: str | bytes) -> Any:
    """JSON from a recording or an export. Nested too deeply for Python's parser, it is a
    ``ValueError`` like any other bad JSON (a skipped record), never a crash of the audit."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None
