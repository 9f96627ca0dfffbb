"""The PostgreSQL store's own cases, on a real server (the session's cluster, tests/postgres.py):
many writers, SIGKILL mid-append, the server restarted mid-run, bad connection strings.

What holds for every store (restart, checkpoints, set_messages, the lock's error) runs on both
in tests/test_persistence.py.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ctxkit.reference import ConfigError, HistoryFileLocked, ReferenceContextManager
from ctxkit.reference.postgres import StoreUnavailable
from ctxkit.reference.postgres import connection as db
from tests.chat import run
from tests.crash_writer import message
from tests.stores import DatabasePlace

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def place(postgres: Any) -> DatabasePlace:
    return DatabasePlace(postgres.url)


async def _messages(place: DatabasePlace, **config: Any) -> list[dict[str, Any]]:
    async with place.open(lock_wait=10, **config) as manager:
        return await manager.get_messages()


# -- configuration and reaching the server -----------------------------------------------------


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"store": "mysql://x/y", "conversation": "a"}, "named by a postgresql:// URL"),
        (
            {"store": "postgresql://127.0.0.1/db?bogus=1", "conversation": "a"},
            "not a valid PostgreSQL connection",
        ),
        ({"store": "postgresql://h/db"}, "store needs conversation='ID'"),
        ({"conversation": "a"}, "give store='postgresql://"),
        ({"store": "postgresql://h/db", "conversation": "a", "storage_path": "x"}, "give one"),
        ({"store": "postgresql://h/db", "conversation": "a", "lock_wait": -1}, "lock_wait"),
    ],
)
def test_bad_store_options_are_one_sentence_config_errors(options: dict[str, Any], fragment):
    with pytest.raises(ConfigError, match=fragment) as caught:
        ReferenceContextManager(**options)
    assert "\n" not in str(caught.value)


def test_a_server_that_is_not_there_is_store_unavailable_in_one_sentence(postgres: Any):
    from tests.ports import free_port

    url = f"postgresql://nobody:secret@127.0.0.1:{free_port()}/postgres"
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="the database cannot be reached") as caught:
        ReferenceContextManager(store=url, conversation="a")
    assert time.monotonic() - started < 15
    assert "secret" not in str(caught.value)  # the password is never shown
    assert "\n" not in str(caught.value)


def test_rows_are_the_history_files_lines(place: DatabasePlace):
    """Every row is the line a history file would hold, checksum and token counts included."""
    from ctxkit.reference.journal import checksum_problem

    run(_fill(place, [{"role": "user", "content": "héllo \ud800"}]))

    async def rows() -> list[tuple[int, str, str]]:
        pool = await db.pool(place.url)
        async with pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT seq, op, line FROM ctxkit_records WHERE conversation = %s ORDER BY seq",
                (place.name,),
            )
            return await cursor.fetchall()

    stored = db.call(rows())
    assert [(seq, op) for seq, op, _ in stored] == [(1, "header"), (2, "add")]
    assert all(checksum_problem(line.encode("ascii")) is None for _, _, line in stored)
    assert place.records()[0]["message"] == {"role": "user", "content": "héllo \ud800"}


async def _fill(place: DatabasePlace, messages: list[dict[str, Any]], **config: Any) -> None:
    async with place.open(**config) as manager:
        for item in messages:
            await manager.add_message(item)


def test_the_loop_goes_on_while_a_change_is_committed(place: DatabasePlace):
    """The row is written from a worker thread: a task on the caller's loop keeps running."""

    async def scenario() -> int:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0)

        async with place.open(fsync="always") as manager:
            task = asyncio.create_task(ticker())
            for i in range(20):
                await manager.add_message(message(i))
            stop.set()
            await task
        return ticks

    assert run(scenario()) > 20


# -- many writers (two processes on one conversation: tests/test_persistence.py) ---------------


