"""The rules each provider enforces on a request, read from the language-neutral data in the
top-level ``conformance/rules/`` folder (shipped inside the package as ``ctxkit/shapes/spec``).

Each file is one API's rule set, the one place its rules live: where the API keeps a system
prompt (``system``: ``messages`` when a message of the list carries it, else the request field
beside the list), how results answer calls (``pairing``), how parallel calls are written
(``parallel_calls``: in one ``message``, or as call ``items`` in a row), how a call without an
id is paired (``without_ids``: ``refused``, or by ``name_and_position``), in what order the
results of one message's calls may come among themselves (``result_order``: ``any``, or
``by_id``: any order for results matched by id, their own for those known by position), what
the API calls a result, a call and an answer (``words``, for sentences in its own terms), and
its rules: an id, the property a break of it fails, which kind of pair break it is
(``breaks``: ``unanswered``, ``stray``, ``duplicate``), what must hold, and the error text the
provider answers with.
The suite's judge, the guard, the repair and the audit all ask these sets; checks cite a rule
by id, so a finding can say what the provider would have said.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

__all__ = ["BREAKS", "Rule", "RuleSet", "rule", "rule_set", "system_in_messages"]

Pairing = Literal["next", "following"]
Break = Literal["unanswered", "stray", "duplicate"]
BREAKS: tuple[Break, ...] = ("unanswered", "stray", "duplicate")
"""The kinds of pair break: a call not answered as the API wants, a result no call before it
claims, a call id used twice."""


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    property: str
    holds: str
    error: str
    breaks: Break | None = None
    """The kind of pair break this rule is, where it is one."""


@dataclass(frozen=True, slots=True)
class RuleSet:
    shape: str
    api: str
    system: str
    """``messages``, or the request field beside the list that holds the system prompt."""
    pairing: Pairing
    parallel_calls: Literal["message", "items"]
    without_ids: Literal["refused", "name_and_position"]
    result_order: Literal["any", "by_id"]
    """The order the results answering one message's calls (a Responses turn's call items) may
    come in among themselves: ``any``, or ``by_id`` (any order for results matched by id; a
    result known by name and position keeps its place)."""
    words: Mapping[str, str]
    """``result``, ``call``, ``answer``: a result, what makes a call and what answers one, in
    the API's words (``{call}`` stands for a Responses call item's type)."""
    rules: tuple[Rule, ...]

    def breaking(self, kind: Break) -> str:
        """The id of the rule a pair break of this kind breaks in this API ('' if none)."""
        return next((r.id for r in self.rules if r.breaks == kind), "")

    def said(self, call: str = "function_call") -> tuple[str, str, str]:
        """(a result, what makes a call, what answers one), for a sentence in this API's
        words (``call``: the call item's type, for Responses)."""
        words = self.words
        return tuple(words[k].format(call=call) for k in ("result", "call", "answer"))  # type: ignore[return-value]


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
        data["parallel_calls"],
        data["without_ids"],
        data["result_order"],
        dict(data["words"]),
        tuple(
            Rule(r["id"], r["property"], r["holds"], r["error"], r.get("breaks"))
            for r in data["rules"]
        ),
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
