"""The matrix as Markdown (for a README or an issue), as one self-contained HTML page
(sortable; a failure's reproducer one click away) and as JSON."""

from __future__ import annotations

import html
import json

from ctxkit.survey.matrix import Cell, Matrix

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
    head = ["target", "version", "verdict", *ids]
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
            + " | ".join([f"`{_md(row.target)}`", _md(row.version or "-"), verdict, *cells])
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


_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1b1f24; }
h1 { font-size: 1.3rem; } p.meta { color: #57606a; }
table { border-collapse: collapse; }
th, td { border: 1px solid #d0d7de; padding: .3rem .5rem; text-align: center; }
th { background: #f6f8fa; cursor: pointer; user-select: none; white-space: nowrap; }
th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
td.target { text-align: left; font-family: ui-monospace, monospace; }
td.passed { background: #dafbe1; } td.failed { background: #ffebe9; font-weight: 600; }
td.error { background: #fff8c5; } td.skipped, td.not-run { color: #57606a; }
td.below { background: #fff1e5; }
button.repro { font: inherit; background: none; border: 0; color: #cf222e;
  text-decoration: underline; cursor: pointer; padding: 0; }
dialog { max-width: min(90vw, 60rem); } dialog pre { max-height: 60vh; overflow: auto;
  background: #f6f8fa; padding: .75rem; }
"""

_SCRIPT = """
document.querySelectorAll("th[data-key]").forEach((header, column) => {
  header.addEventListener("click", () => {
    const body = document.querySelector("tbody");
    const rows = Array.from(body.rows);
    const ascending = header.getAttribute("aria-sort") !== "ascending";
    document.querySelectorAll("th").forEach((h) => h.removeAttribute("aria-sort"));
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    const key = (row) => row.cells[column].dataset.sort || row.cells[column].textContent;
    rows.sort((a, b) => key(a).localeCompare(key(b), undefined, { numeric: true }));
    if (!ascending) rows.reverse();
    rows.forEach((row) => body.appendChild(row));
  });
});
document.querySelectorAll("button.repro").forEach((button) => {
  button.addEventListener("click", () => {
    document.getElementById(button.dataset.dialog).showModal();
  });
});
document.querySelectorAll("dialog button.close").forEach((button) => {
  button.addEventListener("click", () => button.closest("dialog").close());
});
"""

_ORDER = {"failed": "0", "error": "1", "below": "2", "skipped": "3", "not run": "4", "passed": "5"}


def to_html(matrix: Matrix) -> str:
    """One page, no external resources: headers sort the rows; a failed cell opens a dialog
    with the sentence, what is known about it and the reproducer script."""
    ids = [i for i, _ in matrix.properties]
    levels = dict(matrix.properties)
    headers = ["target", "version", "verdict", *ids]
    head = "".join(
        f'<th data-key="{html.escape(h)}" title="{html.escape(levels.get(h, ""))}">'
        f"{html.escape(h)}</th>"
        for h in headers
    )
    body, dialogs = [], []
    for number, row in enumerate(matrix.rows):
        verdict = row.verdict if row.problem is None else "not checked"
        cells = [
            f'<td class="target" title="{html.escape(row.problem or "")}">'
            f"{html.escape(row.target)}</td>",
            f"<td>{html.escape(row.version or '-')}</td>",
            f'<td data-sort="{html.escape(verdict)}">{html.escape(verdict)}</td>',
        ]
        for property_id in ids:
            cell = row.cells.get(property_id) or Cell("not run", levels.get(property_id, ""))
            word = html.escape(_word(cell))
            css = cell.status.replace(" ", "-")
            order = _ORDER.get(cell.status, "6")
            if cell.status in ("failed", "error"):
                dialog_id = f"r{number}-{property_id}"
                dialogs.append(_dialog(dialog_id, row.target, property_id, cell))
                word = (
                    f'<button class="repro" data-dialog="{dialog_id}" '
                    f'title="{html.escape(cell.message)}">{word}</button>'
                )
            cells.append(f'<td class="{css}" data-sort="{order}">{word}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    meta = (
        f"ctxkit {matrix.ctxkit_version}, {matrix.created}, profile {matrix.profile}, seed "
        f"{matrix.seed}, {matrix.machine}. Click a header to sort; click a failure for its "
        "reproducer."
    )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>ctxkit compatibility matrix</title>
<style>{_STYLE}</style>
</head>
<body>
<h1>ctxkit compatibility matrix</h1>
<p class="meta">{html.escape(meta)}</p>
<table>
<thead><tr>{head}</tr></thead>
<tbody>
{chr(10).join(body)}
</tbody>
</table>
{chr(10).join(dialogs)}
<script>{_SCRIPT}</script>
</body>
</html>
"""


def _dialog(dialog_id: str, target: str, property_id: str, cell: Cell) -> str:
    known = ""
    if cell.finding is not None:
        kind = _FINDING.get(cell.finding.kind, cell.finding.kind)
        allow = f" Accept it with --allow {cell.finding.allow}." if cell.finding.allow else ""
        known = f"<p><strong>{html.escape(kind)}</strong>: {html.escape(cell.finding.reason)}"
        known += f"{html.escape(allow)}</p>"
    script = cell.reproducer or "(no reproducer)"
    verification = html.escape(cell.verification or "not verified")
    return (
        f'<dialog id="{dialog_id}"><h2>{html.escape(target)}: {html.escape(property_id)}</h2>'
        f"<p>{html.escape(cell.message)}</p>{known}<p>Reproducer ({verification}):</p>"
        f'<pre class="script">{html.escape(script)}</pre>'
        f'<button class="close">Close</button></dialog>'
    )
