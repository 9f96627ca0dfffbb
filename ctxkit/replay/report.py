"""What a replay reports: per manager, totals and each conversation's figures, as JSON (schema
``conformance/replay-report.schema.json``, ``version`` 1) and as a table; the gate's verdict.
Records of the recording that could not be read are counted and named in both, as the audit
names them; recorded text in the table is made printable and never read as markup."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxkit.audit.terminal import printable
from ctxkit.replay.run import RECORDED, ManagerSpec, Replayed
from ctxkit.replay.session import Outcome
from ctxkit.replay.spool import Spool

__all__ = [
    "Threshold",
    "as_json",
    "failures",
    "merge",
    "parse_threshold",
    "text_report",
    "totals",
    "write_html",
]

VERSION = 1


def totals(conversations: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One manager's figures over its conversations' JSON (the same sums for one run and for
    shards merged)."""

    def total(key: str) -> Any:
        return sum(c[key] for c in conversations)

    needed, previous = total("references_needed"), total("prefix_tokens")
    findings = [f for c in conversations for f in c["findings"]]
    return {
        "conversations": len(conversations),
        "requests": total("requests"),
        "tokens_sent": total("tokens_sent"),
        "billed_tokens": round(total("billed_tokens"), 1),
        "cost": (
            round(total("cost"), 6)
            if conversations and all(c.get("cost") is not None for c in conversations)
            else None
        ),
        "findings": dict(sorted(Counter(f["property"] for f in findings).items())),
        "required_findings": sum(1 for f in findings if f["level"] == "required"),
        "compactions": total("compactions"),
        "prefix_kept": round(total("prefix_kept_tokens") / previous, 4) if previous else None,
        "references_needed": needed,
        "references_kept": round(total("references_found") / needed, 4) if needed else None,
        "errors": sum(1 for c in conversations if c["error"]),
        "stopped": sum(1 for c in conversations if c.get("stopped")),
    }


def as_json(outcome: Outcome) -> dict[str, Any]:
    """The report: every manager, ``recorded`` first, with totals and per-conversation
    figures; request indexes 0-based, as in the audit."""
    return {
        "version": VERSION,
        "tool": "ctxkit replay",
        "shard": outcome.shard,
        "conversations": outcome.conversations,
        "notes": list(outcome.notes),
        "skipped": [
            {"where": p.where, "reason": p.reason, "hint": p.hint} for p in outcome.problems
        ],
        "managers": [
            _manager(spec, _figures(outcome.results[spec.name])) for spec in outcome.managers
        ],
    }


def _figures(results: Spool | Sequence[Replayed]) -> Spool | list[dict[str, Any]]:
    """A manager's conversations as the report's JSON objects: a spool already holds them
    (read back lazily); a list of figures is written out."""
    return results if isinstance(results, Spool) else [r.as_json() for r in results]


def _manager(spec: ManagerSpec, conversations: Spool | list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": spec.name,
        "target": spec.target,
        "config": dict(spec.config),
        "form": spec.form,
        "totals": totals(conversations),
        "conversations": conversations,
    }


