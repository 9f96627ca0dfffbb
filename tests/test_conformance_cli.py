"""`ctxkit conformance` end to end: target forms, exit codes, reports, reproducers, the plugin."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from ctxkit.cli import main
from ctxkit.conformance.targets.load import ContractError, LoadError, load_target
from ctxkit.prefix import STABILITY_THRESHOLD
from tests.processes import PLUGIN_PYTEST
from tests.schemas import valid

ROOT = Path(__file__).resolve().parent.parent
FAST = ["--profile", "quick", "--max-examples", "8", "--seed", "5", "--timeout", "5",
        "--shrink-seconds", "3"]  # fmt: skip
"""A short run: what these tests judge is the command, not how small a counterexample gets
(tests/test_conformance_zoo.py and tests/test_script.py hold the minimizer to that)."""


def conformance(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "ctxkit", "conformance", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env,
        check=False,
    )


# -- target forms -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        (None, "mount"),
        ("ctxkit.reference", "mount"),
        ("ctxkit.reference:mount", "mount"),
        ("ctxkit.reference:ReferenceContextManager", "factory"),
        ("ep:ctxkit-reference", "mount"),
        ("tests.zoo.base:GoodManager", "factory"),
        (str(ROOT / "tests" / "zoo" / "base.py") + ":GoodManager", "factory"),
    ],
)
def test_every_target_form_resolves(spec, kind):
    target = load_target(spec, {"max_tokens": 5_000})
    assert target.kind == kind
    assert target.observes_events


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("no_such_module_xyz:Thing", "no module named 'no_such_module_xyz'"),
        ("ctxkit.reference:NoSuchThing", "has no attribute 'NoSuchThing'"),
        ("ctxkit.tokens", "has no mount()"),
        ("ep:no-such-entry-point", "installed: ctxkit-reference"),
        ("missing/file.py", "no such file"),
        ("not a target!", "is not a target"),
        ("ctxkit.tokens:DEFAULT_ENCODING", "is not callable"),
    ],
)
def test_a_bad_target_gets_an_error_that_says_the_fix(spec, fragment):
    with pytest.raises(LoadError, match=re.escape(fragment)):
        load_target(spec)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("langchain:trim_message", "did you mean langchain:trim_messages?"),
        ("autogen:bufered", "did you mean autogen:buffered?"),
        ("langchain:summary", "the langchain adapters: langchain:trim_messages, "),
        ("tests.zoo.base:GoodManagr", "has no attribute 'GoodManagr'; did you mean GoodManager?"),
        ("tests.zoo.base:goodmanager", "did you mean GoodManager?"),
        ("tests.zoo.base:GoodManager.clearr", "'tests.zoo.base.GoodManager' has no attribute"),
        ("ctxkit.refrence:mount", "Did you mean ctxkit.reference:mount?"),
        ("tets.zoo.base:GoodManager", "Did you mean tests.zoo.base:GoodManager?"),
        ("tests.zoo.base.GoodManager", "Did you mean tests.zoo.base:GoodManager?"),
        ("langchian:trim_messages", "did you mean langchain:trim_messages?"),
        ("tests/zoo/base.py", "tests/zoo/base.py has no mount(); name the class or factory, "
         "e.g. tests/zoo/base.py:GoodManager"),
        ("tests/zoo/base.py:GoodManagr", "'tests/zoo/base.py' has no attribute 'GoodManagr'"),
    ],
)  # fmt: skip
def test_a_mistyped_target_gets_the_name_meant(spec, fragment):
    with pytest.raises(LoadError, match=re.escape(fragment)):
        load_target(spec)


@pytest.mark.parametrize(
    "spec", ["windw:SlidingWindow", "sliding_window:SlidingWindow", "tests.zoo.bse:GoodManager"]
)
def test_a_target_that_reads_as_a_module_path_is_never_told_of_an_adapter(spec):
    """A module path close to an adapter's name (strands:sliding_window) is the user's own
    module mistyped: what is said is about modules, never an adapter they did not name."""
    with pytest.raises(LoadError) as raised:
        load_target(spec)
    said = str(raised.value)
    assert "no module named" in said
    assert "adapter" not in said
    assert "ctxkit_target" not in said


def test_what_cannot_be_loaded_or_built_says_the_fix_in_full(tmp_path: Path):
    """The hints finish the thought (issue 47): a module not found names the working folder
    and how to put a folder on the import path, and suggests only the working folder's own
    modules (never the standard library's ast for last_n); a module found elsewhere says
    where; a constructor that wants an argument points to --config."""
    (tmp_path / "window.py").write_text(
        "class Window:\n    def __init__(self, n):\n        self.n = n\n"
    )
    away = tmp_path / "elsewhere"
    away.mkdir()
    missing = conformance("last_n:LastN", cwd=away)
    assert missing.returncode == 2
    assert f"in the working folder ({away})" in missing.stderr
    assert "PYTHONPATH=/path/to/it ctxkit conformance last_n:LastN" in missing.stderr
    assert "Did you mean" not in missing.stderr  # not the standard library's ast
    close = conformance("windw:Window", cwd=tmp_path)
    assert "Did you mean window:Window?" in close.stderr
    shadowed = conformance("ast:LastN", cwd=tmp_path)
    assert "(the module at " in shadowed.stderr
    assert f"not one of the working folder {tmp_path})" in shadowed.stderr
    unbuilt = conformance("window:Window", cwd=tmp_path)
    assert unbuilt.returncode == 2
    assert "missing 1 required positional argument: 'n'" in unbuilt.stderr
    assert """give it with --config '{"n": "..."}'""" in unbuilt.stderr


def test_the_shapes_hint_is_written_in_the_targets_own_language():
    from ctxkit.shapes.spoken import Spoken

    spoken = Spoken(("openai",), "default", "nothing declares the shapes the target speaks")
    assert "ctxkit_shapes = ('openai', 'anthropic') on its class" in spoken.hint("mod:Thing")
    for target in ("./manager.mjs", "./manager.mjs:Window", "lib/trim.js:keep"):
        said = spoken.hint(target)
        assert "static ctxkit_shapes = ['openai', 'anthropic'] in its class" in said, target
        assert "('openai'" not in said
    assert Spoken(("gemini",), "declared", "it says so").hint("./m.mjs") == ""


def test_an_adapter_typo_is_no_missing_module():
    with pytest.raises(LoadError) as raised:
        load_target("langchain:trim_message")
    assert "there is no adapter 'langchain:trim_message'" in str(raised.value)
    assert "--list-adapters" in str(raised.value)
    assert "no module named" not in str(raised.value)


def test_plain_methods_are_refused_when_loaded_all_named(tmp_path):
    """A class is refused before anything is built; a factory's product when built. Both
    are PlainMethods: a LoadError (exit 2) and a ContractError."""
    import asyncio

    from ctxkit.conformance.targets.load import EventRecorder, PlainMethods

    names = "add_message, get_messages_for_request, get_messages, set_messages and clear"
    with pytest.raises(PlainMethods, match=re.escape(f"{names} are plain functions")):
        load_target("tests.zoo.misc:SyncMethods")
    factory = tmp_path / "factory.py"
    factory.write_text(
        "from tests.zoo.misc import SyncMethods\n\ndef make():\n    return SyncMethods()\n"
    )
    target = load_target(f"{factory}:make")  # what it builds is known once built
    with pytest.raises(PlainMethods, match="declare them `async def`") as raised:
        asyncio.run(target.build(EventRecorder()))
    assert isinstance(raised.value, ContractError)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (
            ["langchain:trim_message"],
            ["there is no adapter 'langchain:trim_message'; did you mean langchain:trim_messages?",
             "`ctxkit conformance --list-adapters`"],
        ),
        (
            ["tests.zoo.misc:SyncMethods"],
            ["SyncMethods.add_message, get_messages_for_request, get_messages, set_messages and "
             "clear are plain functions", "declare them `async def`"],
        ),
        (
            ["--profle", "quick"],
            ["usage: ctxkit conformance", "unknown option --profle; did you mean --profile?"],
        ),
    ],
)  # fmt: skip
def test_a_mistake_exits_2_with_a_sentence(args, fragments):
    done = conformance(*args, *FAST)
    assert done.returncode == 2, done.stderr
    for fragment in fragments:
        assert fragment in done.stderr
    assert "Traceback" not in done.stderr
    assert "lifecycle" not in done.stdout + done.stderr


# -- the command --------------------------------------------------------------------------------


def test_help_teaches_targets_relaxations_and_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["conformance", "--help"])
    out = capsys.readouterr().out
    for fragment in ("exit codes", "--junit", "ctxkit help conformance TOPIC"):
        assert fragment in out
    for topic, fragments in (("targets", ("ep:NAME",)), ("relaxations", ("hoisted-system",))):
        assert main(["help", "conformance", topic]) == 0
        said = capsys.readouterr().out
        assert all(f in said for f in fragments), said
    assert main(["help", "conformance", "relaxations"]) == 0
    assert "budget-tolerance=R" in capsys.readouterr().out


def test_the_reference_manager_passes_and_writes_both_reports(tmp_path: Path):
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    done = conformance(*FAST, "--report-json", str(report), "--junit", str(junit), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS: every required property holds" in done.stdout
    assert "seed 5" in done.stderr
    data = valid("report", json.loads(report.read_text()))
    assert set(data) >= {"target", "verdict", "seed", "duration_s", "properties"}
    assert data["verdict"] == "pass"
    assert data["seed"] == 5
    assert [p["id"] for p in data["properties"]][:4] == [
        "tool_pair_integrity",
        "ordering",
        "non_destructive",
        "lifecycle",
    ]
    for entry in data["properties"]:
        assert set(entry) == {
            "id",
            "level",
            "status",
            "message",
            "counterexample",
            "reproducer",
            "verified",
            "verification",
            "time_to_failure_s",
            "figure",
        }
        assert entry["status"] == "passed"
    (stability,) = [p for p in data["properties"] if p["id"] == "cache_stability"]
    assert stability["level"] == "advisory"
    assert stability["figure"] >= STABILITY_THRESHOLD
    # where the time went: each phase measured; the ones in turn within the run's duration,
    # and the cache loop beside them (the default schedule), said so
    phases = data["phases"]
    assert phases["start_s"] > 0
    assert phases["search_s"] > 0
    assert phases["cache_loop_s"] > 0
    assert phases["beside"] == ["cache_loop"]
    assert phases["search_s"] == pytest.approx(sum(phases["searches_s"]), abs=0.01)
    in_turn = [
        v
        for k, v in phases.items()
        if k.endswith("_s") and k != "searches_s" and k[: -len("_s")] not in phases["beside"]
    ]
    assert sum(in_turn) <= data["duration_s"] + 0.01
    assert phases["cache_loop_s"] <= data["duration_s"]
    assert "  time: starting the target " in done.stdout
    assert "searching " in done.stdout
    assert re.search(r"cache loop \d+\.\d s beside", done.stdout)
    assert data["depth"]["schedule"] == "single"
    assert data["depth"]["examples_per_search"] == [8]  # FAST: --max-examples 8
    suite = ElementTree.parse(junit).getroot()
    assert suite.get("tests") == "12"
    assert suite.get("failures") == "0"
    (case,) = [c for c in suite if c.get("name") == "cache_stability"]
    assert case.find("properties/property").get("value") == str(stability["figure"])


QUICK = ["--profile", "quick", "--seed", "5", "--timeout", "20"]


def test_the_persistent_configuration_passes_and_leaves_no_files(tmp_path: Path):
    """Every run's manager writes its history file (fsync always) and is closed after it."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(scratch))
    done = subprocess.run(
        [sys.executable, "-m", "ctxkit", "conformance", "ctxkit.reference:scratch_manager", *QUICK],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS: every required property holds" in done.stdout
    assert done.stdout.count(" pass\n") == 11
    assert list(scratch.iterdir()) == []


def test_a_required_failure_exits_1_with_a_runnable_reproducer(tmp_path: Path):
    report = tmp_path / "report.json"
    done = conformance(
        "tests.zoo.pairs:SplitsPairsOpenAI", "--profile", "quick", "--seed", "4",
        "--report-json", str(report),
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "tool_pair_integrity failed: view[" in done.stdout
    assert re.search(r"but no (assistant message|tool_use block) in the view calls", done.stdout)
    (failure,) = [
        p
        for p in valid("report", json.loads(report.read_text()))["properties"]
        if p["status"] == "failed"
    ]
    assert failure["counterexample"]["messages"] <= 10  # shrunk from dozens
    script = tmp_path / "repro.py"
    script.write_text(failure["reproducer"])
    replay = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=False,
    )
    assert replay.returncode == 1
    assert "AssertionError" in replay.stderr
    assert re.search(r"tool result for call_|tool_result block for toolu_", replay.stderr)


def test_only_recommended_failures_exit_0():
    done = conformance("tests.zoo.views:DropsSystemPrompt", *FAST)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "preservation         recommended  FAIL" in done.stdout
    assert "recommended properties failing: preservation" in done.stdout


def test_a_manager_that_never_compacts_exits_4_with_its_figures_and_its_failures_beside(
    tmp_path: Path,
):
    """IgnoresBudget keeps every message: no view is ever compacted, so the run, though
    every required property held, is inconclusive, with its budget failure said beside."""
    report = tmp_path / "r.json"
    done = conformance(
        "tests.zoo.views:IgnoresBudget", *FAST, "--max-tokens", "30000",
        "--report-json", str(report),
    )  # fmt: skip
    assert done.returncode == 4, done.stdout + done.stderr
    written = valid("report", json.loads(report.read_text()))
    assert written["verdict"] == "inconclusive"
    assert written["depth"]["compacted_views"] == 0
    assert written["depth"]["largest_history_tokens"] >= 30_000
    assert "growing a history toward 30,000 tokens" in done.stderr
    assert "INCONCLUSIVE: every required property held, but the manager never compacted" in (
        done.stdout
    )
    assert "a larger --max-tokens (now 30,000)" in done.stdout
    assert "recommended properties failing: budget" in done.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["no_such_module_xyz:Thing"], "no module named"),
        (["tests.zoo.broken_import:Manager"], "does_not_exist_ctxkit_zoo"),
        (["--config", "{not json"], "--config is not valid JSON"),
        (["--config", "[1, 2]"], "must be a JSON object"),
        (["--config", "[" * 5_000], "--config nests too deeply"),
        (["--config", '{"a": ' + "9" * 5_000 + "}"], "--config is not valid JSON: Exceeds the"),
        (["--allow", "everything"], "unknown relaxation 'everything'"),
        (["--allow", "budget-tolerance=9"], "ratio from 0 to 1"),
        (["ctxkit.reference:ReferenceContextManager", "--config", '{"max_tokns": 5}'], "max_tokns"),
        (["--timeout", "nan"], "--timeout must be a positive number of seconds, got nan"),
        (["--deadline", "inf"], "--deadline must be a positive number of seconds, got inf"),
        (["--shrink-seconds", "0"], "--shrink-seconds must be a positive number of seconds"),
        (["--junit", "/dev/null/junit.xml"], "--junit /dev/null/junit.xml: /dev/null is not a"),
        (["--report-json", "/"], "--report-json /: is a directory"),
        (["ctxkit.reference.ReferenceContextManager"], "Did you mean ctxkit.reference:Refer"),
    ],
)
def test_setup_problems_exit_2_without_a_traceback(args, fragment):
    done = conformance(*FAST, *args)  # args last: they win over FAST's
    assert done.returncode == 2, done.stdout + done.stderr
    assert fragment in done.stderr
    assert "Traceback" not in done.stderr


