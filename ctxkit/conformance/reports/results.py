"""What a run found, as data: a status per property and the verdict; the JSON report is
this, written out (``conformance/report.schema.json`` is its schema)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ctxkit.shapes.spoken import Spoken

REPORT_VERSION = 1
"""The JSON report's ``version``: raised when a field changes meaning or goes away; new fields
may appear without it."""

Status = Literal["passed", "failed", "error", "skipped", "below"]
"""``below``: an advisory property measured under its bar. ``failed`` always means a property
that does not hold, with the steps that show it; an advisory one is a figure, not a fault."""


@dataclass
class PropertyResult:
    id: str
    level: str
    status: Status = "skipped"
    message: str = ""
    counterexample: dict[str, Any] | None = None
    reproducer: str | None = None
    verified: bool | None = None
    verification: str = ""
    time_to_failure_s: float | None = None
    figure: float | None = None
    """An advisory property's measured value (cache_stability: the share of view tokens a
    prompt cache could serve)."""


@dataclass(frozen=True)
class Coverage:
    """How far a run's searches took the target: views asked for, views that were not the
    whole history (compacted), the largest history in tokens. A run none of whose views was
    compacted never tested the manager where it compacts: its verdict is ``inconclusive``,
    never ``pass``."""

    views: int = 0
    compacted_views: int = 0
    largest_history_tokens: int = 0
    grown_to: int = 0
    """Tokens at which the target was seen to compact when a history was grown (0: not
    grown, or it never compacted)."""
    max_tokens: int = 0
    """How far a history would have been grown (``--max-tokens``)."""

    @classmethod
    def of(cls, session: Any, max_tokens: int) -> Coverage:
        """The figures a search session counted."""
        return cls(
            session.views,
            session.compacted_views,
            session.largest_history_tokens,
            session.grown_to,
            max_tokens,
        )

    def as_depth(self) -> dict[str, int]:
        return {
            "views": self.views,
            "compacted_views": self.compacted_views,
            "largest_history_tokens": self.largest_history_tokens,
            **({"grown_to_tokens": self.grown_to} if self.grown_to else {}),
        }

    def sentence(self) -> str:
        """What the verdict's line says of the coverage."""
        if self.compacted_views:
            return (
                f"{self.compacted_views:,} of {self.views:,} views compacted; histories up to "
                f"{self.largest_history_tokens:,} tokens"
            )
        return (
            f"the manager never compacted: none of {self.views:,} views differed from its "
            f"history; histories reached {self.largest_history_tokens:,} tokens"
        )


@dataclass
class Report:
    target: str
    verdict: Literal["pass", "fail", "error", "inconclusive"]
    """``inconclusive``: every required property held, but no view was ever compacted, so
    none was tested where the manager compacts (:class:`Coverage`)."""
    seed: int
    duration_s: float
    properties: list[PropertyResult]
    profile: str = "default"
    allow: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    depth: dict[str, Any] = field(default_factory=dict)
    """How far the run got: examples, steps, the largest history, searches, how it ended."""
    phases: dict[str, Any] = field(default_factory=dict)
    """Seconds by phase (:mod:`ctxkit.conformance.reports.phases`)."""
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per failed property, how its reproducer is judged (``kind``, ``status``, ``calls``):
    for a run that verifies what a share of its search found elsewhere. Not in the JSON."""
    strict: bool = False
    """Recommended properties count like required ones (``--strict``)."""
    shapes: Spoken | None = None
    """The shapes the target was judged in, and why (None: it was never judged)."""
    coverage: Coverage | None = None
    """How far the searches took the target (None: it was never judged)."""

    def make_strict(self) -> None:
        """Count recommended failures too: the verdict fails when one failed."""
        self.strict = True
        if self.verdict in ("pass", "inconclusive") and any(
            p.level == "recommended" and p.status == "failed" for p in self.properties
        ):
            self.verdict = "fail"

    def to_json(self) -> dict[str, Any]:
        return {
            "version": REPORT_VERSION,
            "tool": "ctxkit conformance",
            "target": self.target,
            "verdict": self.verdict,
            "strict": self.strict,
            "seed": self.seed,
            "duration_s": round(self.duration_s, 3),
            "profile": self.profile,
            "allow": self.allow,
            **({"shapes": self.shapes.to_json()} if self.shapes else {}),
            **({"coverage": self.coverage.sentence()} if self.coverage else {}),
            "depth": self.depth,
            "phases": self.phases,
            "properties": [
                {
                    "id": p.id,
                    "level": p.level,
                    "status": p.status,
                    "message": p.message,
                    "counterexample": p.counterexample,
                    "reproducer": p.reproducer,
                    "verified": p.verified,
                    "verification": p.verification,
                    "time_to_failure_s": (
                        None if p.time_to_failure_s is None else round(p.time_to_failure_s, 3)
                    ),
                    "figure": p.figure,
                }
                for p in self.properties
            ],
        }


TIMES = frozenset({"duration_s", "phases", "time_to_failure_s", "slow_calls", "timeout_s"})
"""The JSON report's keys that hold times: what may differ between two runs of one command."""


def without_times(report: Any) -> Any:
    """A JSON report with its times (:data:`TIMES`) left out: what two runs of the same
    command on the same code must agree on, verdict, cases and sentences included."""
    if isinstance(report, dict):
        return {k: without_times(v) for k, v in report.items() if k not in TIMES}
    if isinstance(report, list):
        return [without_times(v) for v in report]
    return report
