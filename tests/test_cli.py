"""The command line: help that teaches, documented exit codes, no tracebacks without --debug."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ctxkit.cli import COMMANDS, EXIT_FOUND_PROBLEM, EXIT_OK, EXIT_USAGE, main
from tests.chat import CHAT


def test_help_lists_commands_and_exit_codes(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "usage" in out
    assert "exit codes: 0 ok, 1" in out


def test_no_command_prints_help(capsys):
    assert main([]) == EXIT_OK
    assert "COMMAND" in capsys.readouterr().out


def test_version(capsys):
    assert main(["--version"]) == EXIT_OK
    assert capsys.readouterr().out.startswith("ctxkit 0.")


@pytest.mark.parametrize(
    ("argv", "usage", "sentence"),
    [
        (["conformance", "--profle", "quick"], "usage: ctxkit conformance",
         "ctxkit conformance: error: unknown option --profle; did you mean --profile?"),
        (["survey", "--jbos", "2"], "usage: ctxkit survey", "did you mean --jobs?"),
        (["tokens", "--bugdet=3"], "usage: ctxkit tokens",
         "unknown option --bugdet; did you mean --budget?"),
        (["contexts", "list", "--jsn"], "usage: ctxkit contexts list", "did you mean --json?"),
        (["--verison"], "usage: ctxkit [", "unknown option --verison; did you mean --version?"),
        (["conformence"], "usage: ctxkit [", "did you mean 'conformance'?"),
        (["conformance", "--profile", "quack"], "usage: ctxkit conformance",
         "did you mean 'quick'?"),
        (["tokens", "--xyzzy"], "usage: ctxkit tokens",
         "unknown option --xyzzy; see ctxkit tokens --help"),
        (["tokens", "a.json", "b.json"], "usage: ctxkit tokens", "unrecognized arguments: b.json"),
    ],
)  # fmt: skip
def test_a_mistyped_option_or_command_is_named_with_the_one_meant(capsys, argv, usage, sentence):
    """Under the usage of the command it was given to, not ctxkit's, exit 2."""
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(usage)
    assert sentence in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "command",
    [["tokens"], ["conformance"], ["audit", "x.json"], ["watch"], ["demo"], ["inspect"],
     ["contexts"], ["contexts", "list"], ["survey"]],
    ids=" ".join,
)  # fmt: skip
def test_every_command_names_an_unknown_option(capsys, command):
    with pytest.raises(SystemExit) as done:
        main([*command, "--no-such-option"])
    assert done.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"usage: ctxkit {' '.join(command[:2])}".removesuffix(" x.json"))
    assert "error: unknown option --no-such-option" in err


def test_usage_on_the_synthetic_workload_reports_a_compacted_view(capsys):
    code = main(["tokens", "--messages", "400", "--budget", "20000", "--json"])
    assert code == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["budget"] == 20_000
    assert 0 < report["tokens"] <= 20_000
    assert report["compactions"] == 1
    assert report["history_tokens"] > report["tokens"]
    assert report["source"].startswith("synthetic openai conversation")


