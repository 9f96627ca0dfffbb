"""What the adapter tests share: one short run per adapter, and the judgement each must get
(the adapter's own part passes; every failure has a verified reproducer and is classified as
a bug, a design choice or the adapter's limit)."""

from __future__ import annotations

from collections.abc import Mapping

from ctxkit.conformance.reports.results import Report
from ctxkit.conformance.runner import RunOptions, run
from tests.schemas import valid
from tests.shared_runs import shared

SHORT = {
    "profile": "quick",
    "seed": 1,
    "max_examples": 8,
    "shrink_seconds": 3.0,
    "stability_steps": 40,
}
"""Short runs: the search as quick as it finds what each adapter does; the advisory agent loop
40 calls (not 150: through some libraries a call costs half a second, and the loop itself is
judged whole in tests/test_prefix.py)."""


@shared
def checked(target: str, implementation: str | None = None) -> Report:
    """One short run per target (and route), shared by the tests that look at it."""
    report = run(RunOptions(target=target, implementation=implementation, **SHORT))
    valid("report", report.to_json())
    return report


def assert_judged(report: Report, own_part: set[str], findings: Mapping[str, object]) -> None:
    statuses = {p.id: p.status for p in report.properties}
    assert all(statuses[p] == "passed" for p in own_part), statuses
    for result in report.properties:
        if result.status == "failed":
            assert result.verified, result.verification
            assert result.id in findings, f"{result.id} failed unclassified: {result.message}"
