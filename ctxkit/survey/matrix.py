"""The compatibility matrix as data: one row per target (library and version), one cell per
property, each failure with its reproducer and what is known about it.

Rows are built from the JSON reports ``ctxkit conformance --report-json`` writes, so a survey
reads nothing a single run would not show.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from ctxkit.adapters.finding import Finding
from ctxkit.conformance.judge.catalogue import PROPERTIES

__all__ = ["MATRIX_VERSION", "Cell", "Finding", "Matrix", "Row", "row_from_report", "slug"]

MATRIX_VERSION = 1
"""The matrix JSON's ``version`` (schema: ``conformance/matrix.schema.json``): raised when a
field changes meaning or goes away; new fields may appear without it."""


@dataclass
class Cell:
    """One property of one target: ``passed``, ``failed``, ``error``, ``skipped``, ``below``
    (an advisory figure under its bar) or ``not run`` (the target could not be checked)."""

    status: str
    level: str
    message: str = ""
    reproducer: str | None = None
    verified: bool | None = None
    verification: str | None = None
    messages: int | None = None
    """The counterexample's history size."""
    finding: Finding | None = None
    reproducer_path: str | None = None
    """Where the survey wrote the reproducer, relative to its output folder."""
    trace: list[dict[str, Any]] | None = None
    """The counterexample's calls as data (for reports in a library's own types)."""
    figure: float | None = None
    """An advisory property's measured value (cache_stability: the share cacheable)."""


@dataclass
class Row:
    target: str
    library: str | None = None
    version: str | None = None
    verdict: str = "error"
    duration_s: float = 0.0
    cells: dict[str, Cell] = field(default_factory=dict)
    problem: str | None = None
    """Why the target could not be checked at all (its setup error), if it could not."""
    shapes: list[str] = field(default_factory=list)
    """The message shapes it was judged in (the report's ``shapes``: ctxkit.shapes.spoken)."""

    @property
    def name(self) -> str:
        """The row as a person reads it: the library and version, else the target."""
        if self.library:
            return f"{self.library} {self.version or ''}".strip()
        return self.target


@dataclass
class Matrix:
    rows: list[Row]
    created: str
    ctxkit_version: str
    machine: str
    profile: str
    seed: int
    properties: list[tuple[str, str]] = field(
        default_factory=lambda: [(p.id, p.level) for p in PROPERTIES]
    )

    def to_json(self) -> dict[str, Any]:
        return {
            "version": MATRIX_VERSION,
            "tool": "ctxkit survey",
            "created": self.created,
            "ctxkit": self.ctxkit_version,
            "machine": self.machine,
            "profile": self.profile,
            "seed": self.seed,
            "properties": [{"id": i, "level": level} for i, level in self.properties],
            "rows": [asdict(row) for row in self.rows],
        }


def slug(text: str) -> str:
    """A file name for a target: ``langchain:trim_messages`` -> ``langchain-trim_messages``."""
    return re.sub(r"[^A-Za-z0-9_.]+", "-", text).strip("-") or "target"


def row_from_report(
    target: str,
    report: dict[str, Any],
    *,
    library: str | None = None,
    version: str | None = None,
    findings: dict[str, Finding] | None = None,
) -> Row:
    """A row from one ``--report-json`` report; ``findings`` says what known failures are."""
    findings = findings or {}
    cells = {}
    for result in report.get("properties", []):
        counterexample = result.get("counterexample") or {}
        failed = result["status"] in ("failed", "error")
        cells[result["id"]] = Cell(
            status=result["status"],
            level=result["level"],
            message=result.get("message") or "",
            reproducer=result.get("reproducer"),
            verified=result.get("verified"),
            verification=result.get("verification"),
            messages=counterexample.get("messages"),
            finding=findings.get(result["id"]) if failed else None,
            trace=counterexample.get("trace"),
            figure=result.get("figure"),
        )
    return Row(
        target=target,
        library=library,
        version=version,
        verdict=report.get("verdict", "error"),
        duration_s=float(report.get("duration_s") or 0.0),
        cells=cells,
        shapes=list((report.get("shapes") or {}).get("judged") or []),
    )
