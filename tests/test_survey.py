"""``ctxkit survey``: a real survey over zoo targets writes the matrix in three formats with
each failure's reproducer; the page works in a real headless Chromium; bad usage exits 2."""

from __future__ import annotations

import contextlib
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxkit.survey.matrix import Cell, Finding, Matrix, Row
from ctxkit.survey.render import to_html, to_markdown
from ctxkit.survey.run import Progress
from tests.schemas import valid
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
    # About 20 s, once for the file: a real survey, each target in a ctxkit process of its own.
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
    matrix = valid("matrix", json.loads((out / "matrix.json").read_text()))
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
    assert "| `no_such_mod:X` | - | - | not checked |" in markdown
    assert rows["tests.zoo.base:GoodManager"]["shapes"] == ["openai", "anthropic"]  # declared
    assert "| `tests.zoo.base:GoodManager` | - | openai, anthropic | pass |" in markdown
    assert "<dialog" in (out / "matrix.html").read_text()


def test_the_page_loads_sorts_and_opens_a_reproducer_in_chromium(surveyed):
    out, _ = surveyed
    with chromium() as browser:
        from selenium.webdriver.common.by import By

        browser.get((out / "matrix.html").as_uri())
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
        first = [r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR, "tbody tr")]
        verdict = browser.find_element(By.CSS_SELECTOR, 'th[data-key="verdict"]')
        verdict.click()
        rows = browser.find_elements(By.CSS_SELECTOR, "tbody tr")
        assert [r.find_elements(By.TAG_NAME, "td")[3].text for r in rows] == sorted(
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


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """Debian's headless Chromium through selenium, its viewport exactly ``width`` px and the
    page's console kept (``get_log("browser")``). Chromium's temporary files (its singleton
    socket's folder) go to a folder removed after it quits, not left in /tmp."""
    chromium_path, driver_path = require_binary("chromium"), require_binary("chromedriver")
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium_path
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    scratch = tempfile.TemporaryDirectory(prefix="ctxkit-chromium-")
    service = webdriver.ChromeService(driver_path, env={**os.environ, "TMPDIR": scratch.name})
    browser = webdriver.Chrome(options=options, service=service)
    try:
        browser.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        yield browser
    finally:
        browser.quit()
        scratch.cleanup()


def wide_matrix() -> Matrix:
    """Every property, long targets, failures of each level tagged bug, design and adapter,
    an advisory figure under its bar, a target not checked: the widest page a survey of
    the adapters makes."""
    findings = [
        Finding("bug", "splits a call from its result"),
        Finding("design", "drops the oldest system message", allow="dropped-system"),
        Finding("adapter", "the adapter emits no events"),
    ]
    targets = [
        "langchain:trim_messages:first",
        "llama_index:chat_memory_buffer",
        "js:@langchain/core:trimMessages:first",
        "semantic_kernel:truncation_reducer",
        "tests.zoo.pairs:SplitsPairsOpenAI",
    ]
    rows = []
    for n, target in enumerate(targets):
        cells = {}
        for i, (property_id, level) in enumerate(Matrix([], "", "", "", "", 1).properties):
            if level == "advisory":
                cells[property_id] = Cell("below" if n % 2 else "passed", level, figure=0.4)
            elif (n + i) % 4 == 0 and (n % 2 == 0 or level != "required"):
                finding = findings[(n + i) % 3]
                cells[property_id] = Cell("failed", level, "view[0] is a result", "x = 1", True,
                                          finding=finding)  # fmt: skip
            else:
                cells[property_id] = Cell("passed", level)
        failed = any(c.status == "failed" and c.level == "required" for c in cells.values())
        rows.append(Row(target, "lib", "10.20.30", "fail" if failed else "pass", cells=cells))
    rows.append(Row("no_such_module:Manager", problem="no module named 'no_such_module'"))
    return Matrix(rows, "2026-11-25", "0.1.0", "Linux x86_64, 2 cores", "default", 1)


SHOWN_WHOLE = """
const wrap = document.querySelector(".wrap");
const box = wrap.getBoundingClientRect();
const cut = [];
for (const header of document.querySelectorAll("thead th")) {
  header.scrollIntoView({block: "nearest", inline: "nearest"});
  const r = header.getBoundingClientRect();
  const inside = r.left >= box.left - 0.5 && r.right <= box.right + 0.5;
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  if (!inside || !header.contains(hit)) cut.push(header.dataset.key);
}
wrap.scrollLeft = wrap.scrollWidth;
const first = document.querySelector("thead th").getBoundingClientRect();
return {
  cut: cut,
  pageWidth: document.documentElement.scrollWidth,
  viewport: window.innerWidth,
  stickyAt: first.left - box.left,
};
"""


@pytest.mark.parametrize(("page", "width"), [("surveyed", 1280), ("widest", 1280), ("widest", 960)])
def test_the_page_is_readable_at_1280_px_in_chromium(surveyed, tmp_path, page, width):
    """No header cut or hidden (each is on screen in the table's own scroll box, not under
    the sticky target column), the page itself never scrolls sideways, the target column
    stays put when the table scrolls (at 960 px it must), levels are marked in the header
    and verdicts and failures coloured by what they mean. The screenshot is kept in the
    test's tmp folder."""
    from selenium.webdriver.common.by import By

    path = surveyed[0] / "matrix.html" if page == "surveyed" else tmp_path / "matrix.html"
    if page == "widest":
        path.write_text(to_html(wide_matrix()), encoding="utf-8")
    shot = tmp_path / f"survey-{page}-{width}.png"
    with chromium(width) as browser:
        browser.get(path.as_uri())
        browser.save_screenshot(str(shot))
        scrolls = browser.execute_script(
            "const w = document.querySelector('.wrap'); return w.scrollWidth > w.clientWidth"
        )
        assert scrolls == (width < 1280)
        found = browser.execute_script(SHOWN_WHOLE)
        assert found["viewport"] == width
        assert found["cut"] == []
        assert found["pageWidth"] <= width
        assert abs(found["stickyAt"]) <= 2, "the target column stays at the left"

        for header in browser.find_elements(By.CSS_SELECTOR, "th.property"):
            level = header.get_attribute("class").split()[-1]
            assert level in ("required", "recommended", "advisory")
            assert level in header.text

        def background(selector: str) -> set[str]:
            found = browser.find_elements(By.CSS_SELECTOR, selector)
            return {e.value_of_css_property("background-color") for e in found}

        assert len(background(".verdict.pass") | background(".verdict.fail")) == 2
        if page == "widest":
            required, recommended = (
                background("td.failed.required"),
                background("td.failed.recommended"),
            )
            assert len(required) == len(recommended) == 1
            assert required != recommended
            tags = {e.text for e in browser.find_elements(By.CSS_SELECTOR, "td .tag")}
            assert tags == {"bug", "design", "adapter"}
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">I", png[16:20])[0] == width  # the screenshot is the viewport
    print(f"screenshot: {shot}")


