"""The docs site and the README: the generated tables equal what the code exports, the site
builds with ``mkdocs build --strict`` (a broken link or anchor, a missing include, a page left
out of the nav all fail it), and the README stays a short front page whose links land on pages
that exist."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

from tests.readme import quick_start_commands
from tests.shared_runs import shared
from tests.system import missing

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def _generator() -> ModuleType:
    """docs/generate.py, loaded by path: ``docs`` is no package, and an installed distribution
    may own a top-level ``docs`` namespace."""
    spec = importlib.util.spec_from_file_location("ctxkit_docs_generate", DOCS / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


generate = _generator()


# -- generated tables -----------------------------------------------------------------------------


def test_the_committed_tables_are_what_the_code_exports() -> None:
    stale = generate.stale_pages()
    assert not stale, (
        f"{', '.join(str(p.relative_to(ROOT)) for p in stale)}: the tables differ from the code; "
        "run python docs/generate.py and commit the result"
    )
    assert generate.main(["--check", "--only", "tables"]) == 0


def test_a_changed_table_is_found_and_rewritten_from_the_code() -> None:
    page = (DOCS / "telemetry.md").read_text(encoding="utf-8")
    row = "| `ctxkit_views_total` | counter |"
    assert row in page
    tampered = page.replace(row, "| `ctxkit_views_total` | gauge |")
    blocks = generate.BLOCKS["telemetry.md"]
    assert generate.render_page(tampered, blocks, "telemetry.md") == page
    # Prose outside the markers is the page's own: never touched.
    edited = page.replace("GenAI semantic conventions where one exists", "Edited by hand")
    assert generate.render_page(edited, blocks, "telemetry.md") == edited


def test_a_page_without_its_markers_is_a_sentence_not_a_silent_pass() -> None:
    with pytest.raises(generate.StaleDocs, match=r"docs/telemetry\.md has no .*metrics"):
        generate.render_page(
            "# Telemetry\n\nno tables\n", generate.BLOCKS["telemetry.md"], "telemetry.md"
        )


def test_the_tables_name_every_metric_property_and_relaxation() -> None:
    """The generated tables hold every name of the code's tables (and nothing is dropped by
    the Markdown escaping)."""
    from ctxkit.telemetry.names import (
        ATTRIBUTES,
        AUDIT_METRICS,
        AUDIT_QUEUE_DEPTH,
        METRICS,
        RETIRED,
    )

    catalogue = json.loads((ROOT / "conformance" / "properties.json").read_text(encoding="utf-8"))

    telemetry = (DOCS / "telemetry.md").read_text(encoding="utf-8")
    for m in METRICS:
        assert f"| `{m.exposed}` | {m.kind} |" in telemetry
    for name in (m.prometheus for m in (*AUDIT_METRICS, AUDIT_QUEUE_DEPTH)):
        assert re.search(rf"\| `{name}(_total)?` \|", telemetry), name
    for name in [*ATTRIBUTES, *RETIRED]:
        assert f"| `{name}` |" in telemetry
    properties = (DOCS / "conformance" / "properties.md").read_text(encoding="utf-8")
    for p in catalogue["properties"]:
        assert f"| `{p['id']}` | {p['level']} |" in properties
    for r in catalogue["relaxations"]:
        usage = r["name"] if r["value"] is None else f"{r['name']}={r['value']}"
        assert f"| `{usage}` | `{r['relaxes']}` |" in properties


def test_the_runbook_is_included_from_its_first_section() -> None:
    """dashboards.md includes runbook.md from a line number (its header links files the site
    does not hold): that line must be the runbook's first section."""
    page = (DOCS / "dashboards.md").read_text(encoding="utf-8")
    (start,) = re.findall(r'--8<-- "dashboards/runbook\.md:(\d+):"', page)
    runbook = (ROOT / "dashboards" / "runbook.md").read_text(encoding="utf-8").splitlines()
    first = next(n for n, line in enumerate(runbook, 1) if line.startswith("## "))
    assert int(start) == first, (
        f"dashboards/runbook.md's first section is now line {first}: include it from there "
        f'in docs/dashboards.md (--8<-- "dashboards/runbook.md:{first}:")'
    )


