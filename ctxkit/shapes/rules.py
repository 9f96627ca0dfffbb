"""The rules each provider enforces on a request, read from the language-neutral data in the
top-level ``conformance/rules/`` folder (shipped inside the package as ``ctxkit/shapes/spec``).

Each file names its shape, where its API keeps a system prompt (``system``: ``messages`` when a
message of the list carries it, else the request field beside the list), how results answer
calls (``pairing``), and its rules: an id, the
property a break of it fails, what must hold, and the error text the provider answers with.
Checks cite a rule by id, so a finding can say what the provider would have said.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

__all__ = ["PAIR_RULES", "Rule", "RuleSet", "rule", "rule_set", "system_in_messages"]

Pairing = Literal["next", "following"]


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    property: str
    holds: str
    error: str


@dataclass(frozen=True, slots=True)
class RuleSet:
    shape: str
    api: str
    system: str
    """``messages``, or the request field beside the list that holds the system prompt."""
    pairing: Pairing
    rules: tuple[Rule, ...]


@cache
def rule_set(shape: str) -> RuleSet:
    """The rules of one shape (``openai``, ``anthropic``, ``responses``, ``gemini``,
    ``bedrock``, ``genai``). Raises KeyError for a shape with no rule file."""
    try:
        text = resources.files(__package__).joinpath("spec", f"{shape}.json").read_text("utf-8")
    except FileNotFoundError:
        raise KeyError(shape) from None
    data = json.loads(text)
    return RuleSet(
        data["shape"],
        data["api"],
        data["system"],
        data["pairing"],
        tuple(Rule(r["id"], r["property"], r["holds"], r["error"]) for r in data["rules"]),
    )


def system_in_messages(shape: str) -> bool:
    """Whether a message of the list may carry the system prompt in this shape (Chat
    Completions, Responses, GenAI), rather than a field beside the list (Anthropic ``system``,
    Gemini ``systemInstruction``, Bedrock ``system``)."""
    return rule_set(shape).system == "messages"


def rule(rule_id: str) -> Rule:
    """One rule by its id, e.g. ``responses.reasoning_with_call``."""
    for candidate in rule_set(rule_id.partition(".")[0]).rules:
        if candidate.id == rule_id:
            return candidate
    raise KeyError(rule_id)


PAIR_RULES: Mapping[str, Mapping[str, str]] = {
    "unanswered": {
        "openai": "openai.calls_answered",
        "anthropic": "anthropic.calls_answered_next",
        "responses": "responses.calls_answered",
        "gemini": "gemini.responses_match_calls",
        "bedrock": "bedrock.calls_answered_next",
        "genai": "genai.calls_answered",
    },
    "stray": {
        "openai": "openai.result_has_call",
        "anthropic": "anthropic.result_has_call",
        "responses": "responses.output_has_call",
        "gemini": "gemini.response_has_call",
        "bedrock": "bedrock.result_has_call",
        "genai": "genai.response_has_call",
    },
    "duplicate": {"openai": "openai.unique_call_ids"},
}
"""Which provider rule each kind of pair break is, by the shape of the message at fault."""
