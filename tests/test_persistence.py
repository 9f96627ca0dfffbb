"""The reference manager with a history file: restart, torn tails, damage, locks, checkpoints.

Real files and, where a second process matters, real processes. The tests that hold for any
store run on a history file and on PostgreSQL (the ``place`` fixture, tests/stores.py); the
database's own (outages, many writers) are in tests/test_postgres_store.py. The crash test
(SIGKILL at random moments) is tests/test_crash.py.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ctxkit.conformance.search.conversations import conversations, plain_messages
from ctxkit.messages import InvalidMessage
from ctxkit.reference import ContextBudgetExceeded, ReferenceContextManager, mount
from ctxkit.reference.journal import (
    HistoryFileCorrupt,
    HistoryFileError,
    HistoryFileLocked,
    read_history_file,
)
from ctxkit.reference.timeline import UnknownCheckpoint
from ctxkit.tokens import TokenCounter
from ctxkit.workload import conversation
from tests.chat import run
from tests.stores import STORES, DatabasePlace, FilePlace, opened_after_crash, place_for

ROOT = Path(__file__).resolve().parent.parent


Place = FilePlace | DatabasePlace


@pytest.fixture(params=STORES)
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    """A new conversation in a history file, then in the session's PostgreSQL cluster."""
    return place_for(request, request.param, tmp_path)


def opened(where: Path | Place, **config: Any) -> ReferenceContextManager:
    if isinstance(where, Path):
        return ReferenceContextManager(storage_path=where, fsync="never", **config)
    return where.open(**config)


async def fill(where: Path | Place, messages: list[dict[str, Any]], **config: Any) -> None:
    async with opened(where, **config) as manager:
        for message in messages:
            await manager.add_message(message)


# -- restart -----------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_a_reopened_manager_has_the_same_history_and_the_same_views(place: Place, shape):
    path = place
    messages = conversation(120, seed=3, shape=shape)

    async def views(manager: ReferenceContextManager) -> list[Any]:
        return [await manager.get_messages_for_request(token_budget=b) for b in (3_000, 20_000)]

    async def scenario() -> None:
        await fill(path, messages, max_tokens=8_000)
        async with opened(path, max_tokens=8_000) as again:
            assert await again.get_messages() == messages
            assert again.loaded_from_file
            assert again.conversation_id == place.name
            fresh = ReferenceContextManager(max_tokens=8_000)
            for message in messages:
                await fresh.add_message(message)
            assert await views(again) == await views(fresh)
            assert again.usage()["history_tokens"] == fresh.usage()["history_tokens"]

    run(scenario())


def test_the_file_is_append_only_json_lines_with_a_header(tmp_path: Path):
    path = tmp_path / "c.jsonl"
    run(fill(path, [{"role": "user", "content": "héllo \ud800"}], conversation_id="abc"))
    lines = path.read_bytes().splitlines()
    header, record = (json.loads(line) for line in lines)
    assert header["ctxkit"] == "history"
    assert header["conversation_id"] == "abc"
    assert header["encoding"] == "o200k_base"
    assert record["op"] == "add"
    assert record["message"] == {"role": "user", "content": "héllo \ud800"}
    assert sum(record["cost"].values()) == TokenCounter().message_cost(record["message"]).total
    assert all(line.isascii() for line in lines)  # a lone surrogate round-trips


def test_costs_are_counted_again_when_the_encoding_differs(place: Place):
    path = place
    messages = conversation(30, seed=1)
    run(fill(path, messages, encoding="cl100k_base"))

    async def reopen() -> None:
        async with opened(path, encoding="o200k_base") as manager:
            expected = sum(TokenCounter("o200k_base").message_cost(m).total for m in messages)
            assert manager.usage()["history_tokens"] == expected

    run(reopen())


