"""What a survey checks by default (every adapter whose library is installed), and the
upstream bug reports for what it finds."""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from ctxkit.survey.matrix import Row, slug
from ctxkit.survey.run import Subject

__all__ = ["adapter_subjects", "bug_reports"]


def adapter_subjects() -> list[Subject]:
    """A subject per registered adapter whose library is installed, with its known findings."""
    from ctxkit.adapters import ADAPTERS, JS_ADAPTERS, installed_version, npm_version

    found = [
        Subject(
            a.name, library=a.package, version=npm_version(a.package), findings=dict(a.findings)
        )
        for a in JS_ADAPTERS
        if shutil.which("node") and npm_version(a.package)
    ]
    for adapter in ADAPTERS:
        installed = installed_version(adapter)
        if installed is None:
            continue
        found.append(
            Subject(
                adapter.name,
                library=adapter.distribution,
                version=installed,
                findings=dict(getattr(adapter, "findings", {}) or {}),
            )
        )
    return found


def _function(path: str) -> Callable[..., str]:
    module_name, name = path.split(":")
    return getattr(importlib.import_module(module_name), name)


def bug_reports(subjects: Sequence[Subject], rows: Sequence[Row], folder: Path) -> list[Path]:
    """For each failure known as a real bug, the adapter's upstream report (its reproducer
    in the library's own types, no ctxkit), written into ``folder``."""
    try:
        from ctxkit.adapters import by_name
    except ImportError:
        return []
    written = []
    for subject, row in zip(subjects, rows, strict=True):
        adapter = by_name(subject.target)
        render = _function(adapter.bug_report) if adapter and adapter.bug_report else None
        for property_id, cell in row.cells.items():
            if cell.finding is None or cell.finding.kind != "bug" or render is None:
                continue
            text = render(property_id, cell)
            if not text:
                continue
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{slug(row.target)}-{property_id}.md"
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written
