"""The properties the suite checks: ids (part of the interface), levels, one-line meanings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["PROPERTIES", "RELAXATIONS", "Property", "by_id"]

Level = Literal["required", "recommended"]


@dataclass(frozen=True, slots=True)
class Property:
    id: str
    level: Level
    holds: str


PROPERTIES: tuple[Property, ...] = (
    Property(
        "tool_pair_integrity",
        "required",
        "in every view, the results of each calling message follow it at once, every call "
        "answered, nothing in between; no result elsewhere; no duplicate ids",
    ),
    Property(
        "ordering",
        "required",
        "view messages that come from the history keep its order; a message that comes from "
        "none (a summary, a notice) carries no tool call or result",
    ),
    Property(
        "non_destructive",
        "required",
        "get_messages() equals everything added, whatever views were asked for; no stored "
        "message changes",
    ),
    Property(
        "lifecycle",
        "required",
        "the methods work on valid input: clear() empties history and views; set_messages(x) "
        "then get_messages() == x; a request whose budget holds the system messages and the "
        "newest user message returns a view",
    ),
    Property(
        "isolation",
        "recommended",
        "editing a returned list or message, or a message after passing it in, changes nothing "
        "stored",
    ),
    Property("determinism", "recommended", "asking twice with nothing added gives the same view"),
    Property(
        "budget",
        "recommended",
        "where a fitting view exists, the view fits the budget (within the allowed tolerance)",
    ),
    Property(
        "preservation",
        "recommended",
        "system messages and the newest user message stay in the view, where they fit",
    ),
    Property(
        "events",
        "recommended",
        "each context:pre_compact has its context:post_compact, in that order, with integer "
        "counts, after <= before",
    ),
    Property(
        "robustness",
        "recommended",
        "a bad message gets a clear error and leaves the state as it was",
    ),
    Property("concurrency", "recommended", "concurrent add_message calls lose nothing"),
)

_BY_ID = {p.id: p for p in PROPERTIES}


def by_id(property_id: str) -> Property:
    return _BY_ID[property_id]


RELAXATIONS = {
    "hoisted-system": "ordering: system messages may move to the front of the view (some "
    "providers take one system prompt, so managers gather them there)",
    "dropped-system": "preservation: system messages may be dropped from a view (e.g. a "
    "manager that keeps only the first system prompt)",
    "budget-tolerance=R": "budget: a view may exceed the budget by the ratio R (e.g. 0.05), "
    "for managers that estimate tokens instead of counting them",
}
"""What ``--allow`` accepts. Each relaxes exactly one property, and the report says so."""