def test_a_hang_exits_1_and_says_timed_out():
    done = conformance("tests.zoo.misc:Hangs", "--profile", "quick", "--timeout", "1")
    assert done.returncode == 1
    assert "timed out" in done.stdout
    assert "ERROR: a required property could not be checked" in done.stdout


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("sys.exit(3)", "called sys.exit"),
        ("os._exit(9)", "process died during add_message"),
    ],
)
def test_a_target_that_exits_is_an_error_not_a_crash_of_ours(tmp_path: Path, body, fragment):
    target = tmp_path / "quitter.py"
    target.write_text(
        "import os, sys\n\n\n"
        "class Quitter:\n"
        "    def __init__(self):\n"
        "        self.messages = []\n\n"
        "    async def add_message(self, message):\n"
        f"        {body}\n\n"
        "    async def get_messages_for_request(self, token_budget=None, provider=None):\n"
        "        return []\n\n"
        "    async def get_messages(self):\n"
        "        return list(self.messages)\n\n"
        "    async def set_messages(self, messages):\n"
        "        self.messages = list(messages)\n\n"
        "    async def clear(self):\n"
        "        self.messages = []\n"
    )
    done = conformance(f"{target}:Quitter", *FAST)
    assert done.returncode == 1, done.stdout + done.stderr
    assert fragment in done.stdout
    assert "ERROR: a required property could not be checked" in done.stdout
    assert "Traceback" not in done.stderr


