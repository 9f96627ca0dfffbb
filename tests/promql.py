"""What the dashboard tests read out of PromQL text: the metric names a query uses, and an alert
expression split at its top-level comparison. Prometheus itself parses every query in the tests
(promtool, the live server); this only finds names and the split point."""

from __future__ import annotations

import re
from pathlib import Path

from ctxkit.telemetry.names import AUDIT_METRICS, AUDIT_QUEUE_DEPTH, METRICS

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = ROOT / "dashboards"
ALERTS = DASHBOARDS / "alerts.yml"

KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "inf", "nan"}
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w:.])([a-zA-Z_:][\w:]*)(\s*\()?")
_COMPARISON = re.compile(r"^(?P<lhs>.+?)\s*(?P<op>==|!=|>=|<=|>|<)\s*(?P<number>-?\d+(?:\.\d+)?)$")


def exposed_names() -> set[str]:
    """Every series name on ``/metrics`` of a ctxkit process or of ``ctxkit watch``:
    counters' ``_total``, histograms' three series."""
    names = set()
    for declared in (*METRICS, *AUDIT_METRICS, AUDIT_QUEUE_DEPTH):
        if declared.kind == "histogram":
            names |= {declared.exposed + s for s in ("_bucket", "_sum", "_count")}
        else:
            names.add(declared.exposed)
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects: identifiers that are not functions, keywords,
    label names or label values."""
    text = _STRING.sub('""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range and subquery windows
    text = _GROUPING.sub(" ", text)
    return {
        match[1]
        for match in _IDENTIFIER.finditer(text)
        if not match[2] and match[1].lower() not in KEYWORDS
    }


def split_comparison(expr: str) -> tuple[str, str, str]:
    """``(lhs, op, number)`` of ``<lhs> <op> <number>``; ``ValueError`` if ``expr`` has
    another form or the comparison is not at the top level (inside parentheses)."""
    match = _COMPARISON.match(expr.strip())
    if match is None:
        raise ValueError(f"not '<expression> <comparison> <number>': {expr!r}")
    lhs = match["lhs"]
    top, depth = [], 0
    for char in _STRING.sub('""', lhs):
        depth += {"(": 1, "{": 1, "[": 1, ")": -1, "}": -1, "]": -1}.get(char, 0)
        if depth < 0:
            break
        top.append(char if depth == 0 else " ")
    if depth != 0 or re.search(r"\b(?:and|or|unless)\b|[<>!=]=?", "".join(top)):
        raise ValueError(f"the comparison is not the top-level operation: {expr!r}")
    return lhs, match["op"], match["number"]


def alert_rules(path: Path = ALERTS) -> dict[str, str]:
    """Alert name -> expr, read line by line: the rules file keeps each on one line (the
    test environment has no YAML parser; promtool checks the file as YAML)."""
    text = path.read_text(encoding="utf-8")
    names = re.findall(r"^\s*- alert:\s*(\S+)\s*$", text, re.MULTILINE)
    exprs = re.findall(r"^\s*expr:\s*(.+?)\s*$", text, re.MULTILINE)
    if len(names) != len(exprs) or any(e[0] in "|>'\"" for e in exprs):
        raise ValueError(f"{path}: every alert needs one unquoted 'expr:' on one line")
    return dict(zip(names, exprs, strict=True))
