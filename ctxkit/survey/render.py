"""The matrix as Markdown (for a README or an issue), as one self-contained HTML page
(sortable; levels, verdicts and what each failure is shown in the table; a failure's
reproducer one click away) and as JSON."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ctxkit.survey.matrix import Cell, Matrix

if TYPE_CHECKING:
    from markupsafe import Markup

__all__ = ["to_html", "to_json", "to_markdown"]

_WORD = {
    "passed": "pass",
    "failed": "FAIL",
    "error": "error",
    "skipped": "skip",
    "below": "below",
    "not run": "-",
}

_FINDING = {"bug": "bug", "design": "design choice", "adapter": "adapter limitation"}


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_cell(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    word = _word(cell)
    if cell.status in ("failed", "error") and cell.reproducer_path:
        word = f"[{word}]({cell.reproducer_path})"
    if cell.status in ("failed", "error"):
        word = f"**{word}**"
    return word


def _word(cell: Cell) -> str:
    """What a cell says: pass, FAIL, ...; an advisory figure as a share, under its bar
    marked so."""
    if cell.figure is not None:
        share = f"{cell.figure:.0%}"
        return f"{share} (below)" if cell.status == "below" else share
    return _WORD.get(cell.status, cell.status)


def to_markdown(matrix: Matrix) -> str:
    """A table (library x property) and, under it, one line per failure: what it says and
    what it is (bug, design choice with its ``--allow``, adapter limitation)."""
    ids = [i for i, _ in matrix.properties]
    head = ["target", "version", "shapes", "verdict", *ids]
    lines = [
        f"ctxkit {matrix.ctxkit_version} survey, {matrix.created}, profile {matrix.profile}, "
        f"seed {matrix.seed}, {matrix.machine}",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join(" --- " for _ in head) + "|",
    ]
    for row in matrix.rows:
        cells = [_md_cell(row.cells.get(i)) for i in ids]
        verdict = row.verdict if row.problem is None else "not checked"
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{_md(row.target)}`",
                    _md(row.version or "-"),
                    _md(", ".join(row.shapes) or "-"),
                    verdict,
                    *cells,
                ]
            )
            + " |"
        )
    notes = []
    for row in matrix.rows:
        if row.problem:
            notes.append(f"- `{_md(row.target)}`: not checked: {_md(row.problem)}")
        for property_id in ids:
            cell = row.cells.get(property_id)
            if cell is None or cell.status not in ("failed", "error"):
                continue
            what = ""
            if cell.finding is not None:
                what = f" *{_FINDING.get(cell.finding.kind, cell.finding.kind)}*: "
                what += _md(cell.finding.reason)
                if cell.finding.allow:
                    what += f" (accept with `--allow {cell.finding.allow}`)"
                what = " -" + what
            verified = " (reproducer verified)" if cell.verified else ""
            notes.append(
                f"- `{_md(row.target)}` {property_id}: {_md(cell.message)}{verified}{what}"
            )
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def to_json(matrix: Matrix) -> str:
    return json.dumps(matrix.to_json(), indent=2, ensure_ascii=False) + "\n"


_VERDICT_CLASS = {
    "pass": "pass",
    "fail": "fail",
    "error": "error",
    "inconclusive": "inconclusive",
}
_ORDER = {"failed": "0", "error": "1", "below": "2", "skipped": "3", "not run": "4", "passed": "5"}


def to_html(matrix: Matrix) -> str:
    """One page, no external resources (``templates/matrix.html.j2``): headers sort the rows
    and say each property's level; a failure is coloured by its level and tagged with what
    is known of it (bug, design choice, adapter limitation), and opens a dialog with the
    sentence and the reproducer script. Rendered by Jinja2 with autoescaping on: what a
    target or its messages say can never become markup."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    environment = Environment(
        loader=PackageLoader("ctxkit.survey", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    environment.filters["breakable"] = _breakable
    ids = [i for i, _ in matrix.properties]
    levels = dict(matrix.properties)
    rows, dialogs = [], []
    for number, row in enumerate(matrix.rows):
        verdict = row.verdict if row.problem is None else "not checked"
        cells = []
        for property_id in ids:
            cell = row.cells.get(property_id) or Cell("not run", levels.get(property_id, ""))
            level = cell.level or levels.get(property_id, "")
            shown = {
                "css": f"{cell.status.replace(' ', '-')} {level}".strip(),
                "order": _ORDER.get(cell.status, "6"),
                "word": _word(cell),
                "message": cell.message,
                "dialog": None,
                "finding": None,
            }
            if cell.finding is not None:
                shown |= {
                    "finding": cell.finding.kind,
                    "finding_label": _FINDING.get(cell.finding.kind, cell.finding.kind),
                    "reason": cell.finding.reason,
                }
            if cell.status in ("failed", "error"):
                shown["dialog"] = f"r{number}-{property_id}"
                dialogs.append(_dialog(shown, row.target, property_id, level, cell))
            cells.append(shown)
        rows.append(
            {
                "target": row.target,
                "title": row.problem or row.name,
                "version": row.version or "-",
                "shapes": ", ".join(row.shapes) or "-",
                "verdict": verdict,
                "verdict_class": _VERDICT_CLASS.get(verdict, "not-checked"),
                "cells": cells,
            }
        )
    return environment.get_template("matrix.html.j2").render(
        ctxkit_version=matrix.ctxkit_version,
        created=matrix.created,
        profile=matrix.profile,
        seed=matrix.seed,
        machine=matrix.machine,
        properties=[{"id": i, "level": level} for i, level in matrix.properties],
        rows=rows,
        dialogs=dialogs,
    )


def _breakable(name: str) -> Markup:
    """A target that may wrap after its separators (``js:@langchain/core:trimMessages``),
    so the sticky column stays narrow; escaped, as everything is."""
    import re

    from markupsafe import Markup, escape

    return Markup("<wbr>").join(escape(part) for part in re.split(r"(?<=[:/._])", name))


def _dialog(
    shown: dict[str, Any], target: str, property_id: str, level: str, cell: Cell
) -> dict[str, Any]:
    finding = cell.finding
    return {
        "id": shown["dialog"],
        "target": target,
        "property": property_id,
        "level": level,
        "message": cell.message,
        "finding": finding is not None,
        "finding_label": shown.get("finding_label"),
        "reason": finding.reason if finding else "",
        "allow": finding.allow if finding else None,
        "verification": cell.verification or "not verified",
        "script": cell.reproducer or "(no reproducer)",
    }