# -- what the commands print ----------------------------------------------------------------------


@shared
def _shown_runs() -> dict:
    """Every output block's command, run once per test session (about 30 s of CPU)."""
    return generate.run_outputs(generate.output_blocks())


def test_every_output_shown_is_what_its_command_prints_now() -> None:
    runs = _shown_runs()
    stale = generate.stale_outputs(runs)
    assert not stale, "\n\n".join(
        f"{block.name}: the output shown differs from what the command prints now; run python "
        f"docs/generate.py and commit the result\n{diff}"
        for block, diff in stale
    )
    assert generate.main(["--check", "--only", "outputs"], runs=runs) == 0


def test_every_text_block_is_an_output_or_excluded_with_its_reason() -> None:
    unlisted, excluded = generate.unlisted_text_blocks()
    assert not unlisted, (
        f"{unlisted}: a command's output goes in an output block (docs/generate.py), anything "
        "else in EXCLUDED with its reason"
    )
    assert all(reason for _, _, reason in excluded)
    blocks = generate.output_blocks()
    pages = {block.page for block in blocks}
    assert len(blocks) >= 8, blocks
    assert {"README.md", "docs/audit.md", "docs/getting-started/index.md"} <= pages


def test_a_changed_output_is_named_by_page_and_block_and_times_are_not_a_change() -> None:
    runs = dict(_shown_runs())
    blocks = generate.output_blocks()
    (audit,) = [b for b in blocks if b.command == "ctxkit audit requests.jsonl"]
    printed = runs[audit.key]
    runs[audit.key] = generate.Run(1, printed.stdout.replace("c1", "c2"), "")
    ((block, diff),) = generate.stale_outputs(runs, blocks)
    assert block.name.startswith("docs/audit.md:")
    assert block.name.endswith("(in docs/examples: ctxkit audit requests.jsonl)")
    assert "+FAIL  c2" in diff
    # Durations, dates, versions and temporary folders differ from run to run: no change.
    runs = dict(_shown_runs())
    for key, run in runs.items():
        slower = re.sub(r"\d+\.\d s\b", "99.9 s", run.stdout)
        runs[key] = generate.Run(run.returncode, slower, run.stderr)
    assert generate.stale_outputs(runs, blocks) == []
    assert generate.normalised("ctxkit 0.1.0 at 2026-11-29T09:06:29Z in /tmp/xyz/a") == (
        generate.normalised("ctxkit 0.2.0 at 2027-01-01T00:00:00Z in /tmp/abc")
    )


def test_an_output_block_says_what_it_runs_or_is_a_sentence() -> None:
    page = (
        "x\n<!-- generated: output ls -la -->\n\n```text\n```\n\n<!-- end generated: output -->\n"
    )
    match = generate._OUTPUT.search(page)
    with pytest.raises(generate.StaleDocs, match=r"page\.md:2: an output block names 'ctxkit"):
        generate._block("page.md", page, match)


# -- the site -------------------------------------------------------------------------------------


def test_mkdocs_build_strict_passes(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        missing("mkdocs-material is not installed (pip install -e '.[dev]')")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "index.html").exists()
    assert (tmp_path / "assets" / "inspector.svg").exists()
    assert not list(tmp_path.rglob("*.py")), "the generator is not part of the site"


# -- the README -----------------------------------------------------------------------------------


def test_the_readme_is_a_front_page_with_the_two_quick_start_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    quick_start, _ = quick_start_commands()
    assert quick_start == "pip install . && ctxkit conformance"
    # What the commands do is tests/test_newcomer_path.py's; the site says the same.
    assert quick_start_commands(DOCS / "index.md") == quick_start_commands()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["readme"] == "README.md", "the PyPI page is the README"
    assert "urls" not in project, "the project owns no host to link to yet"


