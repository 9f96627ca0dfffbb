"""What ``--allow`` relaxes: parsed once, carried by the run, its checks and its reproducers."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ctxkit.conformance.judge.catalogue import RELAXATIONS

__all__ = ["RelaxationError", "Relaxations", "parse_allow"]


class RelaxationError(ValueError):
    """An ``--allow`` value that is not a relaxation; the message lists the valid ones."""


@dataclass(frozen=True)
class Relaxations:
    """The relaxations in force (see ``conformance/properties.json``)."""

    hoisted_system: bool = False
    dropped_system: bool = False
    merged_system: bool = False
    budget_tolerance: float = 0.0

    @property
    def items(self) -> list[str]:
        """As ``--allow`` values, to write into a reproducer."""
        found = [
            name
            for name, on in (
                ("hoisted-system", self.hoisted_system),
                ("dropped-system", self.dropped_system),
                ("merged-system", self.merged_system),
            )
            if on
        ]
        if self.budget_tolerance:
            found.append(f"budget-tolerance={self.budget_tolerance:g}")
        return found


def parse_allow(items: Iterable[str]) -> Relaxations:
    """``--allow`` values (each may also be a comma-separated list) as :class:`Relaxations`."""
    flags: dict[str, bool] = {}
    tolerance = 0.0
    for item in (part.strip() for value in items for part in value.split(",")):
        if not item:
            continue
        name, _, value = item.partition("=")
        relaxation = RELAXATIONS.get(name)
        if relaxation is None or (relaxation.value is None) != (not value):
            raise RelaxationError(
                f"unknown relaxation {item!r}; --allow accepts: "
                + ", ".join(r.usage for r in RELAXATIONS.values())
            )
        if name == "budget-tolerance":
            try:
                tolerance = float(value)
            except ValueError:
                tolerance = math.nan
            if not 0 <= tolerance <= 1:
                raise RelaxationError(
                    f"--allow budget-tolerance=R needs a ratio from 0 to 1, got {value!r}"
                )
        else:
            flags[name.replace("-", "_")] = True
    return Relaxations(**flags, budget_tolerance=tolerance)
