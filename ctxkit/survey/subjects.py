"""What a survey checks by default (every adapter whose library is installed), and the
upstream bug reports for what it finds."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ctxkit.survey.matrix import Row, slug
from ctxkit.survey.run import Subject

__all__ = [
    "adapter_subjects",
    "bug_reports",
    "installed_versions",
    "named_subject",
    "render_request",
    "report_text",
    "subjects_in",
]

_INSTALLED = (
    "import json; from ctxkit.survey.subjects import installed_versions; "
    "print(json.dumps(installed_versions()))"
)


class EnvironmentUnusable(Exception):
    """A --python interpreter that cannot run, or has no ctxkit."""


def subjects_in(python: str, skip: set[str]) -> list[Subject]:
    """A subject per adapter whose library is installed for the interpreter ``python`` (an
    environment of its own, with ctxkit installed), checked through that interpreter's worker;
    adapters named in ``skip`` (already surveyed here) are left out."""
    from ctxkit.adapters import by_name

    try:
        done = subprocess.run(
            [python, "-c", _INSTALLED], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentUnusable(f"--python {python}: cannot run it ({exc})") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise EnvironmentUnusable(
            f"--python {python}: cannot list its adapters ({last}); install ctxkit with the "
            "library's extra there, e.g. pip install 'ctxkit-llm[autogen]'"
        )
    return [
        _python_subject(adapter, installed, python)
        for name, installed in json.loads(done.stdout).items()
        if installed is not None and name not in skip and (adapter := by_name(name)) is not None
    ]


def installed_versions() -> dict[str, str | None]:
    """Each Python adapter's name and its library's installed version here (None: absent)."""
    from ctxkit.adapters import ADAPTERS, installed_version

    return {adapter.name: installed_version(adapter) for adapter in ADAPTERS}


def _python_subject(adapter: Any, version: str, python: str | None = None) -> Subject:
    return Subject(
        adapter.name,
        library=adapter.distribution,
        version=version,
        findings=dict(adapter.findings),
        python=python,
    )


def named_subject(target: str) -> Subject:
    """A target named on the command line: an adapter's name is surveyed like a discovered
    adapter (its library, version and known findings, and so its labels and bug reports);
    anything else as a target of its own."""
    from ctxkit.adapters import JS_ADAPTERS, by_name, installed_version, npm_version

    adapter = by_name(target)
    if adapter is not None:
        return _python_subject(adapter, installed_version(adapter) or "not installed")
    script = next((a for a in JS_ADAPTERS if a.name == target), None)
    if script is not None:
        return Subject(
            script.name,
            library=script.package,
            version=npm_version(script.package) or "not installed",
            findings=dict(script.findings),
        )
    return Subject(target)


def adapter_subjects() -> list[Subject]:
    """A subject per registered adapter whose library is installed, with its known findings."""
    from ctxkit.adapters import JS_ADAPTERS, by_name, npm_version

    found = [
        Subject(
            a.name, library=a.package, version=npm_version(a.package), findings=dict(a.findings)
        )
        for a in JS_ADAPTERS
        if shutil.which("node") and npm_version(a.package)
    ]
    found += [
        _python_subject(by_name(name), installed)
        for name, installed in installed_versions().items()
        if installed is not None
    ]
    return found


def _function(path: str) -> Callable[..., str]:
    module_name, name = path.split(":")
    return getattr(importlib.import_module(module_name), name)


def render_request(request: dict[str, Any]) -> str:
    """A report rendered from a request another process sent (``report_text``'s other end):
    the function's ``module:attr``, the property and the counterexample's trace."""
    cell = SimpleNamespace(trace=request["trace"])
    return _function(request["function"])(request["property"], cell)


_RENDER = (
    "import json, sys; from ctxkit.survey.subjects import render_request; "
    "sys.stdout.write(render_request(json.load(sys.stdin)))"
)


def report_text(subject: Subject, function: str, property_id: str, cell: Any) -> str:
    """The report text, rendered where the library is: here, or in the subject's own
    environment. Empty (with a warning) if it cannot be rendered."""
    try:
        if subject.python is None:
            return _function(function)(property_id, cell)
        request = {"function": function, "property": property_id, "trace": cell.trace}
        done = subprocess.run(
            [subject.python, "-c", _RENDER],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return done.stdout
    except Exception as exc:  # a report is a courtesy: the matrix stands without it
        sys.stderr.write(
            f"ctxkit survey: no bug report for {subject.target} {property_id}: {exc}\n"
        )
        return ""


def bug_reports(subjects: Sequence[Subject], rows: Sequence[Row], folder: Path) -> list[Path]:
    """For each failure known as a real bug, the adapter's upstream report (its reproducer
    in the library's own types, no ctxkit), written into ``folder``."""
    from ctxkit.adapters import any_named

    written: list[Path] = []
    for subject, row in zip(subjects, rows, strict=True):
        adapter = any_named(subject.target)
        said: set[str] = set()  # one report per fault, though it fails several properties
        if adapter is None or adapter.bug_report is None:
            continue
        for property_id, cell in row.cells.items():
            if cell.finding is None or cell.finding.kind != "bug":
                continue
            text = report_text(subject, adapter.bug_report, property_id, cell)
            if not text or text in said:
                continue
            said.add(text)
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{slug(row.target)}-{property_id}.md"
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written
