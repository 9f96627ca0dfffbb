"""What a run shows: the summary table, the JSON and JUnit reports, reproducer scripts."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from xml.etree import ElementTree

from ctxkit.conformance.judge.catalogue import RELAXATIONS, by_id
from ctxkit.conformance.reports.phases import said
from ctxkit.conformance.reports.reproducer import file_name
from ctxkit.conformance.reports.results import Report
from ctxkit.prefix import STABILITY_THRESHOLD

__all__ = ["inconclusive", "summary", "write_json", "write_junit"]

_MARK = {"passed": "pass", "failed": "FAIL", "error": "ERROR", "skipped": "skip", "below": "below"}


def summary(report: Report, reproducers: Path | None = None) -> str:
    """The table printed at the end of a run, then one paragraph per failure; with
    ``reproducers`` (``--reproducers DIR``), each failure names its script's file there."""
    width = max(len(p.id) for p in report.properties)
    lines = [
        f"ctxkit conformance: {report.target}  (seed {report.seed}, profile {report.profile}, "
        f"{report.duration_s:.1f} s)",
    ]
    depth = report.depth
    if depth:
        lines.append(
            f"  {depth['examples']:,} examples, {depth['steps']:,} steps, histories up to "
            f"{depth['largest_history']} messages, {depth['searches']} search(es)"
            + (f"; {report.coverage.sentence()}" if report.coverage else "")
            + (
                f"; stopped at the {depth['deadline_s']:g} s deadline"
                if depth.get("ended") == "deadline"
                else ""
            )
        )
        if report.shapes is not None:
            lines.append(f"  shapes: {', '.join(report.shapes.shapes)} ({report.shapes.why})")
            for line in (report.shapes.left_out(), report.shapes.hint(report.target)):
                if line:
                    lines.append(f"  {line}")
        if depth.get("normalized"):
            lines.append(
                "  stored in an equivalent form (providers read them as the same, so no "
                f"failure): {depth['normalized']}"
            )
        for reason, count in (depth.get("not_sent") or {}).items():
            lines.append(f"  {count} call(s) could not be made, their examples dropped: {reason}")
    if report.phases:
        lines.append(f"  time: {said(report.phases)}")
    lines += [
        "",
        f"  {'property':<{width}}  {'level':<11}  result",
    ]
    for p in report.properties:
        note, mark = "", _MARK[p.status]
        if p.status == "failed":
            size = (p.counterexample or {}).get("messages")
            note = (
                f"  after {p.time_to_failure_s:.1f} s, {size} message(s)"
                if size is not None and p.time_to_failure_s is not None
                else ""
            )
        elif p.status == "skipped" and p.message.startswith("n/a:"):
            mark, note = "n/a", "  (" + p.message.removeprefix("n/a: ").split(":")[0] + ")"
        elif p.status == "skipped" and p.message:
            note = f"  ({p.message.split(':')[0]})"
        if p.figure is not None:
            note = f"  {p.figure:.1%} of view tokens cacheable (bar: {STABILITY_THRESHOLD:.0%})"
        lines.append(f"  {p.id:<{width}}  {p.level:<11}  {mark}{note}")
    for item in report.allow:
        relaxation = RELAXATIONS.get(item.split("=")[0])
        if relaxation is not None:
            lines.append(f"  allowed: {item}: {relaxation.relaxes}: {relaxation.allows}")
    for p in report.properties:
        if p.status == "below":
            lines += ["", f"{p.id} below its bar (advisory: it fails no run): {p.message}"]
        if p.status == "skipped" and p.level == "advisory" and p.message:
            lines += ["", f"{p.id} not judged: {p.message}"]
        if p.status in ("failed", "error"):
            lines += ["", f"{p.id} {p.status}: {p.message}"]
            if p.status == "failed":
                lines.append(f"  what must hold: {by_id(p.id).holds}")
            if p.reproducer and p.counterexample:
                where = (
                    f"the whole script: {reproducers / file_name(p.id, report.target)}"
                    if reproducers is not None
                    else "the whole script is in --report-json, or run with --reproducers DIR"
                )
                lines.append(f"  the steps ({p.verification or 'not verified'}; {where}):")
                lines += [textwrap.indent(_steps_only(p.counterexample["steps"]), "    ")]
    verdicts = {
        "pass": "PASS: every required property holds",
        "fail": "FAIL: a required property does not hold",
        "error": "ERROR: a required property could not be checked",
        "inconclusive": "INCONCLUSIVE: every required property held, but " + inconclusive(report),
    }
    failed_recommended = [
        p.id for p in report.properties if p.level == "recommended" and p.status == "failed"
    ]
    lines += ["", verdicts[report.verdict]]
    if failed_recommended:
        lines.append(f"  recommended properties failing: {', '.join(failed_recommended)}")
    return "\n".join(lines)