class RestartMachine(RuleBasedStateMachine):
    """Random changes, checkpoints, restores and views, with the manager closed and opened
    again at random points: the history, the checkpoints and the audit log stay the same."""

    database: str | None = None
    """A PostgreSQL URL: the conversation is kept there instead of a history file."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="ctxkit-restart-"))
        self.path: Path | Place = self.directory / "c.jsonl"
        if self.database is not None:
            self.path = DatabasePlace(self.database)
        self.manager = opened(self.path, max_tokens=600, strategies=["truncate_outputs"])
        self.model: list[dict[str, Any]] = []
        self.saved: dict[str, list[dict[str, Any]]] = {}
        self.ids = 0

    def teardown(self) -> None:
        self.manager.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    @rule(message=plain_messages())
    def add_message(self, message: dict[str, Any]) -> None:
        run(self.manager.add_message(message))
        self.model.append(message)

    @rule(messages=conversations(max_turns=2))
    def set_messages(self, messages: list[dict[str, Any]]) -> None:
        loaded = self.manager.loaded_from_file
        run(self.manager.set_messages(messages))
        if not loaded:
            self.model = list(messages)

    @rule()
    def clear(self) -> None:
        run(self.manager.clear())
        self.model = []

    @rule(label=st.none() | st.text(max_size=8))
    def checkpoint(self, label: str | None) -> None:
        checkpoint_id = run(self.manager.checkpoint(label))
        self.saved[checkpoint_id] = list(self.model)

    @precondition(lambda self: self.saved)
    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        checkpoint_id = data.draw(st.sampled_from(sorted(self.saved)))
        before = run(self.manager.restore(checkpoint_id))
        self.saved[before] = list(self.model)
        self.model = list(self.saved[checkpoint_id])

    @rule(budget=st.integers(60, 2_000))
    def request_view(self, budget: int) -> None:
        with contextlib.suppress(ContextBudgetExceeded):  # pinned messages over the budget
            run(self.manager.get_messages_for_request(token_budget=budget))

    @rule()
    def reopen(self) -> None:
        checkpoints, audit = self.manager.checkpoints(), self.manager.audit()
        self.manager.close()
        self.manager = opened(self.path, max_tokens=600, strategies=["truncate_outputs"])
        assert self.manager.checkpoints() == checkpoints
        assert self.manager.audit() == audit
        assert self.manager.torn is None

    @invariant()
    def history_is_the_model(self) -> None:
        assert run(self.manager.get_messages()) == self.model

    @invariant()
    def every_checkpoint_reads_back(self) -> None:
        for checkpoint_id, messages in self.saved.items():
            assert run(self.manager.messages_at(checkpoint_id)) == messages


@pytest.mark.parametrize("kind", STORES)
def test_restart(request: pytest.FixtureRequest, kind: str) -> None:
    """40 runs on a file; 20 on the database, where each reopening is a new connection and
    what is stored and read is the same records (the file's runs cover their logic)."""
    machine, runs = RestartMachine, 40
    if kind == "postgresql":
        url = request.getfixturevalue("postgres").url
        machine = type("DatabaseRestartMachine", (RestartMachine,), {"database": url})
        runs = 20
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=runs,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


# -- set_messages after loading (contract 2.1) -------------------------------------------------


def test_set_messages_is_ignored_and_logged_when_the_history_came_from_its_file(
    place: Place, caplog: pytest.LogCaptureFixture
):
    path = place
    whole = conversation(10, seed=2)
    run(fill(path, whole))

    async def scenario() -> None:
        async with opened(path) as manager:
            with caplog.at_level(logging.WARNING, logger="ctxkit.reference.manager"):
                await manager.set_messages(whole[:3])
            assert await manager.get_messages() == whole
            assert "set_messages ignored" in caplog.text
            await manager.clear()
            await manager.set_messages(whole[:3])  # after clear() it is the caller's again
            assert await manager.get_messages() == whole[:3]
        async with opened(path) as manager:
            assert await manager.get_messages() == whole[:3]

    run(scenario())


def test_set_messages_on_a_fresh_file_is_accepted_and_written(place: Place):
    path = place
    messages = conversation(8, seed=4)

    async def scenario() -> None:
        async with opened(path) as manager:
            assert not manager.loaded_from_file
            await manager.set_messages(messages)
            assert await manager.get_messages() == messages
        async with opened(path) as manager:
            assert await manager.get_messages() == messages

    run(scenario())


# -- torn tails and damage ---------------------------------------------------------------------


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.floats(0, 1, exclude_max=True), keep_newline=st.booleans())
def test_a_torn_last_line_is_set_aside_never_fatal(tmp_path_factory, cut: float, keep_newline):
    path = tmp_path_factory.mktemp("torn") / "c.jsonl"
    messages = conversation(6, seed=5)
    run(fill(path, messages))
    whole = path.read_bytes()
    last_start = whole.rstrip(b"\n").rfind(b"\n") + 1
    last = whole[last_start:-1]
    torn = last[: int(len(last) * cut)]
    if keep_newline and torn:
        torn += b"\n"  # the newline made it but the line is not whole: still torn
    path.write_bytes(whole[:last_start] + torn)

    async def scenario() -> None:
        async with opened(path) as manager:
            if torn:
                assert manager.torn is not None
                assert manager.torn.offset == last_start
            assert await manager.get_messages() == messages[:-1]
            await manager.add_message({"role": "user", "content": "after the crash"})
        async with opened(path) as manager:
            assert await manager.get_messages() == [
                *messages[:-1],
                {"role": "user", "content": "after the crash"},
            ]
            assert manager.torn is None

    run(scenario())
    if torn:
        aside = path.with_name("c.jsonl.torn").read_bytes()
        assert aside == torn.rstrip(b"\n") + b"\n"