def test_a_writer_that_lost_the_conversation_is_refused_not_interleaved(place: DatabasePlace):
    """Should a row appear that this writer did not write (a lock lost with its connection,
    another writer meanwhile), the writer's next change is refused and nothing is stored."""

    async def scenario() -> None:
        async with place.open() as manager:
            await manager.add_message({"role": "user", "content": "one"})

            async def intrude() -> None:  # what a second writer would have committed
                pool = await db.pool(place.url)
                async with pool.connection() as connection:
                    await connection.execute(
                        "INSERT INTO ctxkit_records VALUES (%s, 3, 'clear', 1, 'x')",
                        (place.name,),
                    )

            db.call(intrude())
            with pytest.raises(HistoryFileLocked, match="row 3 was written by another writer"):
                await manager.add_message({"role": "user", "content": "two"})
            assert await manager.get_messages() == [{"role": "user", "content": "one"}]

    run(scenario())


# -- the server restarted ----------------------------------------------------------------------


def test_a_server_restart_is_a_clear_error_then_service_again(postgres: Any):
    place = DatabasePlace(postgres.url)

    async def scenario() -> None:
        async with place.open(fsync="always") as manager:
            for i in range(3):
                await manager.add_message(message(i))
            await asyncio.to_thread(postgres.restart)
            with pytest.raises(StoreUnavailable, match="the database cannot be reached") as caught:
                await manager.add_message(message(3))
            assert "\n" not in str(caught.value)
            assert await manager.get_messages() == [message(i) for i in range(3)]
            await manager.add_message(message(3))  # connects again, takes the lock again
            await manager.checkpoint("after the restart")
        assert await _messages(place) == [message(i) for i in range(4)]

    run(scenario())


# -- the conformance suite and the benchmark ---------------------------------------------------


def test_the_suite_passes_on_a_database_backed_manager(
    postgres: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """``ctxkit conformance`` on the manager with a PostgreSQL store, a new conversation per
    run (ctxkit.reference.scratch:scratch_store_manager), fsync always."""
    from tests.test_conformance_cli import QUICK, conformance

    monkeypatch.setenv("CTXKIT_STORE", postgres.url)
    done = conformance("ctxkit.reference.scratch:scratch_store_manager", *QUICK, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS: every required property holds" in done.stdout


def test_the_stores_benchmark_runs_every_store(postgres: Any, tmp_path: Path):
    import json

    out = tmp_path / "stores.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "stores.py"),
            *("--messages", "60", "--steps", "3"),
            *("--postgres", postgres.url, "--json", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    stores = json.loads(out.read_text())["stores"]
    assert len(stores) == 5
    assert all(row["appends_per_s"] > 0 for row in stores.values())
    assert "durable appends" in done.stdout


def test_a_row_changed_by_hand_is_found_and_nothing_is_changed(place: DatabasePlace):
    """A row's checksum covers its line: a message edited in the table is refused on opening,
    naming the row, as a flipped bit in a history file is."""
    from ctxkit.reference import HistoryFileCorrupt

    run(_fill(place, [message(i) for i in range(4)]))

    async def edit() -> None:
        pool = await db.pool(place.url)
        async with pool.connection() as connection:
            await connection.execute(
                "UPDATE ctxkit_records SET line = replace(line, '2:', '7:') "
                "WHERE conversation = %s AND seq = 4",
                (place.name,),
            )

    db.call(edit())
    with pytest.raises(HistoryFileCorrupt, match=r"#c-\w+: row 4 does not match its checksum"):
        place.open()
    with pytest.raises(HistoryFileCorrupt, match="No row was changed"):
        place.open()  # and the failed open left the conversation free


def test_a_change_without_an_answer_in_time_is_refused_and_checked_after(
    place: DatabasePlace, monkeypatch: pytest.MonkeyPatch
):
    """An insert held up on the server (another session locks the table) past the call's
    timeout: StoreTimeout, nothing in memory; the writer's connection goes, and the next
    change, once the server answers again, connects and checks where the rows end."""
    import psycopg

    run(_fill(place, [message(0)]))
    monkeypatch.setattr(db, "CALL_TIMEOUT", 1.0)
    blocker = psycopg.connect(place.url)
    try:

        async def scenario() -> None:
            async with place.open() as manager:
                blocker.execute("LOCK TABLE ctxkit_records IN ACCESS EXCLUSIVE MODE")
                with pytest.raises(StoreUnavailable, match="did not answer within 1 s"):
                    await manager.add_message(message(1))
                assert await manager.get_messages() == [message(0)]
                blocker.rollback()  # the table is free again
                await manager.add_message(message(1))
            assert await _messages(place) == [message(0), message(1)]

        run(scenario())
    finally:
        blocker.close()
