"""``ctxkit survey``: a real survey over zoo targets writes the matrix in three formats with
each failure's reproducer; the page works in a real headless Chromium; bad usage exits 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxkit.survey.matrix import Cell, Finding, Matrix, Row
from ctxkit.survey.render import to_html, to_markdown
from tests.system import require_binary

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ["tests.zoo.base:GoodManager", "tests.zoo.pairs:SplitsPairsOpenAI", "no_such_mod:X"]


def survey(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxkit", "survey", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


@pytest.fixture(scope="module")
def surveyed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("survey")
    done = survey(
        *TARGETS,
        TARGETS[0],  # named twice: surveyed once
        "--no-adapters",
        *("--out", str(out), "--profile", "quick", "--deadline", "20"),
    )
    return out, done


def test_a_survey_writes_the_matrix_in_three_formats(surveyed):
    out, done = surveyed
    assert done.returncode == 1, done.stderr  # one target fails, one cannot be checked
    assert "[3/3]" in done.stderr  # progress, one line per finished target off a terminal
    matrix = json.loads((out / "matrix.json").read_text())
    rows = {row["target"]: row for row in matrix["rows"]}
    assert list(rows) == TARGETS  # the order asked for, whatever order they finished in
    assert rows["tests.zoo.base:GoodManager"]["verdict"] == "pass"
    split = rows["tests.zoo.pairs:SplitsPairsOpenAI"]["cells"]["tool_pair_integrity"]
    assert split["status"] == "failed"
    assert split["verified"]
    assert (out / split["reproducer_path"]).read_text().startswith('"""Reproduces')
    assert "no module named 'no_such_mod'" in rows["no_such_mod:X"]["problem"]
    markdown = (out / "matrix.md").read_text()
    assert f"**[FAIL]({split['reproducer_path']})**" in markdown
    assert "| `no_such_mod:X` | - | not checked |" in markdown
    assert "<dialog" in (out / "matrix.html").read_text()


def test_the_page_loads_sorts_and_opens_a_reproducer_in_chromium(surveyed):
    out, _ = surveyed
    chromium, driver_path = require_binary("chromium"), require_binary("chromedriver")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(options=options, service=webdriver.ChromeService(driver_path))
    try:
        browser.get((out / "matrix.html").as_uri())
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
        first = [r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR, "tbody tr")]
        verdict = browser.find_element(By.CSS_SELECTOR, 'th[data-key="verdict"]')
        verdict.click()
        rows = browser.find_elements(By.CSS_SELECTOR, "tbody tr")
        assert [r.find_elements(By.TAG_NAME, "td")[2].text for r in rows] == sorted(
            ["pass", "fail", "not checked"]
        )
        verdict.click()
        assert verdict.get_attribute("aria-sort") == "descending"
        again = [r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR, "tbody tr")]
        assert sorted(again) == sorted(first)
        button = browser.find_element(By.CSS_SELECTOR, "button.repro")
        button.click()
        dialog = browser.find_element(By.ID, button.get_attribute("data-dialog"))
        assert dialog.get_attribute("open") is not None
        assert "from ctxkit.conformance.replay import" in dialog.text
        dialog.find_element(By.CSS_SELECTOR, "button.close").click()
        assert dialog.get_attribute("open") is None
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    finally:
        browser.quit()


def test_findings_are_labelled_and_text_is_escaped():
    cell = Cell(
        "failed",
        "required",
        message="view[0] <b>is</b> a | result",
        reproducer="print('<script>')",
        verified=True,
        finding=Finding("design", "drops system | messages", allow="dropped-system"),
        reproducer_path="reproducers/x/reproduce_preservation.py",
    )
    row = Row("lib:<x>", library="lib", version="1.0", verdict="fail", cells={"ordering": cell})
    matrix = Matrix([row], "2026-11-23", "0.1.0", "test machine", "quick", 1)
    markdown = to_markdown(matrix)
    assert "view[0] <b>is</b> a \\| result" in markdown
    assert "*design choice*: drops system \\| messages (accept with `--allow dropped-system`)" in (
        markdown
    )
    page = to_html(matrix)
    assert "<script>')" not in page
    assert "&lt;script&gt;" in page
    assert "lib:&lt;x&gt;" in page
    assert "Accept it with --allow dropped-system." in page


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--no-adapters"], "nothing to survey"),
        (["x:Y", "--format", "pdf"], "--format takes a list of md, html, json"),
        (["x:Y", "--jobs", "0"], "--jobs must be at least 1"),
        (["x:Y", "--deadline", "nan"], "--deadline must be a positive number"),
        (["x:Y", "--out", "README.md"], "is a file, not a folder"),
    ],
)
def test_bad_usage_exits_2_with_a_sentence(args, fragment):
    done = survey(*args)
    assert done.returncode == 2, done.stderr
    assert fragment in done.stderr
    assert "Traceback" not in done.stderr
