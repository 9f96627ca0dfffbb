"""``ctxkit contexts`` on the command line: list, show and expire, their JSON, exit codes, and
one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxkit.cli import EXIT_FOUND_PROBLEM, EXIT_OK, EXIT_USAGE, main
from ctxkit.reference.journal import encode_record
from tests.stored_cases import CHAT, ROOT, T0, Holder, append, store

DAY = 86_400


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    """Four conversations: active (with a torn tail), idle, expired (with a checkpoint), and
    a file that is not a history."""
    now = time.time()
    store(tmp_path, "fresh", at=now - 30)
    append(tmp_path / "fresh.jsonl", b'{"op":"add","at":')
    store(tmp_path, "quiet", at=now - 3_600)
    store(tmp_path, "old", at=now - 2 * DAY, checkpoint="start")
    (tmp_path / "notes.jsonl").write_text('{"hello": "world"}\n')
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["contexts", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str, fragment: str) -> None:
    assert fragment in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


# -- list --------------------------------------------------------------------------------------


def test_list_is_a_table(directory: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list", str(directory))
    assert code == EXIT_OK
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "STATE", "OPEN", "LAST", "ACTIVITY", "SIZE"]
    rows = {line.split()[0]: line.split() for line in lines[1:5]}
    assert rows["fresh"][1:3] == ["active", "-"]
    assert rows["quiet"][1:5] == ["idle", "-", "1h", "ago"]
    assert rows["old"][1:5] == ["expired", "-", "2d", "ago"]
    assert rows["notes"][1:4] == ["unreadable", "-", "-"]
    assert "  notes: line 1 is not a ctxkit history header" in out
    assert lines[-1] == f"4 in {directory}: 1 active, 1 unreadable, 1 expired, 1 idle"


def test_list_json(directory: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list", str(directory), "--json", "--ttl", "3d")
    assert code == EXIT_OK
    report = json.loads(out)
    assert report["directory"] == str(directory)
    assert report["ttl_s"] == 3 * DAY
    assert report["idle_after_s"] == 300
    states = {c["id"]: c["state"] for c in report["conversations"]}
    assert states == {"fresh": "active", "notes": "unreadable", "old": "idle", "quiet": "idle"}
    fresh = next(c for c in report["conversations"] if c["id"] == "fresh")
    assert set(fresh) == {
        "id",
        "path",
        "state",
        "last_activity",
        "created",
        "size_bytes",
        "open_by",
        "encoding",
        "conversation_id",
        "reason",
        "verified",
        "age_s",
    }
    assert fresh["verified"] is True
    assert 29 <= fresh["age_s"] < 120
    assert fresh["path"] == str(directory / "fresh.jsonl")


def test_list_says_a_version_1_history_is_not_verified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header = {"ctxkit": "history", "version": 1, "conversation_id": "old", "created": T0}
    (tmp_path / "old.jsonl").write_bytes(encode_record(header, checksum=False))
    store(tmp_path, "new", at=T0)
    code, out, _ = run(capsys, "list", str(tmp_path))
    assert code == EXIT_OK
    assert "  old: not verified (a version 1 history has no checksums)" in out
    assert "new:" not in out


def test_list_defaults_to_the_environment_then_the_current_directory(
    directory: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("CTXKIT_STORAGE_DIR", str(directory))
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    assert "4 in" in run(capsys, "list")[1]
    monkeypatch.delenv("CTXKIT_STORAGE_DIR")
    assert run(capsys, "list")[1] == "no stored conversations in .\n"
    monkeypatch.chdir(directory)
    assert "4 in ." in run(capsys, "list")[1]


def test_list_archived(directory: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "expire", str(directory), "old")[0] == EXIT_OK
    assert "old" not in run(capsys, "list", str(directory))[1]
    code, out, _ = run(capsys, "list", str(directory), "--archived")
    assert code == EXIT_OK
    assert [line.split()[:2] for line in out.splitlines() if line.startswith("old")] == [
        ["old", "archived"]
    ]


# -- show --------------------------------------------------------------------------------------


def test_show(directory: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", str(directory), "fresh", "--messages", "2")
    assert code == EXIT_OK
    lines = out.splitlines()
    assert lines[0] == "fresh  active, not open"
    assert "  encoding       o200k_base" in lines
    assert any(line.startswith("  history        5 messages, ") for line in lines)
    assert "  checkpoints    none" in lines
    assert "  audit          0 entries" in lines
    assert any(line.startswith("  torn tail      line 7 (byte ") for line in lines)
    assert lines[-3] == "newest 2 of 5 messages"
    assert lines[-2].split()[:3] == ["#3", "tool", "9"]
    assert lines[-1].endswith("Two files: a.py and b.py.")


def test_show_checkpoints_and_archived(directory: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "expire", str(directory), "old")
    code, out, _ = run(capsys, "show", str(directory), "old", "--messages", "0")
    assert code == EXIT_OK
    assert out.splitlines()[0] == "old  archived, not open"
    assert '  c1 "start": 5 messages, 2d ago' in out
    assert "newest" not in out


def test_show_json(directory: Path, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CTXKIT_STORAGE_DIR", str(directory))
    code, out, _ = run(capsys, "show", "old", "--json")
    assert code == EXIT_OK
    info = json.loads(out)
    assert (info["id"], info["state"], info["open_by"]) == ("old", "expired", None)
    assert info["messages"] == len(CHAT)
    assert info["records"] == {"add": 5, "checkpoint": 1}
    assert [c["label"] for c in info["checkpoints"]] == ["start"]
    assert [m["message"] for m in info["newest"]] == CHAT
    assert info["header"]["ctxkit"] == "history"
    assert info["age_s"] >= 2 * DAY


# -- expire ------------------------------------------------------------------------------------


def test_expire_archives_expired_conversations(
    directory: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "expire", str(directory), "--dry-run")
    assert (code, out.split()[:3]) == (EXIT_OK, ["would", "archive", "old"])
    assert (directory / "old.jsonl").exists()
    code, out, _ = run(capsys, "expire", str(directory))
    assert code == EXIT_OK
    assert out.startswith(f"archived old -> {directory / 'archive' / 'old.jsonl'} (expired: ")
    code, out, _ = run(capsys, "expire", str(directory))
    assert (code, out) == (
        EXIT_OK,
        f"nothing to archive: no conversation in {directory} unused for 1d\n",
    )
    code, out, _ = run(capsys, "expire", str(directory), "--ttl", "30m", "--json")
    report = json.loads(out)
    assert report["ttl_s"] == 1_800
    assert [(a["id"], a["outcome"]) for a in report["actions"]] == [("quiet", "archived")]
    assert set(report["actions"][0]) == {
        "id",
        "source",
        "outcome",
        "reason",
        "destination",
        "open",
        "open_by",
    }


def test_expire_named_conversations(directory: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(directory)
    code, out, _ = run(capsys, "expire", "fresh", "notes")
    assert code == EXIT_OK
    assert out.splitlines() == [
        "archived fresh -> archive/fresh.jsonl (named)",
        "archived notes -> archive/notes.jsonl (named)",
    ]


def test_expire_skips_a_conversation_open_in_another_process_and_exits_1(
    directory: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    holder = Holder(directory / "old.jsonl")
    try:
        listed = run(capsys, "list", str(directory))[1]
        assert [line.split()[:3] for line in listed.splitlines() if line.startswith("old")] == [
            ["old", "expired", str(holder.pid)]
        ]
        shown = json.loads(run(capsys, "show", str(directory), "old", "--json")[1])
        assert shown["open_by"] == holder.pid
        done = subprocess.run(
            [sys.executable, "-m", "ctxkit", "contexts", "expire", str(directory)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        holder.stop()
    assert done.returncode == EXIT_FOUND_PROBLEM
    assert done.stdout == f"skipped old: open by process {holder.pid}\n"
    assert (directory / "old.jsonl").exists()


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["list", "{dir}/nope"], "no such directory: {dir}/nope"),
        (["show", "{dir}", "nope"], "no conversation 'nope' in {dir} (it has: fresh, notes, old"),
        (["show", "{dir}", "notes"], "notes.jsonl: line 1 (byte 0) is not a ctxkit history header"),
        (["show", "{dir}"], "which conversation in {dir}? ctxkit contexts show DIR ID"),
        (["show", "{dir}", "a", "b"], "show takes [DIR] ID"),
        (["show", "{dir}", "old", "--messages", "-1"], "--messages must be >= 0"),
        (["expire", "{dir}", "old", "nope"], "no conversation 'nope'"),
        (["expire", "{dir}", "old", "--ttl", "1h"], "--ttl only applies without IDs"),
        (["expire", "{dir}/nope/"], "no such directory"),
    ],
)
def test_errors_are_one_line_and_exit_2(
    directory: Path, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    argv = [arg.format(dir=directory) for arg in argv]
    code, _, err = run(capsys, *argv)
    assert code == EXIT_USAGE
    one_line_error(err, fragment.format(dir=directory))
    assert (directory / "old.jsonl").exists()


def test_an_unknown_environment_directory_says_where_it_came_from(monkeypatch, capsys) -> None:
    monkeypatch.setenv("CTXKIT_STORAGE_DIR", "/no/such/place")
    code, _, err = run(capsys, "list")
    assert code == EXIT_USAGE
    one_line_error(err, "no such directory: /no/such/place (from $CTXKIT_STORAGE_DIR)")


@pytest.mark.parametrize("duration", ["24", "1w", "-1h"])
def test_a_bad_duration_exits_2(duration: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["contexts", "list", f"--ttl={duration}"])
    assert done.value.code == EXIT_USAGE
    assert "write a number and a unit, e.g. 90s, 30m, 24h, 7d" in capsys.readouterr().err


def test_help_teaches(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["contexts", "--help"])
    out = capsys.readouterr().out
    assert "examples:" in out
    assert "CTXKIT_STORAGE_DIR" in out
    assert "exit codes: 0 ok; 1 expire skipped" in out
    for action in ("list", "show", "expire"):
        with pytest.raises(SystemExit):
            main(["contexts", action, "--help"])
        assert "examples:" in capsys.readouterr().out
    assert main(["contexts"]) == EXIT_OK
    assert "ACTION" in capsys.readouterr().out