def inconclusive(report: Report) -> str:
    """Why a run is inconclusive, and what would make it conclusive."""
    coverage = report.coverage
    if coverage is None:
        return "no view was compacted"
    said = coverage.sentence()
    if not coverage.max_tokens:
        return said
    grown = (
        f"a history grown to {coverage.largest_history_tokens:,} tokens never compacted either"
        if coverage.largest_history_tokens >= coverage.max_tokens
        else "the run ended before a history could be grown"
    )
    return (
        f"{said} ({grown}). Test it where it compacts: a larger --max-tokens (now "
        f"{coverage.max_tokens:,}), or a smaller limit in --config, so that histories outgrow it"
    )


def _steps_only(steps: list[str]) -> str:
    """The calls and the failed check: what a reader needs at a glance."""
    lines = "\n".join(steps).splitlines()
    if len(lines) > 40:
        lines = [*lines[:18], f"# ... {len(lines) - 36} more lines ...", *lines[-18:]]
    return "\n".join(lines)


def write_json(report: Report, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n")


def _counts_as_failure(report: Report, level: str) -> bool:
    return level == "required" or (level == "recommended" and report.strict)


def write_junit(report: Report, path: Path) -> None:
    """One testcase per property; failed -> <failure>, error -> <error>, skipped -> <skipped>,
    exactly as the exit code counts them (an inconclusive run's required properties, which
    held but were never tested where the manager compacts, are failures): a recommended
    property's failure is a <failure>
    only with ``--strict`` (else its message and reproducer are the <system-out>, so a CI view
    stays green on a passing run); an advisory property is never a failure: its figure is a
    <property> of the testcase and its verdict the <system-out>."""
    untested = report.verdict == "inconclusive"  # a required property's pass tested nothing
    failures = sum(
        (p.status == "failed" and _counts_as_failure(report, p.level))
        or (untested and p.status == "passed" and p.level == "required")
        for p in report.properties
    )
    suite = ElementTree.Element(
        "testsuite",
        name=f"ctxkit conformance {report.target}",
        tests=str(len(report.properties)),
        failures=str(failures),
        errors=str(sum(p.status == "error" for p in report.properties)),
        skipped=str(sum(p.status == "skipped" for p in report.properties)),
        time=f"{report.duration_s:.3f}",
    )
    for p in report.properties:
        case = ElementTree.SubElement(
            suite, "testcase", classname=f"conformance.{p.level}", name=p.id
        )
        if p.status == "skipped":
            ElementTree.SubElement(case, "skipped", message=p.message or "not checked")
        elif p.level == "advisory":
            if p.figure is not None:
                properties = ElementTree.SubElement(case, "properties")
                ElementTree.SubElement(properties, "property", name="figure", value=str(p.figure))
            ElementTree.SubElement(case, "system-out").text = f"{p.status}: {p.message}"
        elif p.status == "failed" and _counts_as_failure(report, p.level):
            node = ElementTree.SubElement(case, "failure", message=p.message)
            node.text = p.reproducer or p.message
        elif p.status == "failed":
            ElementTree.SubElement(case, "system-out").text = (
                f"failed (recommended; a failure with --strict): {p.message}\n"
                + (p.reproducer or "")
            )
        elif p.status == "error":
            ElementTree.SubElement(case, "error", message=p.message)
        elif untested and p.status == "passed" and p.level == "required":
            said = f"inconclusive: {inconclusive(report)}"
            ElementTree.SubElement(case, "failure", message=said).text = said
    path.parent.mkdir(parents=True, exist_ok=True)
    tree = ElementTree.ElementTree(suite)
    ElementTree.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
