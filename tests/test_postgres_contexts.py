"""``ctxkit contexts`` over a PostgreSQL database, and ``copy`` between a history file and a
database: checksums and records kept byte for byte, nothing overwritten, a conversation a
manager has open never copied, one-line errors (exit 2). A real server: the session's cluster,
each test in a database of its own."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from ctxkit.cli import EXIT_FOUND_PROBLEM, EXIT_OK, EXIT_USAGE
from ctxkit.reference import ReferenceContextManager
from ctxkit.workload import conversation
from tests.test_contexts_cli import one_line_error
from tests.test_contexts_cli import run as cli

DAY = 86_400


@pytest.fixture
def database(postgres: Any) -> str:
    """A new database with three conversations: active, expired (with a checkpoint and a
    working state), and one a manager of this test holds open (``held``)."""
    url = postgres.new_database()
    now = time.time()

    async def fill(name: str, at: float, **extra: Any) -> None:
        async with ReferenceContextManager(
            store=url, conversation=name, fsync="never", clock=lambda: at
        ) as manager:
            for message in conversation(6, seed=len(name)):
                await manager.add_message(message)
            if extra:
                await manager.checkpoint("start")
                await manager.set_working_state({"step": 2})

    asyncio.run(fill("fresh", now - 30))
    asyncio.run(fill("old", now - 2 * DAY, working=True))
    return url


def test_list_show_and_expire_over_a_database(database: str, capsys):
    held = ReferenceContextManager(store=database, conversation="busy", fsync="never")
    try:
        code, out, _ = cli(capsys, "list", database)
        assert code == EXIT_OK
        rows = {line.split()[0]: line.split() for line in out.splitlines()[1:4]}
        assert rows["fresh"][1:3] == ["active", "-"]
        assert rows["old"][1] == "expired"
        assert rows["busy"][1:5] == ["active", "ctxkit", "pid", str(__import__("os").getpid())]
        assert out.splitlines()[-1].startswith("3 in postgresql://")

        code, out, _ = cli(capsys, "show", database, "old", "--json")
        shown = json.loads(out)
        assert code == EXIT_OK
        assert (shown["state"], shown["messages"], shown["working_state"]) == (
            "expired",
            6,
            {"step": 2},
        )
        assert [point["label"] for point in shown["checkpoints"]] == ["start"]
        assert shown["path"].endswith("#old")

        code, out, err = cli(capsys, "show", database, "nobody")
        assert code == EXIT_USAGE
        one_line_error(err, "no conversation 'nobody'")

        code, out, _ = cli(capsys, "expire", database)
        assert code == EXIT_OK
        assert out.startswith("archived old")
        code, out, _ = cli(capsys, "expire", database, "busy")
        assert code == EXIT_FOUND_PROBLEM
        assert "skipped busy: open by ctxkit pid" in out
        code, out, _ = cli(capsys, "list", database, "--json")
        assert [c["id"] for c in json.loads(out)["conversations"]] == ["busy", "fresh"]
        code, out, _ = cli(capsys, "list", database, "--archived", "--json")
        states = {c["id"]: c["state"] for c in json.loads(out)["conversations"]}
        assert states == {"busy": "active", "fresh": "active", "old": "archived"}
    finally:
        held.close()
    ReferenceContextManager(store=database, conversation="old").close()  # opened: back
    code, out, _ = cli(capsys, "list", database)
    assert "old" in out
    assert "archived" not in out


def test_copy_a_file_into_a_database_and_back_byte_for_byte(database: str, tmp_path: Path, capsys):
    path = tmp_path / "chat.jsonl"

    async def write() -> None:
        async with ReferenceContextManager(storage_path=path, max_tokens=3_000) as manager:
            for message in conversation(40, seed=3):
                await manager.add_message(message)
            await manager.checkpoint("half")
            await manager.get_messages_for_request()  # an audit entry
            await manager.add_task("ship it")

    asyncio.run(write())
    code, out, _ = cli(capsys, "copy", str(path), database)
    assert code == EXIT_OK
    assert "40 messages" in out
    assert "checked line by line" in out

    async def reopened() -> tuple[list[Any], list[Any], Any]:
        async with ReferenceContextManager(store=database, conversation="chat") as manager:
            return await manager.get_messages(), manager.audit(), await manager.get_tasks()

    messages, audit, tasks = asyncio.run(reopened())
    assert messages == conversation(40, seed=3)
    assert audit
    assert tasks["active_tasks"][0]["text"] == "ship it"

    code, out, err = cli(capsys, "copy", str(path), database)
    assert code == EXIT_USAGE
    one_line_error(err, "exists already: nothing was copied")

    code, out, _ = cli(capsys, "copy", f"{database}#chat", str(tmp_path / "back") + "/")
    assert code == EXIT_OK
    assert (tmp_path / "back" / "chat.jsonl").read_bytes() == path.read_bytes()
    code, out, err = cli(capsys, "copy", f"{database}#chat", str(tmp_path / "back" / "chat.jsonl"))
    assert code == EXIT_USAGE
    one_line_error(err, "exists already")


def test_copy_refuses_a_source_a_manager_has_open(database: str, tmp_path: Path, capsys):
    path = tmp_path / "open.jsonl"
    with_file = ReferenceContextManager(storage_path=path)
    try:
        code, _, err = cli(capsys, "copy", str(path), database)
        assert code == EXIT_USAGE
        one_line_error(err, "is open by process")
    finally:
        with_file.close()
    in_database = ReferenceContextManager(store=database, conversation="live")
    try:
        code, _, err = cli(capsys, "copy", f"{database}#live", str(tmp_path / "live.jsonl"))
        assert code == EXIT_USAGE
        one_line_error(err, "is open by ctxkit pid")
        assert not (tmp_path / "live.jsonl").exists()
    finally:
        in_database.close()


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["list", "postgresql://127.0.0.1/x?bogus=1"], "not a valid PostgreSQL connection"),
        (["copy", "a.jsonl", "b.jsonl"], "one of SOURCE and DESTINATION is a postgresql://"),
        (["copy", "postgresql://127.0.0.1/x", "b.jsonl"], "give URL#NAME"),
    ],
)
def test_mistakes_are_one_line_exit_2(argv: list[str], fragment: str, capsys):
    code, _, err = cli(capsys, *argv)
    assert code == EXIT_USAGE
    one_line_error(err, fragment)


def test_a_database_that_is_not_there_is_one_line_exit_2(capsys):
    from tests.ports import free_port

    code, _, err = cli(capsys, "list", f"postgresql://nobody:secret@127.0.0.1:{free_port()}/x")
    assert code == EXIT_USAGE
    one_line_error(err, "the database cannot be reached")
    assert "secret" not in err
