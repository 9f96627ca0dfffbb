"""The audit's verdicts: a text summary per conversation, the JSON report, JUnit for CI views.

One verdict everywhere: a conversation fails when a required property fails; recommended and
advisory findings are shown (``warn``) but fail nothing unless the run is ``--strict``, and
JUnit marks them so (a ``<system-out>`` note, not a ``<failure>``). Message content appears
only when asked (``show_content``): findings name messages by their index in the request.
"""

from __future__ import annotations

import json
import platform
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from ctxkit.audit.apis import API_NAMES
from ctxkit.audit.auditor import Auditor
from ctxkit.audit.checks import ConversationAudit, Finding
from ctxkit.audit.request import Problem
from ctxkit.audit.terminal import printable
from ctxkit.wording import plural

__all__ = ["REPORT_VERSION", "Outcome", "as_json", "text_summary", "write_html", "write_junit"]

REPORT_VERSION = 1
"""The JSON report's ``version``: raised when a field changes meaning or goes away."""


@dataclass
class Outcome:
    """A finished audit: the auditor's conversations and what was skipped."""

    auditor: Auditor
    problems: Sequence[Problem]
    strict: bool = False
    contents: dict[tuple[str, int], list[Any]] | None = None
    """With ``--show-content``: (conversation, request) -> messages, for the findings only."""
    notes: Sequence[str] = ()
    """What is worth saying once about how the input was read (base64 ids)."""
    gate: bool = False
    """An audit of files, which must audit something to pass (``ctxkit audit``); a live
    watch that was stopped before any request came is no failure."""

    def failed(self, audit: ConversationAudit) -> bool:
        levels = {f.level for f in audit.findings}
        return "required" in levels or (self.strict and "recommended" in levels)

    @property
    def exit_code(self) -> int:
        """1 when a conversation failed; 2 when nothing was audited (all input skipped, or
        none held a model call): a gate must not go green having checked nothing."""
        if self.gate and not self.auditor.requests:
            return 2
        return 1 if any(self.failed(a) for a in self.auditor.conversations.values()) else 0

    def nothing_audited(self) -> str:
        """The sentence for an audit that audited nothing: the skip reasons counted, and the
        fix for the commonest; empty when something was audited."""
        if self.auditor.requests:
            return ""
        if not self.problems:
            return "nothing audited: the input holds no model request"
        counted = Counter((p.reason, p.hint) for p in self.problems)
        shown = "; ".join(f"{count} {reason}" for (reason, _), count in counted.most_common(3))
        more = len(counted) - 3
        (_, hint), _ = counted.most_common(1)[0]
        return printable(
            f"nothing audited: {plural(len(self.problems), 'record')} skipped ({shown}"
            + (f"; and {plural(more, 'other reason')}" if more > 0 else "")
            + ")"
            + (f". For the commonest: {hint}" if hint else "")
        )


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


_JOINED = {"trace": "the trace id", "prefix": "messages that continue it"}
"""How a conversation's requests were joined when no key was recorded, in words."""


def keyed(audit: ConversationAudit) -> str:
    """How a conversation was told apart: the attribute that keyed it, or what it was
    inferred from (no key recorded)."""
    if audit.keyed_by not in ("trace", "prefix", "alone"):
        return f"keyed by {audit.keyed_by}"
    if not audit.inferred:
        return "no key recorded" + (": one request on its own" if audit.requests == 1 else "")
    ways = " and ".join(_JOINED[w] for w in sorted(audit.inferred, key=list(_JOINED).index))
    return f"no key recorded: inferred from {ways}"


def _conversation_lines(outcome: Outcome, audit: ConversationAudit) -> list[str]:
    verdict = "FAIL" if outcome.failed(audit) else "WARN" if audit.findings else "PASS"
    compacted = audit.compacted
    lines = [
        f"{verdict}  {audit.key} ({keyed(audit)}): "
        f"{plural(audit.requests, 'request')}, {plural(compacted, 'compaction')}, "
        f"prefix kept {_figure(audit.prefix_kept)}"
        + (f", {plural(audit.partial, 'partial request')}" if audit.partial else "")
        + (f", {plural(audit.late, 'late request')} checked alone" if audit.late else "")
    ]
    for finding in audit.findings:
        lines.append(f"  request {finding.request}: {finding.property} ({finding.level}): ")
        lines[-1] += finding.message
        if finding.api_told:
            lines.append(f"    judged {finding.judged}")
        if finding.provider_error:
            lines.append(f"    {_answerer(finding)} would answer: {finding.provider_error}")
        if outcome.contents is not None:
            for index in finding.messages:
                messages = outcome.contents.get((audit.key, finding.request), [])
                if 0 <= index < len(messages):
                    lines.append(f"    message[{index}]: {json.dumps(messages[index])[:400]}")
    return lines


