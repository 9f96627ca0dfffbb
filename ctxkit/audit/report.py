"""The audit's verdicts: a text summary per conversation, the JSON report, JUnit for CI views.

One verdict everywhere: a conversation fails when a required property fails; recommended and
advisory findings are shown (``warn``) but fail nothing unless the run is ``--strict``, and
JUnit marks them so (a ``<system-out>`` note, not a ``<failure>``). Message content appears
only when asked (``show_content``): findings name messages by their index in the request.

What a report says of a conversation is made once, when it is finished (:func:`finish`), and
every report is written from those records, one at a time: from a spool on disk for an audit
of files (:mod:`~ctxkit.audit.in_flight`), from a list for a live audit
(:meth:`Outcome.of`), by the same functions.
"""

from __future__ import annotations

import json
import platform
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from ctxkit.audit.apis import API_NAMES
from ctxkit.audit.auditor import Auditor
from ctxkit.audit.checks import ConversationAudit, Finding
from ctxkit.audit.finished import Finished, Tally
from ctxkit.audit.request import Problem
from ctxkit.audit.terminal import printable
from ctxkit.wording import plural

__all__ = [
    "REPORT_VERSION",
    "Outcome",
    "as_json",
    "failed",
    "finish",
    "summary_lines",
    "text_summary",
    "write_html",
    "write_json",
    "write_junit",
]

REPORT_VERSION = 1
"""The JSON report's ``version``: raised when a field changes meaning or goes away."""


@dataclass
class Outcome:
    """A finished audit: each conversation as the reports show it (:class:`Finished`, in the
    order the conversations began), their totals, and what was skipped. The conversations
    are an iterable read once per report: a list, or a :class:`~ctxkit.audit.finished.Spool`
    on disk (``ctxkit audit`` of files), whichever made them."""

    conversations: Iterable[Finished]
    tally: Tally
    problems: Sequence[Problem]
    strict: bool = False
    notes: Sequence[str] = ()
    """What is worth saying once about how the input was read (base64 ids)."""
    gate: bool = False
    """An audit of files, which must audit something to pass (``ctxkit audit``); a live
    watch that was stopped before any request came is no failure."""

    @classmethod
    def of(
        cls,
        auditor: Auditor,
        problems: Sequence[Problem],
        *,
        strict: bool = False,
        contents: Mapping[str, Mapping[int, list[Any]]] | None = None,
        notes: Sequence[str] = (),
        gate: bool = False,
    ) -> Outcome:
        """The outcome of every conversation ``auditor`` holds, finished now (``ctxkit
        watch``, and an audit held in memory). ``contents``: with ``--show-content``,
        conversation -> request -> messages, for the requests with findings."""
        tally = Tally(requests=auditor.requests, state_bytes=auditor.state_bytes())
        finished = []
        for audit in auditor.conversations.values():
            shown = None if contents is None else contents.get(audit.key, {})
            finished.append(finish(audit, strict=strict, contents=shown))
            tally.add(finished[-1])
        return cls(finished, tally, problems, strict=strict, notes=notes, gate=gate)

    @property
    def exit_code(self) -> int:
        """1 when a conversation failed; 2 when nothing was audited (all input skipped, or
        none held a model call): a gate must not go green having checked nothing."""
        if self.gate and not self.tally.requests:
            return 2
        return 1 if self.tally.failing else 0

    def nothing_audited(self) -> str:
        """The sentence for an audit that audited nothing: the skip reasons counted, and the
        fix for the commonest; empty when something was audited."""
        if self.tally.requests:
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


def failed(audit: ConversationAudit, *, strict: bool) -> bool:
    """Whether the conversation fails: a required property (``strict``: or a recommended
    one) broken."""
    levels = {f.level for f in audit.findings}
    return "required" in levels or (strict and "recommended" in levels)


