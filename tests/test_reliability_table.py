"""The reliability table (docs/reliability.md) names, for every fault, the test that provokes
it: each named test must exist, so that the table cannot promise what nothing checks."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _reliability_rows() -> list[str]:
    page = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    return [line for line in page.splitlines() if line.startswith("| ") and "---" not in line]


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    }


def test_every_test_the_reliability_table_names_exists():
    rows = _reliability_rows()[1:]  # after the header
    assert len(rows) >= 20
    named = 0
    for row in rows:
        cell = row.rstrip(" |").rsplit(" | ", 1)[1]
        current: Path | None = None
        for reference in re.findall(r"`([^`]+)`", cell):
            file, _, name = reference.partition("::")
            if file:
                current = ROOT / file
                assert current.exists(), f"{row}: no {file}"
            if name:
                assert current is not None, row
                assert name in _tests_in(current), f"{row}: no {name} in {current.name}"
                named += 1
    assert named >= 20