def test_usage_replays_the_conversation_for_its_prompt_cache_figure(capsys):
    """A view before each assistant message, each measured against the one before, by the
    reference's own view events; the same figure in the text and the JSON."""
    assert main(["tokens", "--messages", "300", "--budget", "20000", "--json"]) == EXIT_OK
    cache = json.loads(capsys.readouterr().out)["cache"]
    assert cache["views"] > 50
    assert 0 < cache["kept_tokens"] < cache["view_tokens"]
    assert cache["share"] == round(cache["kept_tokens"] / cache["view_tokens"], 4)
    assert main(["tokens", "--messages", "300", "--budget", "20000"]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"cache      {cache['share']:.1%} of view tokens cacheable" in out
    assert f"{cache['views']} views replayed" in out


def test_usage_text_report_shows_the_breakdown(capsys):
    assert main(["tokens", "--messages", "50", "--shapes", "anthropic"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "breakdown" in out
    assert "tool_results" in out
    assert "o200k_base (exact)" in out


def usage_json(capsys, *args: str) -> dict:
    assert main(["tokens", *args, "--json"]) == EXIT_OK
    return json.loads(capsys.readouterr().out)


def test_usage_of_ones_own_manager_measures_it_as_the_reference_is_measured(capsys):
    """The reference named as --manager is measured from outside (instrument()) and gives the
    figures it gives of itself: the same view, the same cache replay."""
    small = ["--messages", "300", "--budget", "20000"]
    own = usage_json(capsys, *small)
    outside = usage_json(
        capsys,
        *small,
        *("--manager", "ctxkit.reference:ReferenceContextManager"),
        *("--config", '{"max_tokens": 20000}'),
    )
    assert outside["target"] == "ctxkit.reference:ReferenceContextManager"
    for key in ("tokens", "messages", "history_messages", "compactions", "view", "cache"):
        assert outside[key] == own[key], key
    for category in ("system", "user", "assistant", "tool_calls", "tool_results"):
        assert outside["breakdown"][category] == own["breakdown"][category], category
    assert outside["room_until_limit"] == 20_000 - outside["tokens"]


@pytest.mark.parametrize(
    "target",
    [
        "tests.zoo.base:GoodManager",  # a contract class
        "tests.zoo.amplifier:mount",  # a mount function
        "tests.zoo.forms:keep_last_units",  # a function over the message list
        "tests.zoo.forms:LimitSession",  # an Agents SDK session
    ],
)
def test_usage_takes_a_target_in_any_form(capsys, target):
    report = usage_json(capsys, "--messages", "120", "--budget", "8000", "--manager", target)
    assert report["target"] == target
    assert report["history_messages"] == 120
    assert 0 < report["tokens"] <= 8_000 < report["history_tokens"]
    assert report["compactions"] >= 1
    assert report["cache"]["views"] > 10
    assert sum(report["view"].values()) == report["messages"]


def test_usage_of_a_target_in_words(capsys):
    args = ["tokens", "--messages", "80", "--budget", "8000", "--manager"]
    assert main([*args, "tests.zoo.base:GoodManager"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "manager    tests.zoo.base:GoodManager"
    assert any(
        line.startswith("room       ") and line.endswith(" until the limit") for line in lines
    )
    assert "until compaction" not in "\n".join(lines)  # its threshold is its own business


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (["--manager", "tests.zoo.misc:SyncMethods"], EXIT_USAGE, "declare them `async def`"),
        (["--manager", "langchain:trim_message"], EXIT_USAGE,
         "there is no adapter 'langchain:trim_message'; did you mean langchain:trim_messages?"),
        (["--manager", "tests.zoo.base:GoodManagr"], EXIT_USAGE, "did you mean GoodManager?"),
        (["--manager", "tests.zoo.base:GoodManager", "--strategies", "truncate"], EXIT_USAGE,
         "--strategies configures the reference manager"),
        (["--manager", "tests.zoo.base:GoodManager", "--config", "[]"], EXIT_USAGE,
         "--config must be a JSON object"),
        (["--config", "{}", "--form", "function"], EXIT_USAGE, "describe --manager"),
        (["--manager", "tests.zoo.forms:keep_last_units", "--config", '{"limit": 3}'], EXIT_USAGE,
         "the function takes no keyword 'limit'"),
        (["--manager", "tests.zoo.history:DropsThenRefuses"], EXIT_FOUND_PROBLEM,
         "raised ValueError: the newest message does not fit a budget of 8000 tokens"),
    ],
)  # fmt: skip
def test_usage_target_mistakes_and_failures_are_one_sentence(capsys, args, code, fragment):
    assert main(["tokens", "--messages", "60", "--budget", "8000", *args]) == code
    err = capsys.readouterr().err
    assert fragment in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("form", ["list", "object", "jsonl"])
def test_usage_reads_a_file_in_each_form(tmp_path: Path, capsys, form):
    if form == "jsonl":
        path = tmp_path / "chat.jsonl"
        path.write_text("\n".join(json.dumps(m) for m in CHAT) + "\n")
    else:
        path = tmp_path / "chat.json"
        path.write_text(json.dumps(CHAT if form == "list" else {"messages": CHAT}))
    assert main(["tokens", str(path), "--json"]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["messages"] == len(CHAT)
    assert report["history_messages"] == len(CHAT)


@pytest.mark.parametrize(
    ("content", "args", "fragment"),
    [
        (json.dumps([CHAT[0], {"content": "no role"}]), [], "message[1].role: missing"),
        ("{not json", [], "not valid JSON"),
        ('"a string"', [], "expected a list of messages"),
        (json.dumps(CHAT), ["--budget", "0"], "--budget must be positive"),
        (json.dumps(CHAT), ["--strategies", "magic"], "unknown strategies"),
        (b"\x89PNG\r\n\x1a\n\x00", [], "not UTF-8 text (byte 0 is 0x89)"),
        ('[{"role": "user", "content": "caf\u00e9"}]'.encode("latin-1"), [], "byte 33 is 0xe9"),
        ("[" * 100_000 + "]" * 100_000, [], "nests too deeply to be a list of messages"),
        ('[{"role": "user", "content": ' + "9" * 5_000 + "}]", [], "not valid JSON (Exceeds"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(tmp_path: Path, capsys, content, args, fragment):
    path = tmp_path / "chat.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    assert main(["tokens", str(path), *args]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert fragment in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_an_endless_file_is_read_only_up_to_the_limit(monkeypatch, capsys):
    monkeypatch.setattr("ctxkit.cli.tokens.MAX_INPUT_BYTES", 1 << 20)
    assert main(["tokens", "/dev/zero"]) == EXIT_USAGE
    assert "/dev/zero: larger than 1 MiB" in capsys.readouterr().err


def test_a_pipe_closed_before_the_output_is_no_error():
    """`ctxkit tokens | head -0`: the reader is gone before the first line is written."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ctxkit", "tokens", "--messages", "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    process.stdout.close()
    _, err = process.communicate(timeout=60)
    assert process.returncode == EXIT_OK
    assert err == b""


def test_every_seeded_command_has_the_same_default_seed():
    from ctxkit.cli import _parser
    from ctxkit.cli.options import DEFAULT_SEED
    from ctxkit.demo import DemoOptions

    parser = _parser()
    for command in (["tokens"], ["demo"], ["inspect", "--demo"], ["survey"], ["conformance"]):
        assert parser.parse_args(command).seed == DEFAULT_SEED, command
    assert DemoOptions().seed == DEFAULT_SEED
    from ctxkit.conformance.plugin import DEFAULT_SEED as PLUGIN_SEED
    from ctxkit.conformance.runner import RunOptions

    assert RunOptions().seed == PLUGIN_SEED == DEFAULT_SEED  # the suite's, run in any way
    # the same command gives the same verdict; exploring is asked for
    assert parser.parse_args(["conformance", "--seed", "random"]).seed == "random"
    assert parser.parse_args(["conformance", "--seed", "7"]).seed == 7


def test_a_seed_that_is_neither_a_number_nor_random_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["conformance", "--seed", "lucky"])
    assert exited.value.code == EXIT_USAGE
    assert "'lucky' is neither a whole number nor 'random'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [[], ["tokens"], ["conformance"], ["audit"], ["replay"], ["watch"], ["demo"], ["inspect"],
     ["contexts"], ["contexts", "list"], ["survey"]],
)  # fmt: skip
def test_every_command_answers_version_as_the_bare_command_does(command, capsys):
    """--version everywhere or nowhere (issue 47): `conformance --version` answered "did you
    mean --no-verify?"."""
    try:
        code = main([*command, "--version"])
    except SystemExit as exited:
        code = exited.code
    assert code == 0
    from ctxkit import __version__

    assert capsys.readouterr().out.strip() == f"ctxkit {__version__} (ctxkit-llm)"


def test_missing_file_exits_2(tmp_path: Path, capsys):
    assert main(["tokens", str(tmp_path / "nope.json")]) == EXIT_USAGE
    assert "cannot read" in capsys.readouterr().err


def test_budget_below_the_pinned_content_exits_1(tmp_path: Path, capsys):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT))
    assert main(["tokens", str(path), "--budget", "20"]) == EXIT_FOUND_PROBLEM
    assert "over the budget of 20" in capsys.readouterr().err


def test_debug_shows_the_traceback(tmp_path: Path):
    path = tmp_path / "chat.json"
    path.write_text("{not json")
    with pytest.raises(Exception, match="not valid JSON"):
        main(["tokens", str(path), "--debug"])


def test_python_dash_m_runs_the_cli():
    done = subprocess.run(
        [sys.executable, "-m", "ctxkit", "tokens", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert "examples:" in done.stdout


@pytest.mark.parametrize("module", ["ctxkit", "ctxkit.cli"])
def test_a_mistake_is_exit_2_however_the_cli_is_started(module: str):
    """``python -m ctxkit.cli`` loads the module a second time as __main__; a command's
    usage error must still be a usage error there, not an internal one."""
    done = subprocess.run(
        [sys.executable, "-m", module, "survey", "--jobs", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "--jobs must be at least 1" in done.stderr


def test_a_reader_that_stops_early_is_no_error(monkeypatch, capsys):
    """`ctxkit ... | head`: a closed pipe ends the command quietly, exit 0, not exit 3."""
    from ctxkit.cli import conformance

    def closed(_args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(conformance, "run_conformance", closed)
    monkeypatch.setattr("ctxkit.cli._quiet_stdout", lambda: None)
    assert main(["conformance", "--list-adapters"]) == EXIT_OK
    assert "internal error" not in capsys.readouterr().err


SCREEN = 66
"""Lines of a command's ``--help`` at 100 columns: what fits a screen."""


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "inspector"] + ["inspect"])
def test_each_commands_help_fits_a_screen_and_every_topic_it_names_is_there(
    capsys, monkeypatch, command
):
    """The rest of a command's help is behind a topic: ``--help`` names them, ``ctxkit help
    COMMAND TOPIC`` prints each, and ``options`` lists every option."""
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    assert len(out.splitlines()) <= SCREEN, out
    named = re.search(r"ctxkit help \S+ TOPIC \(topics: ([^)]*)\)", out)
    for topic in named[1].split(", ") if named else ():
        assert main(["help", command, topic]) == 0
        assert capsys.readouterr().out.strip()
    assert main(["help", command, "nonesuch"]) == EXIT_USAGE
    assert "no such topic" in capsys.readouterr().err
