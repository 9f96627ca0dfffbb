"""Write the docs' tables of names from the code and data that define them, so the docs cannot
drift from what ctxkit exports.

Each table sits in a page between two markers, ``<!-- generated: NAME -->`` and ``<!-- end
generated: NAME -->``; everything between them is rewritten, the rest of the page is prose
kept by hand:

* ``docs/telemetry.md``: the metrics (:data:`ctxkit.telemetry.names.METRICS`), the metrics of
  ``ctxkit watch`` (``AUDIT_METRICS``, ``AUDIT_QUEUE_DEPTH``), the span and metric attributes
  (``ATTRIBUTES``) and the retired metric names (``RETIRED``);
* ``docs/conformance/properties.md``: the properties and the ``--allow`` relaxations, from the
  language-neutral catalogue ``conformance/properties.json``.

It also copies the inspector's screenshot (a snapshot test's SVG) to ``docs/assets/``; that
copy is a picture, not a contract, so ``--check`` leaves it alone.

Usage::

    python docs/generate.py           # rewrite the tables (and the picture)
    python docs/generate.py --check   # exit 1 if a committed table differs from the code's
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from ctxkit.telemetry.names import (  # noqa: E402
    ATTRIBUTES,
    AUDIT_METRICS,
    AUDIT_QUEUE_DEPTH,
    METRICS,
    RETIRED,
)

__all__ = ["BLOCKS", "StaleDocs", "main", "render_page", "stale_pages"]

DOCS = ROOT / "docs"
CATALOGUE = ROOT / "conformance" / "properties.json"
SCREENSHOT = (
    ROOT / "tests" / "__snapshots__" / "test_tui_snapshots" / ("test_main_screen_at_160x48.svg")
)
PICTURE = DOCS / "assets" / "inspector.svg"


class StaleDocs(Exception):
    """A page lacks the markers of a table it should hold."""


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _code(name: str) -> str:
    return f"`{name}`"


def metrics_table() -> str:
    """Every metric of :data:`~ctxkit.telemetry.names.METRICS`, as ``/metrics`` and OTel show it."""
    return _table(
        ("Prometheus", "type", "labels", "OpenTelemetry", "meaning"),
        (
            (
                _code(m.exposed),
                m.kind,
                ", ".join(map(_code, m.labels)) or "-",
                f"{_code(m.otel)} ({m.unit})" if m.otel else "-",
                m.help,
            )
            for m in METRICS
        ),
    )


def audit_metrics_table() -> str:
    """The metrics of ``ctxkit watch`` (:data:`~ctxkit.telemetry.names.AUDIT_METRICS` and the
    queue depth gauge), as ``/metrics`` shows them."""
    return _table(
        ("Prometheus", "type", "labels", "meaning"),
        (
            (_code(m.exposed), m.kind, ", ".join(map(_code, m.labels)) or "-", m.help)
            for m in (*AUDIT_METRICS, AUDIT_QUEUE_DEPTH)
        ),
    )


def attributes_table() -> str:
    return _table(("attribute", "meaning"), ((_code(k), v) for k, v in ATTRIBUTES.items()))


def retired_table() -> str:
    return _table(("retired", "use instead"), ((_code(k), v) for k, v in RETIRED.items()))


def _catalogue() -> dict:
    return json.loads(CATALOGUE.read_text(encoding="utf-8"))


def properties_table() -> str:
    return _table(
        ("id", "level", "what must hold"),
        ((_code(p["id"]), p["level"], p["holds"]) for p in _catalogue()["properties"]),
    )


def levels_table() -> str:
    return _table(("level", "what a failure does"), _catalogue()["levels"].items())


def relaxations_table() -> str:
    def usage(r: dict) -> str:
        return r["name"] if r["value"] is None else f"{r['name']}={r['value']}"

    return _table(
        ("`--allow`", "relaxes", "what it allows"),
        ((_code(usage(r)), _code(r["relaxes"]), r["allows"]) for r in _catalogue()["relaxations"]),
    )


BLOCKS: dict[str, dict[str, Callable[[], str]]] = {
    "telemetry.md": {
        "metrics": metrics_table,
        "audit-metrics": audit_metrics_table,
        "attributes": attributes_table,
        "retired": retired_table,
    },
    "conformance/properties.md": {
        "levels": levels_table,
        "properties": properties_table,
        "relaxations": relaxations_table,
    },
}
"""Page (under docs/) -> table name -> what writes it."""


def render_page(text: str, blocks: dict[str, Callable[[], str]], page: str = "page") -> str:
    """``text`` with each named block rewritten between its markers."""
    for name, make in blocks.items():
        pattern = re.compile(
            rf"(<!-- generated: {re.escape(name)} -->\n)(?:.*?\n)?(<!-- end generated: "
            rf"{re.escape(name)} -->)",
            re.DOTALL,
        )
        if not pattern.search(text):
            raise StaleDocs(
                f"docs/{page} has no '<!-- generated: {name} -->' ... '<!-- end generated: "
                f"{name} -->' markers for its {name} table"
            )
        body = make()
        # Blank lines around the table: Markdown would read it as part of the HTML comment's block.
        block = f"\n{body}\n\n"
        text = pattern.sub(lambda m, block=block: m[1] + block + m[2], text, count=1)
    return text


def stale_pages() -> dict[Path, str]:
    """Each page whose tables differ from the code's, with the text it should have."""
    stale = {}
    for page, blocks in BLOCKS.items():
        path = DOCS / page
        current = path.read_text(encoding="utf-8")
        wanted = render_page(current, blocks, page)
        if wanted != current:
            stale[path] = wanted
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed table is stale")
    args = parser.parse_args(argv)
    try:
        stale = stale_pages()
    except StaleDocs as exc:
        print(f"docs/generate.py: {exc}", file=sys.stderr)
        return 2
    if args.check:
        for path in stale:
            print(
                f"{path.relative_to(ROOT)} is stale: run python docs/generate.py and commit it",
                file=sys.stderr,
            )
        if not stale:
            print("the docs' generated tables are up to date")
        return 1 if stale else 0
    for path, text in stale.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    PICTURE.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SCREENSHOT, PICTURE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