def finish(
    audit: ConversationAudit, *, strict: bool, contents: Mapping[int, list[Any]] | None = None
) -> Finished:
    """What every report says of the conversation, made once (its audit can then go):
    ``contents``, with ``--show-content``, its requests' messages where it has findings."""
    fails = failed(audit, strict=strict)
    return Finished(
        _conversation_json(audit, fails),
        tuple(_conversation_lines(audit, fails, contents)),
        _junit_case(audit, fails, strict),
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


def _conversation_lines(
    audit: ConversationAudit, fails: bool, contents: Mapping[int, list[Any]] | None
) -> list[str]:
    verdict = "FAIL" if fails else "WARN" if audit.findings else "PASS"
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
        if contents is not None:
            for index in finding.messages:
                messages = contents.get(finding.request, [])
                if 0 <= index < len(messages):
                    lines.append(f"    message[{index}]: {json.dumps(messages[index])[:400]}")
    return lines


def summary_lines(outcome: Outcome, *, verbose: bool = False) -> Iterator[str]:
    """What ``ctxkit audit`` prints, line by line: failing and warned conversations in full,
    passing ones counted (listed with ``verbose``), then the skipped input and a total. Every
    line is made printable (:func:`~ctxkit.audit.terminal.printable`): recorded text (keys,
    models, content) never reaches a terminal as control characters."""
    tally = outcome.tally
    for finished in outcome.conversations:
        if finished.found or verbose:
            yield from (printable(line) for line in finished.lines)
    lines: list[str] = []
    passed = 0 if verbose else tally.conversations - tally.found
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
    lines.append(
        f"{plural(tally.requests, 'request')} in "
        f"{plural(tally.conversations, 'conversation')}: "
        + (f"{tally.failing} failing" if tally.failing else "none failing")
        + (f", {plural(len(outcome.problems), 'record')} skipped" if outcome.problems else "")
    )
    yield from (printable(line) for line in lines)


def text_summary(outcome: Outcome, *, verbose: bool = False) -> str:
    """:func:`summary_lines`, as one text."""
    return "\n".join(summary_lines(outcome, verbose=verbose))


def _conversation_json(audit: ConversationAudit, fails: bool) -> dict[str, Any]:
    return {
        "key": audit.key,
        "keyed_by": audit.keyed_by,
        "inferred_from": sorted(audit.inferred),
        "verdict": "fail" if fails else "warn" if audit.findings else "pass",
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


def _report(outcome: Outcome, conversations: Any) -> dict[str, Any]:
    """The JSON report around ``conversations`` (a list, or what stands for them)."""
    tally = outcome.tally
    return {
        "version": REPORT_VERSION,
        "tool": "ctxkit audit",
        "python": platform.python_version(),
        "strict": outcome.strict,
        "requests": tally.requests,
        "exit_code": outcome.exit_code,
        "conversations": conversations,
        "skipped": [
            {"where": p.where, "reason": p.reason, "hint": p.hint} for p in outcome.problems
        ],
        "state_bytes": tally.state_bytes,
        **({"notes": sorted(outcome.notes)} if outcome.notes else {}),
        **({"nothing_audited": outcome.nothing_audited()} if not tally.requests else {}),
    }


def as_json(outcome: Outcome) -> dict[str, Any]:
    """The JSON report (schema: ``conformance/audit-report.schema.json``), in memory."""
    return _report(outcome, [finished.json for finished in outcome.conversations])


_MARK = "\x00ctxkit-conversations\x00"


def write_json(outcome: Outcome, path: Path) -> None:
    """:func:`as_json` written to ``path`` as ``json.dumps(..., indent=2)`` writes it, the
    conversations one at a time as they are read, never all in memory."""
    head, tail = json.dumps(_report(outcome, _MARK), indent=2).split(json.dumps(_MARK))
    with path.open("w", encoding="utf-8") as out:
        out.write(head + "[")
        separator = "\n    "
        for finished in outcome.conversations:
            out.write(separator + json.dumps(finished.json, indent=2).replace("\n", "\n    "))
            separator = ",\n    "
        out.write(("\n  ]" if separator.startswith(",") else "]") + tail + "\n")


def _answerer(finding: Finding) -> str:
    return API_NAMES.get(finding.api, "the provider") if finding.api else "the provider"


def _failure_text(findings: Iterable[Finding]) -> str:
    return "\n".join(
        f"request {f.request}: {f.property}: {f.message}"
        + (f" (judged {f.judged})" if f.api_told else "")
        + (f" ({_answerer(f)} would answer: {f.provider_error})" if f.provider_error else "")
        for f in findings
    )


def _junit_case(audit: ConversationAudit, fails: bool, strict: bool) -> str:
    """The conversation's test case: ``<failure>`` exactly when it fails (as the exit code
    counts it), other findings as ``<system-out>``; as XML indented in its suite."""
    case = ET.Element("testcase", classname="ctxkit.audit", name=audit.key)
    if fails:
        failing_levels = {"required", "recommended"} if strict else {"required"}
        counted = [f for f in audit.findings if f.level in failing_levels]
        failure = ET.SubElement(
            case, "failure", message=f"{counted[0].property}: {counted[0].message}"[:300]
        )
        failure.text = _failure_text(counted)
    others = [f for f in audit.findings if not fails or f.level == "advisory"]
    if others:
        ET.SubElement(case, "system-out").text = _failure_text(others)
    ET.indent(case, level=1)
    return ET.tostring(case, encoding="unicode")


def write_junit(outcome: Outcome, path: Path) -> None:
    """One test case per conversation, written one at a time (see :func:`_junit_case`)."""
    tally = outcome.tally
    suite = ET.Element(
        "testsuite",
        name="ctxkit audit",
        tests=str(tally.conversations),
        failures=str(tally.failing),
        errors="0",
        skipped="0",
    )
    if not tally.conversations:
        path.write_text(ET.tostring(suite, encoding="unicode") + "\n", encoding="utf-8")
        return
    suite.text = _MARK
    head, tail = ET.tostring(suite, encoding="unicode").split(_MARK)
    with path.open("w", encoding="utf-8") as out:
        out.write(head)
        for finished in outcome.conversations:
            out.write("\n  " + finished.case)
        out.write("\n" + tail + "\n")


class _Objects:
    """The conversations' JSON objects for the HTML template: counted and read as often as
    it asks, one at a time."""

    def __init__(self, outcome: Outcome) -> None:
        self._outcome = outcome

    def __len__(self) -> int:
        return self._outcome.tally.conversations

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (finished.json for finished in self._outcome.conversations)


def write_html(outcome: Outcome, path: Path) -> None:
    """One self-contained page: every conversation with its verdict, then each finding.
    Rendered by Jinja2 with autoescaping on: recorded text (keys, ids, error texts) can
    never become markup."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    environment = Environment(
        loader=PackageLoader("ctxkit.audit", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    report = _report(outcome, _Objects(outcome))
    page = environment.get_template("report.html.j2").generate(
        **report, failing=outcome.tally.failing
    )
    with path.open("w", encoding="utf-8") as out:
        out.writelines(page)
