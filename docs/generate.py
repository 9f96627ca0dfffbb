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

It also writes what the commands print. An *output block* in ``README.md`` or any page of
``docs/`` names the command it shows, run from the repository's top or from a folder it
names, and optionally which of its lines it shows::

    <!-- generated: output in docs/examples: ctxkit audit requests.jsonl | lines 1,...,5 -->
    (the command's output, in a fenced text block)
    <!-- end generated: output -->

The command runs as ``python -m ctxkit ...`` (its standard output; every block's distinct
command once, in parallel); ``docs/examples/`` holds the files the docs' examples run on.
``| lines A-B,C,...`` keeps those lines (from 1; ``...`` shows an elision), ``| grep REGEX``
the lines that match. Absolute paths of the repository and of
temporary folders are written relative (or as ``/tmp/...``); what varies from run to run
(durations, dates, the version, the number of examples a time-bounded search drew) is
compared normalised, so a block is rewritten only when what it shows changed. A fenced
``text`` block that is no output block must be listed in :data:`EXCLUDED` with its reason:
``--check`` counts and lists them.

It also copies the inspector's screenshot (a snapshot test's SVG) to ``docs/assets/``; that
copy is a picture, not a contract, so ``--check`` leaves it alone.

Usage::

    python docs/generate.py           # rewrite the tables and outputs (and the picture)
    python docs/generate.py --check   # exit 1 if a committed table or output is stale
    python docs/generate.py --only tables   # the tables alone (no command is run)
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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

__all__ = [
    "BLOCKS",
    "EXCLUDED",
    "OutputBlock",
    "Run",
    "StaleDocs",
    "main",
    "output_blocks",
    "render_outputs",
    "render_page",
    "run_outputs",
    "stale_outputs",
    "stale_pages",
    "unlisted_text_blocks",
]

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


# -- what the commands print ----------------------------------------------------------------------

README = ROOT / "README.md"

EXCLUDED: tuple[tuple[str, str, str], ...] = (
    # (page, how its block starts ("" for every block of the page), why it is not generated)
    (
        "docs/benchmarks.md",
        "",
        "measurements of the benchmarks/ scripts on a stated machine: minutes of CPU each, and "
        "the figures, the point of the page, vary by machine and load",
    ),
    ("docs/conformance/index.md", "ctxkit conformance [", "a synopsis written by hand"),
    ("docs/conformance/survey.md", "ctxkit survey [", "a synopsis written by hand"),
    ("docs/audit.md", "ctxkit audit PATH", "a synopsis written by hand"),
    ("docs/audit.md", "ctxkit watch [", "a synopsis written by hand"),
    ("docs/dashboards.md", "ctxkit demo [", "a synopsis written by hand"),
    ("docs/reference/tokens.md", "ctxkit tokens [", "a synopsis written by hand"),
    ("docs/reference/persistence.md", "ctxkit contexts list", "a synopsis written by hand"),
)
"""The fenced ``text`` blocks that are not a command's output, or cannot be run here."""