def test_anthropic_only_format_generates_no_openai_calls(tmp_path: Path):
    report = tmp_path / "report.json"
    done = conformance(
        "tests.zoo.pairs:SplitsPairsOpenAI", "--shapes", "anthropic", *FAST,
        "--report-json", str(report),
    )  # fmt: skip
    text = report.read_text()
    assert "tool_calls" not in text, done.stdout


# -- the pytest plugin -------------------------------------------------------------------------


def test_pytest_plugin_runs_the_suite_inside_a_test_run(tmp_path: Path):
    (tmp_path / "test_mine.py").write_text(
        "from ctxkit.conformance.plugin import ConformanceSuite\n\n\n"
        "class TestGood(ConformanceSuite):\n"
        "    target = 'tests.zoo.base:GoodManager'\n"
        "    profile = 'quick'\n\n\n"
        "class TestBroken(ConformanceSuite):\n"
        "    target = 'tests.zoo.pairs:SplitsPairsOpenAI'\n"
        "    profile = 'quick'\n"
    )
    done = subprocess.run(
        [*PLUGIN_PYTEST, "-q", "--ctxkit-seed", "4",
         "--ctxkit-max-examples", "8", "--ctxkit-shrink-seconds", "3",
         str(tmp_path / "test_mine.py")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)), check=False,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 1, out
    assert "FAILED test_mine.py::TestBroken::test_property[tool_pair_integrity]" in out
    assert "TestGood" not in out.split("short test summary")[-1]  # the good one passes all
    assert "1 failed, 21 passed" in out