def test_every_text_of_the_page_is_escaped():
    """Targets, versions, messages, reasons, --allow names and reproducers are the surveyed
    code's words: none becomes markup, and the page has its one script."""
    hostile = "<script>alert(1)</script>"
    cell = Cell("failed", "required", message=hostile, reproducer=hostile,
                finding=Finding("bug", hostile, allow=hostile), verification=hostile)  # fmt: skip
    row = Row(f"x:{hostile}", version=hostile, verdict="fail", cells={"ordering": cell})
    page = to_html(Matrix([row, Row("y:Z", problem=hostile)], "d", "v", hostile, "quick", 1))
    assert "alert(1)</script>" not in page
    assert page.count("<script>") == 1
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 7


def test_progress_is_a_rich_bar_on_a_terminal_and_a_line_per_target_elsewhere():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    progress = Progress(2, stream=screen)
    progress.start("a:A")
    progress.start("b:B")
    progress.finish("a:A", "pass")
    drawn = screen.getvalue()
    progress.close()
    assert "  [1/2] a:A: pass (0 s)\n" in drawn  # printed above the bar, kept
    assert "running: a:A 0 s, b:B 0 s" in drawn  # the bar, with what runs
    assert "1/2" in drawn
    assert "\x1b[?25h" in screen.getvalue()  # closing gives the cursor back

    log = io.StringIO()
    progress = Progress(2, stream=log)
    progress.start("a:A")
    progress.finish("a:A", "fail")
    progress.close()
    assert log.getvalue() == "  [1/2] a:A: fail (0 s)\n"  # no codes, no redrawing


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
        (["x:Y", "--outputs", "pdf"], "--outputs takes a list of md, html, json"),
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


def test_an_adapter_named_as_a_target_is_surveyed_like_a_discovered_one():
    """Its library, version and known findings (so its labels and bug reports) come with
    it; any other target is surveyed as itself."""
    from importlib.metadata import version

    from ctxkit.adapters import by_name
    from ctxkit.survey.subjects import named_subject

    named = named_subject("langchain:trim_messages")
    adapter = by_name("langchain:trim_messages")
    assert named.library == adapter.distribution
    assert named.version == version(adapter.distribution)
    assert named.findings == dict(adapter.findings)
    assert named.findings  # the known bug and design choices, with their labels
    plain = named_subject("tests.zoo.base:GoodManager")
    assert plain.library is None or plain.library == ""
    assert not plain.findings


def test_the_schemas_refuse_what_a_reader_could_not_trust():
    """The report and matrix schemas bite: a report of another version, or a cell whose status
    no reader knows, is refused (so the validations above mean something)."""
    from jsonschema import ValidationError

    from tests.schemas import validator

    report = {
        "version": 2,
        "tool": "ctxkit conformance",
        "target": "t",
        "verdict": "pass",
        "strict": False,
        "seed": 1,
        "duration_s": 0.1,
        "profile": "quick",
        "allow": [],
        "depth": {},
        "properties": [],
    }
    with pytest.raises(ValidationError):
        validator("report").validate(report)
    report["version"] = 1
    validator("report").validate(report)
    matrix = Matrix(
        rows=[Row(target="t", cells={"p": Cell("passed", "required")})],
        created="now",
        ctxkit_version="0",
        machine="m",
        profile="quick",
        seed=1,
    )
    data = valid("matrix", matrix.to_json())
    data["rows"][0]["cells"]["p"]["status"] = "fine"
    with pytest.raises(ValidationError):
        validator("matrix").validate(data)
