"""The property catalogue: ids (part of the report format), levels, what must hold, and the
relaxations ``--allow`` accepts.

The catalogue is data, shared by every implementation of the suite in any language: it lives
in the repository's top-level ``conformance/properties.json`` and ships inside the package as
``ctxkit/conformance/spec/`` (a link to that folder in a source checkout).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

__all__ = ["PROPERTIES", "RELAXATIONS", "Property", "Relaxation", "by_id", "catalogue"]

Level = Literal["required", "recommended", "advisory"]


@dataclass(frozen=True, slots=True)
class Property:
    id: str
    level: Level
    holds: str


@dataclass(frozen=True, slots=True)
class Relaxation:
    """One ``--allow`` value: ``name`` or ``name=VALUE``, relaxing one property."""

    name: str
    value: str | None
    relaxes: str
    allows: str

    @property
    def usage(self) -> str:
        """How it is written on the command line, e.g. ``budget-tolerance=R``."""
        return self.name if self.value is None else f"{self.name}={self.value}"


def catalogue(name: str = "properties.json") -> Any:
    """One file of the language-neutral catalogue, parsed."""
    spec = resources.files("ctxkit.conformance").joinpath("spec", name)
    return json.loads(spec.read_text("utf-8"))


_DATA = catalogue()

PROPERTIES: tuple[Property, ...] = tuple(
    Property(p["id"], p["level"], p["holds"]) for p in _DATA["properties"]
)

RELAXATIONS: dict[str, Relaxation] = {
    r["name"]: Relaxation(r["name"], r["value"], r["relaxes"], r["allows"])
    for r in _DATA["relaxations"]
}
"""What ``--allow`` accepts, by name. Each relaxes exactly one property, and the report says
so."""

_BY_ID = {p.id: p for p in PROPERTIES}


def by_id(property_id: str) -> Property:
    return _BY_ID[property_id]