def test_pytest_plugin_checks_the_packaged_suite_from_the_command_line(tmp_path: Path):
    done = subprocess.run(
        [*PLUGIN_PYTEST, "--pyargs",
         "ctxkit.conformance.suite", "--ctxkit-target", "tests.zoo.base:GoodManager",
         "--ctxkit-profile", "quick"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "11 passed" in done.stdout
    assert "ctxkit conformance: target tests.zoo.base:GoodManager" in done.stdout


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The plugin in a pytest of its own, shrinking briefly (as FAST does)."""
    return subprocess.run(
        [*PLUGIN_PYTEST, "--ctxkit-shrink-seconds", "3", *args],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)), check=False,
    )  # fmt: skip


def test_a_plugin_failure_shows_what_the_command_shows(tmp_path: Path):
    done = _pytest(
        tmp_path, "--pyargs", "ctxkit.conformance.suite", "--ctxkit-target",
        "tests.zoo.pairs:SplitsPairsOpenAI", "--ctxkit-profile", "quick", "--ctxkit-seed", "3",
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 1, out
    for fragment in (
        "tool_pair_integrity failed (required): view[",
        "what must hold: in every view",
        "seed 3",
        "reproducer (verified: the script fails",
        "def test_tool_pair_integrity() -> None:",
    ):
        assert fragment in out
    assert "Traceback" not in out


def test_the_strict_flag_fails_recommended_properties_too(tmp_path: Path):
    # About 20 s on a loaded machine: two whole suite runs in pytests of their own, as a flag
    # on the command line cannot change within one.
    base = ["--pyargs", "ctxkit.conformance.suite", "--ctxkit-target",
            "tests.zoo.views:DropsSystemPrompt", "--ctxkit-profile", "quick", "-q",
            "--ctxkit-max-examples", "8"]  # fmt: skip
    assert "2 xfailed" in _pytest(tmp_path, *base).stdout  # preservation, cache_stability
    strict = _pytest(tmp_path, *base, "--ctxkit-strict")
    assert strict.returncode == 1
    assert "FAILED" in strict.stdout
    assert "test_property[preservation]" in strict.stdout


def test_the_packaged_suite_without_a_target_is_an_error_not_a_green_run(tmp_path: Path):
    done = _pytest(tmp_path, "--pyargs", "ctxkit.conformance.suite")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "has no target" in done.stderr
    assert "--ctxkit-target" in done.stderr


def test_a_bad_target_is_one_clear_failure(tmp_path: Path):
    done = _pytest(
        tmp_path, "--pyargs", "ctxkit.conformance.suite", "--ctxkit-target", "no_such_mod:X", "-q"
    )
    assert done.returncode == 1
    assert "1 failed, 11 skipped" in done.stdout
    assert "cannot check no_such_mod:X: no_such_mod:X: no module named 'no_such_mod'" in done.stdout
    assert "Traceback" not in done.stdout


def test_allow_repeats_or_takes_commas_in_the_plugin(tmp_path: Path):
    """The three ways to write relaxations read alike (the header says what a run allows,
    before anything runs), and what is read is what the run applies."""
    suite = ["--pyargs", "ctxkit.conformance.suite", "--ctxkit-target",
             "tests.zoo.views:HoistsSystem"]  # fmt: skip
    for allow, said in (
        (["--ctxkit-allow", "hoisted-system"], "hoisted-system"),
        (["--ctxkit-allow", "hoisted-system,dropped-system"], "hoisted-system, dropped-system"),
        (["--ctxkit-allow", "dropped-system", "--ctxkit-allow", "hoisted-system"],
         "dropped-system, hoisted-system"),
    ):  # fmt: skip
        header = _pytest(tmp_path, *suite, "--collect-only", *allow)
        assert f"allowing {said}\n" in header.stdout, header.stdout
    done = _pytest(
        tmp_path, *suite, "--ctxkit-profile", "quick", "--ctxkit-max-examples", "8", "-q",
        "--ctxkit-allow", "dropped-system", "--ctxkit-allow", "hoisted-system",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout


@pytest.mark.long
def test_the_plugin_judges_the_shapes_a_suite_or_the_command_line_names(tmp_path: Path):
    """A Gemini-contents store that declares nothing refuses everything but Gemini contents:
    by default (Chat Completions) lifecycle fails; a suite's `shapes`, or --ctxkit-shapes,
    judges it in its shape, where it passes, and the header says which shapes."""
    # About 25 s on a loaded machine: five pytests of their own, three of them whole runs, as
    # a suite's class and each command line are read at start-up.
    (tmp_path / "test_gemini.py").write_text(
        "from ctxkit.conformance.plugin import ConformanceSuite\n\n\n"
        "class TestGemini(ConformanceSuite):\n"
        "    target = 'tests.zoo.permissive:GeminiContents'\n"
        "    shapes = 'gemini'\n"
        "    profile = 'quick'\n"
    )
    declared = _pytest(tmp_path, "-q", "--ctxkit-max-examples", "8", "test_gemini.py")
    assert declared.returncode == 0, declared.stdout
    suite = ["--pyargs", "ctxkit.conformance.suite", "--ctxkit-target",
             "tests.zoo.permissive:GeminiContents", "--ctxkit-profile", "quick",
             "--ctxkit-max-examples", "8"]  # fmt: skip
    header = _pytest(tmp_path, *suite, "--collect-only", "--ctxkit-shapes", "gemini")
    assert "shapes gemini" in header.stdout, header.stdout
    assert _pytest(tmp_path, *suite, "--ctxkit-shapes", "gemini").returncode == 0
    default = _pytest(tmp_path, *suite)
    assert default.returncode == 1, default.stdout
    assert "judged in openai: nothing declares the shapes the target speaks" in default.stdout
    bad = _pytest(tmp_path, *suite, "--ctxkit-shapes", "gemni")
    assert bad.returncode == 4
    assert "unknown shape gemni (did you mean gemini?)" in bad.stderr


def test_a_keyboard_interrupt_is_not_called_sys_exit(tmp_path: Path):
    target = tmp_path / "interrupted.py"
    target.write_text(
        "from tests.zoo.base import GoodManager\n\n\n"
        "class Interrupted(GoodManager):\n"
        "    async def clear(self):\n"
        "        raise KeyboardInterrupt\n"
    )
    done = conformance(f"{target}:Interrupted", *FAST)
    assert "the target raised KeyboardInterrupt during clear" in done.stdout, done.stdout
    assert "sys.exit" not in done.stdout


def test_a_recommended_failure_fails_junit_and_the_exit_code_only_with_strict(tmp_path):
    """One verdict everywhere: without --strict a recommended failure shows (JUnit
    system-out, JSON) but fails nothing; with it, exit code, JUnit and JSON all fail."""
    target = "tests.zoo.views:DropsSystemPrompt"
    for strict in (False, True):
        junit, report = tmp_path / f"j{strict}.xml", tmp_path / f"r{strict}.json"
        done = conformance(
            target, *FAST, "--junit", str(junit), "--report-json", str(report),
            *(["--strict"] if strict else []),
        )  # fmt: skip
        written = valid("report", json.loads(report.read_text()))
        dropped = next(p for p in written["properties"] if p["id"] == "preservation")
        assert dropped["status"] == "failed", done.stdout
        suite = ElementTree.parse(junit).getroot()
        case = next(c for c in suite.iter("testcase") if c.get("name") == "preservation")
        assert (case.find("failure") is not None) is strict
        assert suite.get("failures") == ("1" if strict else "0")
        assert written["strict"] is strict
        assert written["verdict"] == ("fail" if strict else "pass")
        assert done.returncode == (1 if strict else 0), done.stdout + done.stderr
        if not strict:
            assert "a failure with --strict" in case.find("system-out").text