_OUTPUT = re.compile(
    r"^<!-- generated: output (?P<spec>.+?) -->\n(?P<body>.*?)^<!-- end generated: output -->$",
    re.DOTALL | re.MULTILINE,
)
_SPEC = re.compile(
    r"^(?:in (?P<folder>\S+): )?(?P<command>ctxkit(?: .+?)?)(?P<filters>(?: \| .+)*)$"
)
_FENCE = re.compile(r"^```(?P<lang>\S*)\n(?P<text>.*?)^```$", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class OutputBlock:
    """One output block of a page: where it is, what it runs, and what it shows now."""

    page: str  # relative to the repository's top
    line: int  # the line of its opening marker
    folder: str  # where the command runs, relative to the top ("." for the top)
    command: str  # "ctxkit ...", as a user types it
    filters: tuple[str, ...]  # "lines 1-4,...", "grep REGEX"
    shown: str | None  # the fenced block's text now, or None when it has none

    @property
    def key(self) -> tuple[str, str]:
        return (self.folder, self.command)

    @property
    def name(self) -> str:
        where = "" if self.folder == "." else f"in {self.folder}: "
        return f"{self.page}:{self.line} ({where}{self.command})"


@dataclass(frozen=True)
class Run:
    """What a command printed: its exit code and standard output, paths made relative."""

    returncode: int
    stdout: str
    stderr: str


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def output_blocks(pages: Iterable[Path] | None = None) -> list[OutputBlock]:
    """Every output block of the README and the docs (or of ``pages``)."""
    blocks = []
    for path in _pages() if pages is None else pages:
        text = path.read_text(encoding="utf-8")
        page = str(path.relative_to(ROOT))
        for match in _OUTPUT.finditer(text):
            blocks.append(_block(page, text, match))
        if text.count("<!-- generated: output ") != len(_OUTPUT.findall(text)):
            raise StaleDocs(
                f"{page}: an output block's '<!-- end generated: output -->' is missing"
            )
    return blocks


def _block(page: str, text: str, match: re.Match[str]) -> OutputBlock:
    line = text.count("\n", 0, match.start()) + 1
    spec = _SPEC.match(match["spec"])
    if spec is None:
        raise StaleDocs(
            f"{page}:{line}: an output block names 'ctxkit ...' (after 'in FOLDER: ' if it runs "
            f"elsewhere), then '| lines ...' or '| grep ...': not {match['spec']!r}"
        )
    filters = tuple(f.strip() for f in spec["filters"].split(" | ") if f.strip())
    for f in filters:
        if not re.match(r"^(lines [0-9,.\- ]+|grep .+)$", f):
            raise StaleDocs(f"{page}:{line}: unknown filter {f!r} (lines A-B,C,... or grep REGEX)")
    folder = spec["folder"] or "."
    if not (ROOT / folder).is_dir():
        raise StaleDocs(f"{page}:{line}: the folder {folder} does not exist")
    fence = _FENCE.search(match["body"])
    return OutputBlock(page, line, folder, spec["command"], filters, fence and fence["text"])


def _environment() -> dict[str, str]:
    """The user's environment without what would change a run (ctxkit's own variables, a
    test's), with the repository importable and a fixed width."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXKIT_", "PYTEST_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(COLUMNS="100", NO_COLOR="1", TERM="dumb", PYTHONHASHSEED="0")
    return env


def _run(key: tuple[str, str]) -> Run:
    folder, command = key
    cwd = ROOT / folder
    argv = [sys.executable, "-m", "ctxkit", *shlex.split(command)[1:]]
    result = subprocess.run(
        argv,
        cwd=cwd,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return Run(result.returncode, _relative(result.stdout, cwd), _relative(result.stderr, cwd))


def _relative(text: str, cwd: Path) -> str:
    """Paths as a reader's own run would show them: the run's folder is ``.``, the
    repository's top the path to it, a temporary folder ``/tmp/...``."""
    text = text.replace(str(cwd) + os.sep, "").replace(str(cwd), ".")
    top = os.path.relpath(ROOT, cwd)
    text = text.replace(str(ROOT) + os.sep, "" if top == "." else top + os.sep)
    temp = re.escape(tempfile.gettempdir().rstrip(os.sep))
    return re.sub(rf"{temp}/[^\s'\",)]+", "/tmp/...", text)


def run_outputs(
    blocks: Iterable[OutputBlock], jobs: int | None = None
) -> dict[tuple[str, str], Run]:
    """Each distinct command of ``blocks`` run once, ``jobs`` at a time (the cores)."""
    keys = sorted({block.key for block in blocks})
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as pool:
        return dict(zip(keys, pool.map(_run, keys), strict=True))


def shown(block: OutputBlock, run: Run) -> str:
    """What ``block`` shows of ``run``: its lines, filtered as the block says."""
    if run.returncode == 3 or "Traceback (most recent call last)" in run.stdout + run.stderr:
        raise StaleDocs(f"{block.name} crashed (exit {run.returncode}):\n{run.stderr[-2000:]}")
    lines = [line.rstrip() for line in run.stdout.rstrip("\n").split("\n")]
    for f in block.filters:
        verb, _, argument = f.partition(" ")
        lines = _lines(lines, argument, block) if verb == "lines" else _grep(lines, argument)
    text = "\n".join(lines).strip("\n")
    if not text:
        raise StaleDocs(f"{block.name} shows nothing: the run printed {run.stdout[:200]!r}")
    return text


def _lines(lines: list[str], spec: str, block: OutputBlock) -> list[str]:
    kept: list[str | None] = []  # None: an elision
    for part in (p.strip() for p in spec.split(",")):
        if part == "...":
            kept.append(None)
            continue
        first, _, last = part.partition("-")
        start, end = int(first), int(last or first)
        if not 1 <= start <= end <= len(lines):
            raise StaleDocs(f"{block.name}: lines {part}, of an output of {len(lines)} lines")
        kept += lines[start - 1 : end]
    out = []
    for n, line in enumerate(kept):
        if line is None:
            after = next((x for x in kept[n + 1 :] if x), "")
            out.append(" " * (len(after) - len(after.lstrip())) + "...")
        else:
            out.append(line)
    return out


def _grep(lines: list[str], pattern: str) -> list[str]:
    return [line for line in lines if re.search(pattern, line)]


_VARIES = (
    # durations: "3.4 s", "(2 searches: 2.4, 1.5 s)", "120 ms"
    (re.compile(r"\d+(?:\.\d+)?(?:, \d+(?:\.\d+)?)* ?(?:s|ms|us|µs|min)\b"), "<time>"),
    # dates and times of day
    (
        re.compile(
            r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
        ),
        "<date>",
    ),
    (re.compile(r"\b\d{2}:\d{2}:\d{2}\b"), "<clock>"),
    # the version, however it is printed
    (re.compile(r"\b(ctxkit(?:-llm)?[ =]+)\d+\.\d+\.\d+\S*"), r"\1<version>"),
    # how many examples and steps a time-bounded search drew (fewer under load)
    (re.compile(r"[\d,]+ examples, [\d,]+ steps"), "<n> examples, <n> steps"),
    (re.compile(r"/tmp/\S*"), "/tmp/..."),
)


def normalised(text: str) -> str:
    """``text`` with what varies from run to run replaced by a placeholder."""
    for pattern, replacement in _VARIES:
        text = pattern.sub(replacement, text)
    return text


def _fenced(text: str) -> str:
    return f"\n```text\n{text}\n```\n\n"


def render_outputs(text: str, page: str, runs: Mapping[tuple[str, str], Run]) -> str:
    """``text`` with each output block holding what its command prints now (a block whose
    text differs from a fresh run's only in what varies is left as it is)."""

    def rewrite(match: re.Match[str]) -> str:
        block = _block(page, text, match)
        fresh = shown(block, runs[block.key])
        if block.shown is not None and normalised(block.shown.rstrip("\n")) == normalised(fresh):
            return match[0]
        start = f"<!-- generated: output {match['spec']} -->\n"
        return start + _fenced(fresh) + "<!-- end generated: output -->"

    return _OUTPUT.sub(rewrite, text)


def stale_outputs(
    runs: Mapping[tuple[str, str], Run], blocks: Iterable[OutputBlock] | None = None
) -> list[tuple[OutputBlock, str]]:
    """Each output block whose text differs from a fresh run's, with the difference."""
    stale = []
    for block in output_blocks() if blocks is None else blocks:
        fresh = shown(block, runs[block.key])
        now = (block.shown or "").rstrip("\n")
        if normalised(now) != normalised(fresh):
            diff = difflib.unified_diff(
                now.split("\n"), fresh.split("\n"), "shown", "printed now", lineterm="", n=1
            )
            stale.append((block, "\n".join(diff)))
    return stale


def unlisted_text_blocks() -> tuple[list[str], list[tuple[str, str, str]]]:
    """The fenced ``text`` blocks outside output blocks: those no entry of :data:`EXCLUDED`
    names (``page:line: first line``), and those it does (page, first line, reason)."""
    unlisted, excluded = [], []
    for path in _pages():
        text = path.read_text(encoding="utf-8")
        page = str(path.relative_to(ROOT))
        outside = _OUTPUT.sub(lambda m: "\n" * m[0].count("\n"), text)
        for fence in _FENCE.finditer(outside):
            if fence["lang"] not in {"text", "console", "shell-session", ""}:
                continue
            first = fence["text"].split("\n", 1)[0]
            reason = next(
                (r for p, start, r in EXCLUDED if p == page and first.startswith(start)), None
            )
            line = outside.count("\n", 0, fence.start()) + 1
            if reason is None:
                unlisted.append(f"{page}:{line}: {first[:60]}")
            else:
                excluded.append((page, first, reason))
    return unlisted, excluded


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


def main(argv: list[str] | None = None, runs: Mapping[tuple[str, str], Run] | None = None) -> int:
    """``runs``: the outputs' commands already run (the tests share theirs)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if a committed table or output is stale"
    )
    parser.add_argument(
        "--only", choices=("tables", "outputs"), help="the tables alone, or the outputs alone"
    )
    args = parser.parse_args(argv)
    try:
        stale = stale_pages() if args.only != "outputs" else {}
        if args.only != "tables":
            blocks = output_blocks()
            unlisted, excluded = unlisted_text_blocks()
            if runs is None:
                runs = run_outputs(blocks)
            if args.check:
                outputs = stale_outputs(runs)
            else:
                outputs = []
                for path in sorted({ROOT / block.page for block in blocks}):
                    current = path.read_text(encoding="utf-8")
                    wanted = render_outputs(current, str(path.relative_to(ROOT)), runs)
                    if wanted != current:
                        stale[path] = wanted
    except StaleDocs as exc:
        print(f"docs/generate.py: {exc}", file=sys.stderr)
        return 2
    if args.check:
        for path in stale:
            print(
                f"{path.relative_to(ROOT)} is stale: run python docs/generate.py and commit it",
                file=sys.stderr,
            )
        if args.only != "tables":
            for block, diff in outputs:
                print(
                    f"{block.name}: the output shown differs from a run's\n{diff}", file=sys.stderr
                )
            for where in unlisted:
                print(
                    f"{where}: a text block that is neither an output block nor in EXCLUDED "
                    "(docs/generate.py)",
                    file=sys.stderr,
                )
            print(
                f"{len(blocks)} output blocks on {len({b.page for b in blocks})} pages "
                f"({len(runs)} commands), {len(outputs)} stale; {len(excluded)} text blocks "
                "excluded:"
            )
            counted: dict[tuple[str, str], int] = {}
            for page, _, reason in excluded:
                counted[page, reason] = counted.get((page, reason), 0) + 1
            for (page, reason), n in counted.items():
                print(f"  {page}: {n} ({reason})")
            stale_any = bool(stale or outputs or unlisted)
        else:
            stale_any = bool(stale)
        if not stale_any:
            print("the docs' generated tables and outputs are up to date")
        return 1 if stale_any else 0
    for path, text in stale.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    PICTURE.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SCREENSHOT, PICTURE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