def test_a_bad_line_before_the_last_is_damage_and_changes_nothing(tmp_path: Path):
    path = tmp_path / "c.jsonl"
    run(fill(path, conversation(6, seed=6)))
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3] = b'{"op": "add", "message": \n'
    damaged = b"".join(lines)
    path.write_bytes(damaged)
    with pytest.raises(HistoryFileCorrupt) as caught:
        opened(path)
    assert caught.value.line == 4
    assert caught.value.offset == sum(map(len, lines[:3]))
    assert "line 4" in str(caught.value)
    assert f"truncate -s {caught.value.offset}" in str(caught.value)
    assert path.read_bytes() == damaged
    assert not path.with_name("c.jsonl.torn").exists()
    opened(path.with_name("other.jsonl")).close()  # the lock of the failed open was released
    path.write_bytes(b"".join(lines[:3]))
    opened(path).close()


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b'{"some": "other file"}\n', "not a ctxkit history header"),
        (b'{"ctxkit": "history", "version": 99}\n', "format version 99"),
        (b"not json at all\nsecond line\n", "is not JSON"),
    ],
)
def test_a_file_that_is_not_a_history_is_refused_unchanged(tmp_path: Path, content, fragment):
    path = tmp_path / "c.jsonl"
    path.write_bytes(content)
    with pytest.raises(HistoryFileCorrupt, match=fragment):
        opened(path)
    assert path.read_bytes() == content


def test_a_bad_record_is_named_by_its_line(place: Place):
    """A record whose checksum holds but whose meaning does not (a restore of a checkpoint
    never made): the line, or the database's row, is named."""
    run(fill(place, conversation(3, seed=7)))
    place.append_records([{"op": "restore", "at": 1, "id": "c9"}, {"op": "clear", "at": 2}])
    with pytest.raises(HistoryFileCorrupt, match=r"(line|row) 5 .*'restore' record: no checkpoint"):
        opened(place)


# -- writing -----------------------------------------------------------------------------------


def test_a_message_that_is_not_json_is_refused_and_nothing_is_stored(place: Place):
    path = place

    async def scenario() -> None:
        async with opened(path) as manager:
            await manager.add_message({"role": "user", "content": "kept"})
            before = place.records()
            with pytest.raises(TypeError, match="stores messages as JSON"):
                await manager.add_message({"role": "user", "content": "x", "metadata": {1j}})
            with pytest.raises(InvalidMessage):
                await manager.add_message({"role": "nobody"})
            assert place.records() == before
            assert await manager.get_messages() == [{"role": "user", "content": "kept"}]

    run(scenario())


