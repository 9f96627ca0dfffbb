"""``ctxkit survey``: the suite against every installed adapter (and any targets named), in
parallel, written as a compatibility matrix in Markdown, HTML and JSON."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxkit.cli.errors import UsageError
from ctxkit.cli.options import DEFAULT_SEED, check_writable_folder
from ctxkit.wording import plural

if TYPE_CHECKING:
    from ctxkit.survey.matrix import Matrix, Row

__all__ = ["add_parser"]

FORMATS = ("md", "html", "json")

DESCRIPTION = """\
Run the conformance suite against every adapter whose library is installed (see
`ctxkit conformance --list-adapters`) and any TARGETs named, each in a process of its own,
--jobs at a time, and write a compatibility matrix (library and version x property) into
--out: matrix.md (for a README or an issue), matrix.html (one self-contained page: sort by
any column, click a failure for its verified reproducer) and matrix.json, with each failure's
reproducer script under reproducers/.
"""

EPILOG = """\
Every failure a library is known for is labelled: a real bug (with the reason), an arguable
design choice (with the --allow that accepts it) or a limitation of ctxkit's adapter.
--bug-reports DIR writes, for each real bug, an upstream-ready report whose reproducer uses
only the library's own types.

exit codes: 0 every target passes its required properties; 1 a target fails one, or could
not be checked; 2 bad usage or nothing to survey.

examples:
  ctxkit survey                                   # every installed adapter
  ctxkit survey --out docs/survey --jobs 2
  ctxkit survey mypkg.context:Mine ./manager.mjs --no-adapters
  ctxkit survey --python .venvs/autogen/bin/python  # + adapters installed only there
"""


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "survey",
        help="check every installed adapter (and named targets) and write a compatibility matrix",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("targets", nargs="*", metavar="TARGET", help="more targets to check")
    parser.add_argument(
        "--no-adapters",
        dest="adapters",
        action="store_false",
        help="leave out the adapters installed here (not those of --python)",
    )
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="PATH",
        help="also survey the adapters whose library is installed for this interpreter (an "
        "environment of its own, with ctxkit; for libraries that conflict with others); "
        "repeatable",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("ctxkit-survey"), metavar="DIR", help="(ctxkit-survey)"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="targets checked at once (the number of cores)",
    )
    parser.add_argument("--profile", default="default", choices=["quick", "default", "thorough"])
    parser.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help=f"Hypothesis seed for every run ({DEFAULT_SEED})",
    )
    parser.add_argument(
        "--deadline", type=float, default=300.0, metavar="S", help="each run's deadline (300)"
    )
    parser.add_argument(
        "--outputs",
        default=",".join(FORMATS),
        metavar="LIST",
        help="which of md,html,json to write (all)",
    )
    parser.add_argument(
        "--bug-reports",
        type=Path,
        metavar="DIR",
        help="write an upstream-ready report for each failure that is a real library bug",
    )
    parser.set_defaults(run=run_survey)


def run_survey(args: argparse.Namespace) -> int:
    import math

    from ctxkit.survey.matrix import Matrix
    from ctxkit.survey.run import Progress, survey
    from ctxkit.survey.subjects import (
        EnvironmentUnusable,
        adapter_subjects,
        bug_reports,
        named_subject,
        subjects_in,
    )

    formats = [f.strip() for f in args.outputs.split(",") if f.strip()]
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown or not formats:
        raise UsageError(f"--outputs takes a list of md, html, json; got {args.outputs!r}")
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    if not math.isfinite(args.deadline) or args.deadline <= 0:
        raise UsageError(f"--deadline must be a positive number of seconds, got {args.deadline}")
    subjects = adapter_subjects() if args.adapters else []
    for python in args.python:
        try:
            subjects += subjects_in(python, {s.target for s in subjects})
        except EnvironmentUnusable as exc:
            raise UsageError(str(exc)) from None
    surveyed = {s.target for s in subjects}
    subjects += [named_subject(t) for t in dict.fromkeys(args.targets) if t not in surveyed]
    if not subjects:
        raise UsageError(
            "nothing to survey: no adapter's library is installed (see `ctxkit conformance "
            "--list-adapters`) and no TARGET was named"
        )
    check_writable_folder("--out", args.out)
    jobs = min(args.jobs, len(subjects))
    print(
        f"ctxkit survey: {plural(len(subjects), 'target')}, {jobs} at a time, "
        f"profile {args.profile}, seed {args.seed}",
        file=sys.stderr,
        flush=True,
    )
    progress = Progress(len(subjects))
    options = ["--profile", args.profile, "--seed", str(args.seed)]
    rows = survey(subjects, jobs=jobs, options=options, deadline=args.deadline, progress=progress)
    matrix = Matrix(
        rows=rows,
        created=datetime.date.today().isoformat(),
        ctxkit_version=_version(),
        machine=f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        profile=args.profile,
        seed=args.seed,
    )
    written = write(matrix, args.out, formats)
    for path in written:
        print(f"  wrote {path}", file=sys.stderr)
    if args.bug_reports is not None:
        for path in bug_reports(subjects, rows, args.bug_reports):
            print(f"  wrote {path}", file=sys.stderr)
    failing = [r for r in rows if r.problem is not None or r.verdict != "pass"]
    passing = len(rows) - len(failing)
    print(f"{passing} of {plural(len(rows), 'target')} pass every required property")
    return 1 if failing else 0


def write(matrix: Matrix, out: Path, formats: list[str]) -> list[Path]:
    """The matrix files, and each failure's reproducer under ``reproducers/``."""
    from ctxkit.survey.render import to_html, to_json, to_markdown

    out.mkdir(parents=True, exist_ok=True)
    for row in matrix.rows:
        _write_reproducers(row, out)
    render = {"md": to_markdown, "html": to_html, "json": to_json}
    written = []
    for name in formats:
        path = out / f"matrix.{name}"
        path.write_text(render[name](matrix), encoding="utf-8")
        written.append(path)
    return written


def _write_reproducers(row: Row, out: Path) -> None:
    from ctxkit.conformance.reports.reproducer import file_name
    from ctxkit.survey.matrix import slug

    for property_id, cell in row.cells.items():
        if cell.reproducer and cell.status in ("failed", "error"):
            name = file_name(property_id, row.target)  # `pytest reproducers/` collects it
            relative = Path("reproducers") / slug(row.target) / name
            (out / relative).parent.mkdir(parents=True, exist_ok=True)
            (out / relative).write_text(cell.reproducer, encoding="utf-8")
            cell.reproducer_path = relative.as_posix()


def _version() -> str:
    from ctxkit import __version__

    return __version__