def test_every_readme_link_of_ours_is_a_file_of_the_repository() -> None:
    """The project owns no host: the README's links to its pages and picture are relative, and
    each names a file that is there."""
    text = README.read_text(encoding="utf-8")
    links = [link.split("#")[0] for link in re.findall(r"\]\(([^)\s]+)\)", text)]
    ours = [link for link in links if not link.startswith(("http://", "https://"))]
    assert len(ours) >= 15, ours
    for link in ours:
        assert (ROOT / link).is_file(), f"README links {link}, which is no file of the repository"


def test_no_page_links_a_host_the_project_does_not_own() -> None:
    """No host serves ctxkit's pages or code: a link to one would lead a reader to another
    project's, or to nothing."""
    pages = [README, ROOT / "mkdocs.yml", *DOCS.rglob("*.md")]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for host in ("ctxkit.github.io", "github.com/ctxkit/", "githubusercontent.com/ctxkit/"):
            assert host not in text, f"{page.relative_to(ROOT)} links {host}"


def test_the_readme_picture_is_the_docs_picture() -> None:
    text = README.read_text(encoding="utf-8")
    (url,) = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert url == "docs/assets/inspector.svg"
    assert (DOCS / "assets" / "inspector.svg").exists()


def _recording_table() -> list[str]:
    text = (ROOT / "docs" / "audit.md").read_text()
    section = text[text.index("## Recording content") :]
    section = section[: section.index("\n## ")]
    return [line for line in section.splitlines() if line.startswith("| ") and "`" in line]


def test_every_install_line_of_the_instrumentation_table_is_what_the_tests_record_with():
    """The docs' pip and npm lines name the versions the recordings in the tests were made
    with: each pinned package is installed at that version here (pip) or pinned in
    tests/js/package.json (npm)."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import Requirement

    rows = _recording_table()
    assert len(rows) >= 8, rows
    pinned = json.loads((ROOT / "tests" / "js" / "package.json").read_text())["dependencies"]
    checked = 0
    for row in rows:
        for command in re.findall(r"`((?:pip|npm) install [^`]+)`", row):
            tool, _, names = command.split(" ", 2)
            for name in names.split():
                name = name.strip('"')
                if tool == "npm":
                    package, _, wanted = name.rpartition("@")
                    # An older major is installed beside the newest under an alias (ai5).
                    versions = {
                        pinned.get(package),
                        *(
                            v.rpartition("@")[2]
                            for v in pinned.values()
                            if v.startswith(f"npm:{package}@")
                        ),
                    }
                    assert wanted in versions, (command, versions)
                else:
                    requirement = Requirement(name)
                    try:
                        found = version(requirement.name)
                    except PackageNotFoundError:
                        missing(f"{requirement.name} is not installed (pip install -e '.[dev]')")
                    assert requirement.specifier.contains(found, prereleases=True), (
                        command,
                        found,
                    )
                checked += 1
    assert checked >= 15


def test_no_install_line_names_the_other_projects_ctxkit() -> None:
    """``ctxkit`` on PyPI is another project: every install line of the repository names our
    distribution (ctxkit/extras.py), whose name the registry gave no one else (issue 47)."""
    from ctxkit.extras import DISTRIBUTION

    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    # a pip line's arguments, up to its end, a comment or the next command
    line = re.compile(r"""pip install ([^\n`#;&|]*)""")
    other = re.compile(r"""^['"]?ctxkit(\[[^\]]*\])?(==\S*)?['"]?$""")
    found = []
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".toml", ".yml", ".j2", ".mjs", ".js", ""}:
            continue
        if not path.is_file() or path.is_symlink():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in line.finditer(text):
            found += [f"{name}: {m.group(0)}" for arg in m.group(1).split() if other.match(arg)]
    assert not found, found
    assert DISTRIBUTION == "ctxkit-llm"