def test_a_failed_write_changes_nothing(tmp_path: Path):
    """A real write failure (the file size limit, like a full disk) in a process of its own."""
    path = tmp_path / "c.jsonl"
    script = textwrap.dedent(
        f"""
        import asyncio, resource, signal
        from ctxkit.reference import ReferenceContextManager
        from ctxkit.reference.journal import HistoryFileError

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

        async def main():
            manager = ReferenceContextManager(storage_path={str(path)!r})
            await manager.add_message({{"role": "user", "content": "small"}})
            size = manager._file.end
            resource.setrlimit(resource.RLIMIT_FSIZE, (size + 200, size + 200))
            try:
                await manager.add_message({{"role": "user", "content": "x" * 5000}})
            except HistoryFileError as exc:
                print("refused:", exc)
            assert len(await manager.get_messages()) == 1
            await manager.add_message({{"role": "user", "content": "fits"}})
            print("messages", len(await manager.get_messages()))

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout
    assert "cannot write: File too large" in done.stdout
    assert "messages 2" in done.stdout

    async def reopen() -> list[dict[str, Any]]:
        async with opened(path) as manager:
            return await manager.get_messages()

    assert run(reopen()) == [
        {"role": "user", "content": "small"},
        {"role": "user", "content": "fits"},
    ]


def test_a_closed_manager_refuses_changes(place: Place):
    manager = opened(place)
    manager.close()
    with pytest.raises(HistoryFileError, match="closed"):
        run(manager.add_message({"role": "user", "content": "late"}))
    assert run(manager.get_messages()) == []


@pytest.mark.parametrize("fsync", ["always", "never"])
def test_both_fsync_policies_store_the_same_file(place: Place, fsync: str):
    messages = conversation(12, seed=8)

    async def scenario() -> None:
        async with place.open(fsync=fsync) as manager:
            for message in messages:
                await manager.add_message(message)

    run(scenario())
    assert [r["message"] for r in place.records()] == messages


def test_bad_storage_config_is_a_config_error():
    from ctxkit.reference import ConfigError

    with pytest.raises(ConfigError, match="fsync must be always or never"):
        ReferenceContextManager(storage_path="x.jsonl", fsync="sometimes")
    with pytest.raises(ConfigError, match="storage_path must be a file path"):
        ReferenceContextManager(storage_path=42)


def test_mount_config_takes_storage_path(place: Place):
    class Coordinator:
        hooks = None

        def mount(self, point: str, module: Any) -> None:
            self.module = module

    coordinator = Coordinator()
    run(mount(coordinator, {**place.config, "fsync": "never"}))
    run(coordinator.module.add_message({"role": "user", "content": "hi"}))
    coordinator.module.close()
    assert place.records()[0]["message"]["content"] == "hi"


# -- the lock ----------------------------------------------------------------------------------


def test_a_second_manager_on_the_same_file_gets_a_clear_error(place: Place):
    path = place
    first = opened(path)
    with pytest.raises(HistoryFileLocked, match="one manager at a time"):
        opened(path)
    first.close()
    opened(path).close()


def test_a_second_process_gets_a_clear_error_naming_the_holder(place: Place):
    path = place
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\n"
            "from ctxkit.reference import ReferenceContextManager\n"
            f"m = ReferenceContextManager(**{place.config!r})\n"
            "print('open', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(HistoryFileLocked, match=rf"by (process|ctxkit pid) {holder.pid}\b"):
            opened(path)
    finally:
        holder.kill()  # SIGKILL: no close(), no goodbye to a server
        holder.communicate(timeout=30)
    opened_after_crash(place).close()  # the lock went with the process


WRITER = textwrap.dedent(
    """
    import asyncio, json, sys
    from ctxkit.reference import ReferenceContextManager

    async def main(tag):
        options = json.loads(sys.argv[1])
        async with ReferenceContextManager(**options, fsync="never", lock_wait=60) as manager:
            print("open", flush=True)
            for i in range(40):
                await manager.add_message({"role": "user", "content": f"{tag} {i}"})

    asyncio.run(main(sys.argv[2]))
    """
)


def test_two_processes_on_one_conversation_write_one_after_the_other(place: Place):
    """Both open with lock_wait: one writes all of its messages, then the other; nothing is
    lost, duplicated or interleaved."""
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, json.dumps(place.config), tag],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    for writer in writers:
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        assert out.strip() == "open"

    async def stored() -> list[str]:
        async with opened(place) as manager:
            return [m["content"] for m in await manager.get_messages()]

    texts = run(stored())
    first = texts[0].split()[0]
    second = "b" if first == "a" else "a"
    assert texts == [f"{first} {i}" for i in range(40)] + [f"{second} {i}" for i in range(40)]


def test_lock_wait_is_said_in_the_error_when_it_runs_out(place: Place):
    first = opened(place)
    try:
        started = time.monotonic()
        with pytest.raises(HistoryFileLocked, match=r"\(waited 0.3 s\)"):
            opened(place, lock_wait=0.3)
        assert time.monotonic() - started >= 0.3
    finally:
        first.close()


# -- checkpoints -------------------------------------------------------------------------------


def test_restore_keeps_the_later_history_readable_and_restorable(place: Place):
    path = place
    early, late = conversation(6, seed=9), conversation(20, seed=9)[6:]

    async def scenario() -> None:
        async with opened(path) as manager:
            for message in early:
                await manager.add_message(message)
            start = await manager.checkpoint("start")
            for message in late:
                await manager.add_message(message)
            before = await manager.restore(start)
            assert await manager.get_messages() == early
            assert await manager.messages_at(before) == early + late
            await manager.add_message({"role": "user", "content": "a new branch"})
        async with opened(path) as manager:
            assert [c["label"] for c in manager.checkpoints()] == [
                "start",
                f"before restore to {start}",
            ]
            assert manager.checkpoints()[1]["messages"] == len(early + late)
            assert await manager.get_messages() == [
                *early,
                {"role": "user", "content": "a new branch"},
            ]
            await manager.restore(before)
            assert await manager.get_messages() == early + late
        everything = [r["message"] for r in place.records() if r["op"] == "add"]
        assert everything[: len(early + late)] == early + late  # the file only ever grew

    run(scenario())


def test_checkpoints_work_without_a_file_and_unknown_ids_say_what_exists():
    async def scenario() -> None:
        manager = ReferenceContextManager()
        await manager.add_message({"role": "user", "content": "one"})
        first = await manager.checkpoint()
        await manager.clear()
        assert await manager.get_messages() == []
        await manager.restore(first)
        assert await manager.get_messages() == [{"role": "user", "content": "one"}]
        with pytest.raises(UnknownCheckpoint, match=r"no checkpoint 'c9'; known: c1, c2"):
            await manager.restore("c9")
        with pytest.raises(TypeError, match="label"):
            await manager.checkpoint(label=5)  # type: ignore[arg-type]

    run(scenario())


def test_the_collector_paused_for_loading_is_switched_back_as_it_was(tmp_path: Path):
    path = tmp_path / "c.jsonl"
    run(fill(path, conversation(5, seed=10)))
    opened(path).close()
    assert gc.isenabled()
    (tmp_path / "bad.jsonl").write_bytes(b"not a history\n\n")
    with pytest.raises(HistoryFileCorrupt):
        opened(tmp_path / "bad.jsonl")
    assert gc.isenabled()  # also after a failed open
    gc.disable()
    try:
        opened(path).close()
        assert not gc.isenabled()  # left off, as the caller had it
    finally:
        gc.enable()


# -- what a history path may be ------------------------------------------------------------------


def test_a_symlinked_history_path_is_refused_and_what_it_points_to_is_untouched(tmp_path: Path):
    foreign = tmp_path / "notes.txt"
    foreign.write_text("one line of someone else's\n")
    link = tmp_path / "history.jsonl"
    link.symlink_to(foreign)
    with pytest.raises(HistoryFileError, match="symbolic link"):
        opened(link)
    assert foreign.read_text() == "one line of someone else's\n"
    assert not (tmp_path / "notes.txt.torn").exists()
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "nowhere.jsonl")
    with pytest.raises(HistoryFileError, match="symbolic link"):
        opened(dangling)
    assert not (tmp_path / "nowhere.jsonl").exists()


def test_a_fifo_a_device_or_a_directory_is_refused_with_history_file_error(tmp_path: Path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(HistoryFileError, match="FIFO"):
        opened(fifo)
    for device in ("/dev/null", "/dev/full"):
        with pytest.raises(HistoryFileError, match="device"):
            opened(Path(device))
    with pytest.raises(HistoryFileError, match=r"(?i)is a directory"):
        opened(tmp_path)


def test_a_torn_tail_that_cannot_be_kept_aside_is_refused_and_changes_nothing(tmp_path: Path):
    path = tmp_path / "c.jsonl"
    run(fill(path, conversation(4, seed=8)))
    with path.open("ab") as file:
        file.write(b'{"crc":"0000')  # an append cut short
    before = path.read_bytes()
    (tmp_path / "c.jsonl.torn").mkdir()  # where its bytes would be kept
    with pytest.raises(
        HistoryFileError, match=r"torn last line cannot be kept in .*c\.jsonl\.torn"
    ):
        opened(path)
    assert path.read_bytes() == before
    (tmp_path / "c.jsonl.torn").rmdir()
    manager = opened(path)
    assert manager.torn is not None
    manager.close()


def test_missing_folders_of_a_history_path_are_created(tmp_path: Path):
    path = tmp_path / "conversations" / "2026" / "chat.jsonl"
    run(fill(path, [{"role": "user", "content": "hi"}]))
    assert read_history_file(path).header is not None

    async def reopened() -> list[dict[str, Any]]:
        async with opened(path) as manager:
            return await manager.get_messages()

    assert run(reopened()) == [{"role": "user", "content": "hi"}]