def merge(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Shards' reports joined into one: each manager's conversations put together and its
    totals summed again. ValueError when they are not shards of one replay."""
    if not reports:
        raise ValueError("no report to merge")
    first = reports[0]
    names = [m["name"] for m in first["managers"]]
    conversations: dict[str, list[Any]] = {name: [] for name in names}
    notes: set[str] = set()
    skipped: dict[tuple[str, str], dict[str, Any]] = {}
    for part in reports:
        if [m["name"] for m in part["managers"]] != names:
            raise ValueError("their managers differ: merge the shards of one replay")
        for manager in part["managers"]:
            conversations[manager["name"]].extend(manager["conversations"])
        notes.update(part["notes"])
        for problem in part.get("skipped", ()):  # every shard read the whole recording
            skipped.setdefault((problem["where"], problem["reason"]), problem)
    return {
        "version": VERSION,
        "tool": "ctxkit replay",
        "shard": None,
        "conversations": sum(part["conversations"] for part in reports),
        "notes": sorted(notes),
        "skipped": list(skipped.values()),
        "managers": [
            {
                **manager,
                "totals": totals(conversations[manager["name"]]),
                "conversations": conversations[manager["name"]],
            }
            for manager in first["managers"]
        ],
    }


@dataclass(frozen=True, slots=True)
class Threshold:
    """``--fail-if METRIC OP VALUE``: ``tokens>recorded``, ``references<0.9``,
    ``billed>1.1*recorded``, ``cost>25``, ``prefix<0.5``."""

    metric: str
    op: str
    factor: float
    against_recorded: bool
    text: str

    def broken(self, figures: Mapping[str, Any], recorded: Mapping[str, Any]) -> bool | None:
        """Whether the figures pass the threshold; None when a figure it needs is unknown
        (no reference in any answer, no --price for a model)."""
        key = _METRICS[self.metric]
        value = figures.get(key)
        limit = recorded.get(key) if self.against_recorded else 1.0
        if value is None or limit is None:
            return None
        limit = self.factor * limit
        return value > limit if self.op == ">" else value < limit


_METRICS = {
    "tokens": "tokens_sent",
    "billed": "billed_tokens",
    "cost": "cost",
    "references": "references_kept",
    "prefix": "prefix_kept",
}
_THRESHOLD = re.compile(
    r"^(?P<metric>[a-z]+)\s*(?P<op>[<>])\s*(?:(?P<factor>\d+(?:\.\d+)?)\s*\*?\s*)?"
    r"(?P<recorded>recorded)?$"
)


def parse_threshold(text: str) -> Threshold:
    """A ``--fail-if`` expression; ValueError naming what is wrong."""
    match = _THRESHOLD.match(text.strip())
    if not match or (match["factor"] is None and match["recorded"] is None):
        raise ValueError(
            f"{text!r} is not METRIC<VALUE or METRIC>VALUE (metrics: {', '.join(_METRICS)}; "
            "a value is a number, 'recorded', or a factor of it: 1.1*recorded)"
        )
    if match["metric"] not in _METRICS:
        raise ValueError(
            f"{text!r}: no metric {match['metric']!r}; the metrics: " + ", ".join(_METRICS)
        )
    factor = float(match["factor"]) if match["factor"] is not None else 1.0
    return Threshold(match["metric"], match["op"], factor, match["recorded"] is not None, text)


def failures(report: Mapping[str, Any], thresholds: Sequence[Threshold]) -> list[str]:
    """Why the gate fails, one sentence each: a manager other than ``recorded`` that raised
    or stopped in a conversation (its figures are not the whole replay's), with a required
    finding, or past a ``--fail-if`` threshold."""
    recorded = next((m["totals"] for m in report["managers"] if m["target"] == RECORDED), {})
    said = []
    for manager in report["managers"]:
        if manager["target"] == RECORDED:
            continue
        said.extend(_did_not_finish(manager))
        figures = manager["totals"]
        if figures["required_findings"]:
            said.append(
                f"{manager['name']}: {figures['required_findings']} required finding(s) "
                "(a request the provider would refuse, or history reordered)"
            )
        for threshold in thresholds:
            broken = threshold.broken(figures, recorded)
            if broken is None:
                said.append(
                    f"{manager['name']}: {threshold.text} cannot be judged: no {threshold.metric} "
                    "figure"
                    + (
                        " (give --price MODEL=DOLLARS for every model)"
                        if threshold.metric == "cost"
                        else ""
                    )
                )
            elif broken:
                said.append(f"{manager['name']}: {threshold.text}")
    return said


def _did_not_finish(manager: Mapping[str, Any]) -> list[str]:
    """``X stopped in 3 of 40 conversation(s): ...`` (its process ended) and ``X failed in
    ...`` (it raised, or answered what is no view), each with the first one's sentence. The
    counts are the totals'; the conversations are read only until both firsts are found."""
    figures = manager["totals"]
    stopped = figures.get("stopped", 0)
    counts = {True: stopped, False: figures["errors"] - stopped}
    firsts: dict[bool, Mapping[str, Any]] = {}
    wanted = sum(1 for count in counts.values() if count)
    for conversation in manager["conversations"] if wanted else ():
        if conversation["error"]:
            firsts.setdefault(bool(conversation.get("stopped")), conversation)
            if len(firsts) == wanted:
                break
    return [
        f"{manager['name']}: {verb} in {counts[kind]} of {figures['conversations']} "
        f"conversation(s): in {first['key']} at {first['error']}"
        for kind, verb in ((True, "stopped"), (False, "failed"))
        if (first := firsts.get(kind)) is not None
    ]


SKIPPED_SHOWN = 5
"""Skipped records named under the table (all are in the JSON report)."""


def text_report(report: Mapping[str, Any], *, width: int = 120) -> str:
    """The comparison table, then where each candidate broke first, and the records of the
    recording that were skipped (counted, the first named with their file:line)."""
    from io import StringIO

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    skipped = report.get("skipped", [])
    table = Table(
        title=f"replayed {_plural(report['conversations'], 'conversation')}"
        + (f", {_plural(len(skipped), 'record')} skipped" if skipped else ""),
        box=box.SIMPLE_HEAD,
    )
    for column in (
        "manager",
        "requests",
        "tokens sent",
        "billed",
        "prefix kept",
        "refs kept",
        "compactions",
        "required",
        "errors",
    ):
        left = column == "manager"
        table.add_column(
            column, justify="left" if left else "right", no_wrap=True, min_width=len(column)
        )
    recorded = next((m["totals"] for m in report["managers"] if m["target"] == RECORDED), None)
    priced = all(m["totals"].get("cost") is not None for m in report["managers"])
    if priced:
        table.add_column("cost", justify="right", no_wrap=True)
    for manager in report["managers"]:
        figures = manager["totals"]
        ratio = (
            ""
            if not recorded or not recorded["tokens_sent"]
            else (f"{figures['tokens_sent'] / recorded['tokens_sent']:.2f}x")
        )
        table.add_row(
            Text(printable(manager["name"])),
            str(figures["requests"]),
            f"{figures['tokens_sent']:,}" + (f" ({ratio})" if ratio else ""),
            f"{figures['billed_tokens']:,.0f}",
            _share(figures["prefix_kept"]),
            _share(figures["references_kept"]),
            str(figures["compactions"]),
            str(figures["required_findings"]),
            str(figures["errors"]),
            *([f"${figures['cost']:,.4f}"] if priced else []),
        )
    out = StringIO()
    console = Console(file=out, width=width, force_terminal=False, color_system=None)
    console.print(table)

    def say(line: str) -> None:
        """A line under the table: recorded text printable, never read as markup."""
        console.print(printable(line), markup=False, highlight=False)

    for manager in report["managers"]:
        for conversation in manager["conversations"]:
            first = next((f for f in conversation["findings"] if f["level"] == "required"), None)
            if first is not None:
                say(
                    f"{manager['name']}: conversation {conversation['key']}, request "
                    f"{first['request']}: {first['property']}: {first['message']}"
                )
                break
        for conversation in manager["conversations"]:
            if conversation["error"]:
                say(
                    f"{manager['name']}: conversation {conversation['key']} stopped at "
                    f"{conversation['error']}"
                )
                break
    for problem in skipped[:SKIPPED_SHOWN]:
        say(
            f"skipped {problem['where']}: {problem['reason']}"
            + (f" ({problem['hint']})" if problem.get("hint") else "")
        )
    if len(skipped) > SKIPPED_SHOWN:
        say(
            f"... and {_plural(len(skipped) - SKIPPED_SHOWN, 'more skipped record')} "
            "(all of them in --report-json)"
        )
    for note in report["notes"]:
        say(f"note: {note}")
    return out.getvalue().rstrip()


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


SHOWN = 30
"""Conversations drawn on the page: those with findings first, then the longest."""


def _most_telling(
    managers: Sequence[Mapping[str, Any]],
) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """The :data:`SHOWN` conversations the page draws, best first (the most findings over
    every manager, then the most requests, then by key), each with every manager's figures;
    and how many conversations there are. The managers list the conversations in one order,
    so they are read side by side and only the best are kept: a long replay's figures are
    never all in memory. (Merged shards list them in one order too; where the orders
    differ, conversations are matched by key.)"""
    best: list[tuple[tuple[int, int, str], dict[str, Any]]] = []
    unmatched: dict[str, dict[str, Any]] = {}
    total = 0

    def keep(per_manager: dict[str, Any]) -> None:
        key = next(iter(per_manager.values()))["key"]
        best.append((_rank(per_manager, key), per_manager))
        if len(best) >= 2 * SHOWN:
            best.sort(key=lambda entry: entry[0])
            del best[SHOWN:]

    for row in zip(*(m["conversations"] for m in managers), strict=True):
        if len({c["key"] for c in row}) > 1:
            for manager, conversation in zip(managers, row, strict=True):
                unmatched.setdefault(conversation["key"], {})[manager["name"]] = conversation
            continue
        total += 1
        keep({m["name"]: c for m, c in zip(managers, row, strict=True)})
    for per_manager in unmatched.values():
        total += 1
        keep(per_manager)
    best.sort(key=lambda entry: entry[0])
    return [(rank[2], per_manager) for rank, per_manager in best[:SHOWN]], total


def _rank(per_manager: Mapping[str, Mapping[str, Any]], key: str) -> tuple[int, int, str]:
    """Smaller first: the most findings over every manager, the most requests, the key."""
    return (
        -sum(len(c["findings"]) for c in per_manager.values()),
        -max(c["requests"] for c in per_manager.values()),
        key,
    )


def write_html(
    report: Mapping[str, Any],
    path: Any,
    views: Mapping[tuple[str, str], tuple[int, list[Any]]] | None = None,
) -> None:
    """One self-contained page: the comparison, the shares as bars, and per conversation the
    tokens each manager sent per request, its findings and (``views``: by manager and
    conversation key) the view a candidate would have sent where it first broke. Rendered by
    Jinja2 with autoescaping on: recorded text can never become markup."""
    import json

    from jinja2 import Environment, PackageLoader, select_autoescape
    from markupsafe import Markup

    from ctxkit.replay.charts import COLOURS, bars, lines

    managers = report["managers"]
    ranked, total = _most_telling(managers)
    shown = []
    for key, per_manager in ranked:
        first = next(iter(per_manager.values()))
        chart = lines(
            {name: c["tokens"] for name, c in per_manager.items()},
            first.get("budgets", []),
            breaks={
                name: sorted({f["request"] for f in c["findings"] if f["level"] == "required"})
                for name, c in per_manager.items()
            },
        )
        shown.append(
            {
                "key": key,
                "chart": Markup(chart),
                "findings": [(name, f) for name, c in per_manager.items() for f in c["findings"]],
                "views": [
                    (name, request, json.dumps(view, indent=2, ensure_ascii=False))
                    for (name, at), (request, view) in (views or {}).items()
                    if at == key
                ],
            }
        )
    recorded = next((m["totals"] for m in managers if m["target"] == RECORDED), None)
    environment = Environment(
        loader=PackageLoader("ctxkit.replay", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    page = environment.get_template("replay.html.j2").render(
        conversations=report["conversations"],
        managers=managers,
        notes=report["notes"],
        shard=report.get("shard"),
        colours=COLOURS,
        recorded_tokens=recorded["tokens_sent"] if recorded else 0,
        prefix_chart=Markup(
            bars({m["name"]: m["totals"]["prefix_kept"] for m in managers}, "prefix kept")
        ),
        references_chart=Markup(
            bars({m["name"]: m["totals"]["references_kept"] for m in managers}, "references kept")
        ),
        shown=shown,
        hidden=max(0, total - SHOWN),
    )
    path.write_text(page, encoding="utf-8")