def text_summary(outcome: Outcome, *, verbose: bool = False) -> str:
    """What ``ctxkit audit`` prints: failing and warned conversations in full, passing ones
    counted (listed with ``verbose``), then the skipped input and a total. Every line is
    made printable (:func:`~ctxkit.audit.terminal.printable`): recorded text (keys, models,
    content) never reaches a terminal as control characters."""
    auditor = outcome.auditor
    lines: list[str] = []
    passed = 0
    for audit in auditor.conversations.values():
        if not audit.findings and not verbose:
            passed += 1
            continue
        lines.extend(_conversation_lines(outcome, audit))
    if passed:
        lines.append(f"PASS  {plural(passed, 'more conversation')} with no finding")
    for problem in outcome.problems[:20]:
        lines.append(
            f"skipped {problem.where}: {problem.reason}"
            + (f" ({problem.hint})" if problem.hint else "")
        )
    if len(outcome.problems) > 20:
        lines.append(f"... and {plural(len(outcome.problems) - 20, 'more skipped record')}")
    lines.extend(f"note: {note}" for note in sorted(outcome.notes))
    failing = sum(1 for a in auditor.conversations.values() if outcome.failed(a))
    lines.append(
        f"{plural(auditor.requests, 'request')} in "
        f"{plural(len(auditor.conversations), 'conversation')}: "
        + (f"{failing} failing" if failing else "none failing")
        + (f", {plural(len(outcome.problems), 'record')} skipped" if outcome.problems else "")
    )
    return "\n".join(printable(line) for line in lines)


def _conversation_json(outcome: Outcome, audit: ConversationAudit) -> dict[str, Any]:
    return {
        "key": audit.key,
        "keyed_by": audit.keyed_by,
        "inferred_from": sorted(audit.inferred),
        "verdict": "fail" if outcome.failed(audit) else "warn" if audit.findings else "pass",
        "requests": audit.requests,
        "partial_requests": audit.partial,
        "late_requests": audit.late,
        "models": sorted(m for m in audit.models if m),
        "findings": [f.as_dict() for f in audit.findings],
        "compactions": [
            {
                "request": c.request,
                "dropped": c.dropped,
                "rewritten": c.rewritten,
                "re_added": c.re_added,
                "tokens_before": c.tokens_before,
                "tokens_after": c.tokens_after,
            }
            for c in audit.compactions
        ],
        "prefix_kept": audit.prefix_kept,
        "first_cache_break": audit.first_cache_break,
        "reported_cached_share": (
            audit.cached_reported / audit.input_reported if audit.input_reported else None
        ),
        "count_error": {
            "requests": audit.count_errors,
            "mean": audit.count_error_sum / audit.count_errors if audit.count_errors else None,
            "max_abs": audit.count_error_max if audit.count_errors else None,
        },
        "findings_total": audit.findings_count,
        "compactions_total": audit.compacted,
        "near_window_requests": audit.near_window,
        "last_request_tokens": audit.last_tokens,
        "context_window": audit.last_window,
        "state_bytes": audit.state_bytes(),
    }


def as_json(outcome: Outcome) -> dict[str, Any]:
    """The JSON report (schema: ``conformance/audit-report.schema.json``)."""
    auditor = outcome.auditor
    return {
        "version": REPORT_VERSION,
        "tool": "ctxkit audit",
        "python": platform.python_version(),
        "strict": outcome.strict,
        "requests": auditor.requests,
        "exit_code": outcome.exit_code,
        "conversations": [_conversation_json(outcome, a) for a in auditor.conversations.values()],
        "skipped": [
            {"where": p.where, "reason": p.reason, "hint": p.hint} for p in outcome.problems
        ],
        "state_bytes": auditor.state_bytes(),
        **({"notes": sorted(outcome.notes)} if outcome.notes else {}),
        **({"nothing_audited": outcome.nothing_audited()} if not auditor.requests else {}),
    }


def _answerer(finding: Finding) -> str:
    return API_NAMES.get(finding.api, "the provider") if finding.api else "the provider"


def _failure_text(findings: Iterable[Finding]) -> str:
    return "\n".join(
        f"request {f.request}: {f.property}: {f.message}"
        + (f" (judged {f.judged})" if f.api_told else "")
        + (f" ({_answerer(f)} would answer: {f.provider_error})" if f.provider_error else "")
        for f in findings
    )


def write_junit(outcome: Outcome, path: Path) -> None:
    """One test case per conversation; ``<failure>`` exactly when the conversation fails
    (as the exit code counts it), other findings as ``<system-out>``."""
    cases = list(outcome.auditor.conversations.values())
    failing = [a for a in cases if outcome.failed(a)]
    suite = ET.Element(
        "testsuite",
        name="ctxkit audit",
        tests=str(len(cases)),
        failures=str(len(failing)),
        errors="0",
        skipped="0",
    )
    for audit in cases:
        case = ET.SubElement(suite, "testcase", classname="ctxkit.audit", name=audit.key)
        if outcome.failed(audit):
            failing_levels = {"required", "recommended"} if outcome.strict else {"required"}
            counted = [f for f in audit.findings if f.level in failing_levels]
            failure = ET.SubElement(
                case, "failure", message=f"{counted[0].property}: {counted[0].message}"[:300]
            )
            failure.text = _failure_text(counted)
        others = [f for f in audit.findings if not outcome.failed(audit) or f.level == "advisory"]
        if others:
            ET.SubElement(case, "system-out").text = _failure_text(others)
    ET.indent(suite)
    path.write_text(ET.tostring(suite, encoding="unicode") + "\n", encoding="utf-8")


def write_html(outcome: Outcome, path: Path) -> None:
    """One self-contained page: every conversation with its verdict, then each finding.
    Rendered by Jinja2 with autoescaping on: recorded text (keys, ids, error texts) can
    never become markup."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    environment = Environment(
        loader=PackageLoader("ctxkit.audit", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    report = as_json(outcome)
    page = environment.get_template("report.html.j2").render(
        **report,
        failing=sum(1 for c in report["conversations"] if c["verdict"] == "fail"),
    )
    path.write_text(page, encoding="utf-8")
