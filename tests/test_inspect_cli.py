"""``ctxkit inspect`` on the command line: the JSON snapshot, option checks, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxkit.cli import main
from ctxkit.demo import DemoOptions, run_demo


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stream written by the demo: two conversations, compactions, through the real writer."""
    import asyncio

    path = tmp_path_factory.mktemp("stream") / "events.jsonl"
    options = DemoOptions(
        events_path=path, duration=60, rate=float("inf"), turns=60, conversations=2
    )
    asyncio.run(run_demo(options))
    with open(path, "a") as file:
        file.write("this line is junk\n")
    return path


def snapshot(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["inspect", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_of_a_recorded_stream(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    figures = snapshot(capsys, "--follow", str(recorded), "--json")
    assert figures["skipped"] == 1
    assert figures["last_problem"].startswith("not JSON")
    ids = [c["conversation_id"] for c in figures["conversations"]]
    assert ids == ["demo-1", "demo-2"]
    for conversation in figures["conversations"]:
        assert conversation["budget"] == 20_000
        assert 0 < conversation["ratio"] <= 1
        assert conversation["compactions"] == len(conversation["compaction_log"]) > 0
        assert conversation["tokens"] == conversation["timeline"][-1][1]
        # The demo lists each view: the View pane has rows, and they add up to the view.
        shown = [r for r in conversation["listing"] if r["fate"] not in ("dropped", "summarized")]
        assert sum(r["tokens"] for r in shown) + 3 == conversation["tokens"]


def test_json_of_one_conversation(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    figures = snapshot(capsys, "--play", str(recorded), "--json", "--conversation", "demo-2")
    assert [c["conversation_id"] for c in figures["conversations"]] == ["demo-2"]


def test_json_of_the_demo_is_the_default_source(capsys: pytest.CaptureFixture[str]) -> None:
    figures = snapshot(capsys, "--json", "--turns", "30", "--budget", "8000")
    (conversation,) = figures["conversations"]
    assert conversation["budget"] == 8_000
    assert conversation["compactions"] >= 1
    assert figures["skipped"] == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--play", "missing.jsonl"], "cannot play missing.jsonl: no such file"),
        (["--follow", "missing.jsonl", "--json"], "cannot read missing.jsonl"),
        (["--follow", "x", "--speed", "2"], "--speed only applies to --play"),
        (["--play", "x", "--speed", "-1"], "--speed must be positive"),
        (["--follow", "x", "--budget", "5"], "--budget only apply to --demo"),
        (["--play", "x", "--from-end"], "--from-end only applies to --follow"),
        (["--refresh", "60"], "--refresh must be 0.5-10"),
        (["--turns", "0"], "--turns must be positive"),
        (["--conversations", "0"], "--conversations must be 1-1000"),
    ],
)
def test_bad_options_get_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert err.count("\n") == 1


def test_unknown_conversation_names_the_ones_there(
    recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", "--follow", str(recorded), "--json", "--conversation", "x"]) == 2
    assert "it has: demo-1, demo-2" in capsys.readouterr().err


def test_the_screen_needs_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    # Under pytest stdin and stdout are not terminals.
    assert main(["inspect", "--demo"]) == 2
    assert "use --json" in capsys.readouterr().err


def test_help_teaches_sources_keys_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["inspect", "--help"])
    text = capsys.readouterr().out
    for expected in ("--follow", "--play", "--demo", "q quit", "p pause", "exit codes"):
        assert expected in text
