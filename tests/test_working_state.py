"""Working state and tasks (AdCP) on a stored conversation: JSON merge patch as RFC 7386 says,
tasks added and completed, all of it persisted with the history's crash discipline, named by
checkpoints and set back by restores, shown by ``ctxkit contexts show``, archived with the
conversation."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.cli import main as cli_main
from ctxkit.reference import HistoryFileLocked, ReferenceContextManager, TaskError
from ctxkit.reference.journal import (
    HistoryFileCorrupt,
    HistoryFileError,
    encode_record,
    read_history_file,
)
from ctxkit.reference.lifecycle import cleanup, details
from ctxkit.reference.working_state import TaskError as WorkingStateTaskError
from ctxkit.reference.working_state import merge_patch
from tests.test_full_disk import add_until_refused, disk, fill  # noqa: F401 (disk: a fixture)


def run_async(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


# -- merge patch -------------------------------------------------------------------------------

# RFC 7386, Appendix A: (original, patch, result).
RFC_EXAMPLES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("original", "patch", "result"), RFC_EXAMPLES)
def test_merge_patch_gives_every_result_of_rfc_7386_appendix_a(original, patch, result):
    before = copy.deepcopy((original, patch))
    assert merge_patch(original, patch) == result
    assert (original, patch) == before  # the inputs are not changed


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=12,
)
OBJECTS = st.dictionaries(st.text(max_size=3), JSON, max_size=5)


@given(target=OBJECTS, patch=OBJECTS)
def test_a_merge_patch_applied_twice_changes_nothing_more(target, patch):
    once = merge_patch(target, patch)
    assert merge_patch(once, patch) == once
    for key, value in patch.items():
        if value is None:
            assert key not in once
        elif not isinstance(value, dict):
            assert once[key] == value


# -- the manager's API -------------------------------------------------------------------------


def test_working_state_is_read_replaced_and_merge_patched():
    async def check() -> None:
        manager = ReferenceContextManager()
        assert await manager.get_working_state() == {}
        state = {"current_items": ["sku-1"], "preferences": {"size": 42, "color": "blue"}}
        assert await manager.set_working_state(state) == state
        patched = await manager.patch_working_state(
            {"preferences": {"color": None, "fit": "wide"}, "workflow_step": "checkout"}
        )
        assert patched == {
            "current_items": ["sku-1"],
            "preferences": {"size": 42, "fit": "wide"},
            "workflow_step": "checkout",
        }
        read = await manager.get_working_state()
        assert read == patched
        read["current_items"].append("sku-2")  # a copy: the manager's state is unchanged
        assert await manager.get_working_state() == patched

    run_async(check())


def test_tasks_are_added_completed_and_listed_oldest_first():
    async def check() -> None:
        manager = ReferenceContextManager(clock=iter(range(100, 200)).__next__)
        first = await manager.add_task("find running shoes under 100 EUR")
        second = await manager.add_task("compare two offers")
        assert first == {
            "id": "t1",
            "text": "find running shoes under 100 EUR",
            "created": first["created"],
            "completed": None,
        }
        done = await manager.complete_task("t1")
        assert done["completed"] > done["created"]
        tasks = await manager.get_tasks()
        assert tasks == {"active_tasks": [second], "completed_tasks": [done]}
        with pytest.raises(TaskError, match="'t1' is completed already"):
            await manager.complete_task("t1")
        with pytest.raises(TaskError, match="no task 't9'; active: t2"):
            await manager.complete_task("t9")

    run_async(check())


@pytest.mark.parametrize(
    ("call", "argument", "fragment"),
    [
        ("set_working_state", ["not", "an", "object"], "working_state must be a JSON object"),
        ("set_working_state", {"at": float("nan")}, "working_state must be JSON"),
        ("set_working_state", {"when": object()}, "working_state must be JSON"),
        ("patch_working_state", "step 3", "merge patch must be a JSON object"),
        ("add_task", "   ", "a task's text must be a non-empty string"),
        ("add_task", None, "a task's text must be a non-empty string"),
    ],
)
def test_mistakes_are_said_in_a_sentence_and_change_nothing(call, argument, fragment):
    async def check() -> None:
        manager = ReferenceContextManager()
        await manager.set_working_state({"step": 1})
        with pytest.raises(TypeError, match=fragment):
            await getattr(manager, call)(argument)
        assert await manager.get_working_state() == {"step": 1}
        assert await manager.get_tasks() == {"active_tasks": [], "completed_tasks": []}

    run_async(check())


# -- persistence -------------------------------------------------------------------------------

OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), OBJECTS),
        st.tuples(st.just("patch"), OBJECTS),
        st.tuples(st.just("add"), st.sampled_from(["search", "pay", "ship it"])),
        st.tuples(st.just("complete"), st.integers(1, 6)),
        st.tuples(st.just("checkpoint"), st.none()),
        st.tuples(st.just("restore"), st.integers(1, 4)),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("message"), st.none()),
    ),
    max_size=25,
)


async def apply(manager: ReferenceContextManager, operations: list[tuple[str, Any]]) -> None:
    points: list[str] = []
    for op, value in operations:
        if op == "set":
            await manager.set_working_state(value)
        elif op == "patch":
            await manager.patch_working_state(value)
        elif op == "add":
            await manager.add_task(value)
        elif op == "complete":
            with contextlib.suppress(TaskError):
                await manager.complete_task(f"t{value}")
        elif op == "checkpoint":
            points.append(await manager.checkpoint())
        elif op == "restore" and points:
            points.append(await manager.restore(points[value % len(points)]))
        elif op == "clear":
            await manager.clear()
        elif op == "message":
            await manager.add_message({"role": "user", "content": "hello"})


@settings(max_examples=60, deadline=None)
@given(operations=OPERATIONS)
def test_the_history_file_replays_to_the_same_state_tasks_and_checkpoints(operations):
    """Whatever was done, reopening the file gives what the manager held, and so does each
    checkpoint restored in both; task ids are never reused."""

    async def check(path: Path) -> None:
        manager = ReferenceContextManager(storage_path=path, fsync="never", clock=lambda: 1e9)
        await apply(manager, operations)
        state, tasks = await manager.get_working_state(), await manager.get_tasks()
        points = [point["id"] for point in manager.checkpoints()]
        manager.close()
        reopened = ReferenceContextManager(storage_path=path, fsync="never")
        assert await reopened.get_working_state() == state
        assert await reopened.get_tasks() == tasks
        ids = [t["id"] for kind in tasks.values() for t in kind]
        assert len(ids) == len(set(ids))
        live = ReferenceContextManager(clock=lambda: 1e9)
        await apply(live, operations)  # the same, in memory only
        assert await live.get_working_state() == state
        assert await live.get_tasks() == tasks
        for point in points:
            await reopened.restore(point)
            await live.restore(point)
            assert await reopened.get_working_state() == await live.get_working_state()
            assert await reopened.get_tasks() == await live.get_tasks()
        reopened.close()

    with tempfile.TemporaryDirectory() as directory:
        run_async(check(Path(directory) / "c.jsonl"))


def test_a_restore_sets_state_and_tasks_back_and_keeps_the_later_ones(tmp_path: Path):
    async def check() -> None:
        manager = ReferenceContextManager(storage_path=tmp_path / "c.jsonl")
        await manager.set_working_state({"step": "search"})
        await manager.add_task("search")
        point = await manager.checkpoint("before checkout")
        await manager.patch_working_state({"step": "checkout"})
        await manager.complete_task("t1")
        await manager.add_task("pay")
        later = await manager.restore(point)
        assert await manager.get_working_state() == {"step": "search"}
        tasks = await manager.get_tasks()
        assert [t["id"] for t in tasks["active_tasks"]] == ["t1"]
        assert tasks["completed_tasks"] == []
        assert (await manager.add_task("new"))["id"] == "t3"  # t2 is taken in the later branch
        await manager.restore(later)
        assert await manager.get_working_state() == {"step": "checkout"}
        tasks = await manager.get_tasks()
        assert [t["id"] for t in tasks["active_tasks"]] == ["t2"]
        await manager.clear()
        assert await manager.get_working_state() == {}
        assert await manager.get_tasks() == {"active_tasks": [], "completed_tasks": []}
        manager.close()

    run_async(check())


def test_a_change_that_cannot_be_written_is_not_made(tmp_path: Path):
    async def check() -> None:
        manager = ReferenceContextManager(storage_path=tmp_path / "c.jsonl")
        await manager.set_working_state({"step": 1})
        manager.close()
        with pytest.raises(HistoryFileError, match="closed"):
            await manager.set_working_state({"step": 2})
        with pytest.raises(HistoryFileError, match="closed"):
            await manager.add_task("never")
        assert await manager.get_working_state() == {"step": 1}
        assert await manager.get_tasks() == {"active_tasks": [], "completed_tasks": []}

    run_async(check())


def test_the_task_error_is_public_like_the_other_errors():
    assert TaskError is WorkingStateTaskError
    assert issubclass(TaskError, LookupError)  # an unknown id, as UnknownCheckpoint is
    import ctxkit.reference

    assert "TaskError" in ctxkit.reference.__all__


def test_concurrent_writers_lose_no_working_state_update(tmp_path: Path):
    """Threads patching the state, adding and completing tasks and adding messages on one
    manager at once: every change lands, in the manager and in its file (each is one record
    written under the history's lock, as every change is); a second manager on the same file
    is refused rather than allowed to write beside the first."""
    path = tmp_path / "c.jsonl"
    manager = ReferenceContextManager(storage_path=path, fsync="never")
    rounds, writers = 40, 4
    barrier = threading.Barrier(writers + 1)
    failures: list[BaseException] = []

    def writer(number: int) -> None:
        async def work() -> None:
            barrier.wait()
            for i in range(rounds):
                await manager.patch_working_state({f"w{number}": i, "shared": {f"w{number}": i}})
                task = await manager.add_task(f"writer {number} round {i}")
                if i % 2:
                    await manager.complete_task(task["id"])

        try:
            run_async(work())
        except BaseException as exc:  # pragma: no cover - said below
            failures.append(exc)

    def adder() -> None:
        async def work() -> None:
            barrier.wait()
            for i in range(rounds):
                await manager.add_message({"role": "user", "content": f"message {i}"})
                await manager.add_message({"role": "assistant", "content": f"reply {i}"})

        try:
            run_async(work())
        except BaseException as exc:  # pragma: no cover - said below
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    threads.append(threading.Thread(target=adder))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    last = rounds - 1
    expected = {
        **{f"w{n}": last for n in range(writers)},
        "shared": {f"w{n}": last for n in range(writers)},
    }

    async def check(opened: ReferenceContextManager) -> None:
        assert await opened.get_working_state() == expected
        tasks = await opened.get_tasks()
        everything = [*tasks["active_tasks"], *tasks["completed_tasks"]]
        assert sorted(int(task["id"][1:]) for task in everything) == list(
            range(1, writers * rounds + 1)
        )
        assert len(tasks["completed_tasks"]) == writers * rounds // 2
        assert len(await opened.get_messages()) == 2 * rounds

    run_async(check(manager))
    with pytest.raises(HistoryFileLocked, match="one manager at a time"):
        ReferenceContextManager(storage_path=path)
    manager.close()
    reopened = ReferenceContextManager(storage_path=path)
    run_async(check(reopened))
    reopened.close()


def test_a_working_state_change_is_written_after_the_audit_entries_a_full_disk_held_back(
    disk: Path,  # noqa: F811 (the fixture imported above)
):
    """Audit entries a full disk kept in memory go first with the next change written, and
    a working-state change is such a change: the file stays in the order things happened,
    so its last record is the last activity (``ctxkit contexts`` reads it from there)."""
    path = disk / "c.jsonl"

    async def check() -> None:
        manager = ReferenceContextManager(storage_path=path, max_tokens=400)
        for i in range(6):
            await manager.add_message({"role": "user", "content": f"question {i} " * 30})
            await manager.add_message({"role": "assistant", "content": f"answer {i} " * 30})
        filler = fill(disk)
        await add_until_refused(manager)
        await manager.get_messages_for_request()  # compacts: its audit entry waits in memory
        assert manager.audit()
        held_back = [r for r in read_history_file(path).records if r["op"] == "audit"]
        assert held_back == []
        filler.unlink()
        await manager.set_working_state({"step": "after the disk was full"})
        manager.close()

    run_async(check())
    records = read_history_file(path).records
    assert records[-1]["op"] == "state"
    assert any(record["op"] == "audit" for record in records)
    times = [record["at"] for record in records]
    assert times == sorted(times)


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from ctxkit.reference import ReferenceContextManager

    async def main(path):
        manager = ReferenceContextManager(storage_path=path)
        i = (await manager.get_working_state()).get("counter", -1) + 1
        while True:
            await manager.patch_working_state({"counter": i, f"k{i % 7}": "x" * (i % 300)})
            print(f"state {i}", flush=True)
            task = await manager.add_task(f"task {i}")
            print(f"task {task['id']}", flush=True)
            i += 1

    asyncio.run(main(sys.argv[1]))
    """
)


def test_every_acknowledged_change_survives_sigkill(tmp_path: Path):
    path = tmp_path / "c.jsonl"
    state, tasks = -1, 0
    for round_ in range(4):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout is not None
        for count, line in enumerate(writer.stdout):
            kind, value = line.split()
            if kind == "state":
                state = int(value)
            else:
                tasks = int(value[1:])
            if count >= 30 + 7 * round_:
                break
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()

    async def check() -> None:
        manager = ReferenceContextManager(storage_path=path)
        assert (await manager.get_working_state())["counter"] >= state
        added = await manager.get_tasks()
        assert len(added["active_tasks"]) >= tasks
        manager.close()

    run_async(check())


def test_a_damaged_state_record_is_named_and_the_file_left_as_it_was(tmp_path: Path):
    path = tmp_path / "c.jsonl"

    async def write() -> None:
        manager = ReferenceContextManager(storage_path=path)
        await manager.set_working_state({"step": 1})
        manager.close()

    run_async(write())
    with path.open("ab") as file:
        file.write(encode_record({"op": "state", "at": 1.0, "state": ["not", "an", "object"]}))
    before = path.read_bytes()
    with pytest.raises(HistoryFileCorrupt, match=r"line 3 .*bad 'state' record: has a state"):
        ReferenceContextManager(storage_path=path)
    assert path.read_bytes() == before


def test_a_torn_state_record_is_skipped(tmp_path: Path):
    path = tmp_path / "c.jsonl"

    async def write() -> None:
        manager = ReferenceContextManager(storage_path=path)
        await manager.set_working_state({"step": 1})
        manager.close()

    run_async(write())
    with path.open("ab") as file:
        file.write(encode_record({"op": "state", "at": 2.0, "state": {"step": 2}})[:-9])

    async def check() -> None:
        manager = ReferenceContextManager(storage_path=path)
        assert manager.torn is not None
        assert await manager.get_working_state() == {"step": 1}
        await manager.patch_working_state({"step": 3})
        manager.close()
        assert ReferenceContextManager(storage_path=path).torn is None

    run_async(check())


# -- shown and expired with the conversation ---------------------------------------------------


def stored_conversation(directory: Path) -> Path:
    path = directory / "shop.jsonl"

    async def write() -> None:
        manager = ReferenceContextManager(storage_path=path, recall={})
        await manager.add_message({"role": "user", "content": "find me running shoes"})
        await manager.set_working_state(
            {"current_items": ["sku-1", "sku-2"], "last_search": {"q": "running shoes"}}
        )
        await manager.add_task("compare offers")
        await manager.add_task("find running shoes")
        await manager.complete_task("t2")
        await manager.memory_synced()
        manager.close()

    run_async(write())
    return path


def test_contexts_show_prints_the_working_state_tasks_and_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    stored_conversation(tmp_path)
    assert cli_main(["contexts", "show", str(tmp_path), "shop"]) == 0
    out = capsys.readouterr().out
    assert (
        '  working state  {"current_items": ["sku-1", "sku-2"], "last_search": '
        '{"q": "running shoes"}}'
    ) in out
    assert "  tasks          1 active, 1 completed" in out
    assert "t1 [ ] compare offers (added " in out
    assert "t2 [x] find running shoes (completed " in out
    assert f"  memory         {tmp_path / 'shop.jsonl.memory.sqlite'}" in out
    assert cli_main(["contexts", "show", str(tmp_path), "shop", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["working_state"]["last_search"] == {"q": "running shoes"}
    assert [t["id"] for t in shown["active_tasks"]] == ["t1"]
    assert [t["id"] for t in shown["completed_tasks"]] == ["t2"]


def test_a_long_working_state_is_shown_on_one_line_and_whole_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    async def write() -> None:
        manager = ReferenceContextManager(storage_path=tmp_path / "long.jsonl")
        await manager.set_working_state({"notes": "word " * 200})
        manager.close()

    run_async(write())
    assert cli_main(["contexts", "show", str(tmp_path), "long"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "working state" in x)
    assert line.endswith("characters; --json shows it all)")
    assert len(line) < 240


def test_expiry_archives_the_state_tasks_and_memory_with_the_history(tmp_path: Path):
    path = stored_conversation(tmp_path)
    memory = tmp_path / "shop.jsonl.memory.sqlite"
    assert memory.exists()
    (action,) = cleanup(tmp_path, ttl=1.0, now=path.stat().st_mtime + 10)
    assert action.outcome == "archived"
    assert not path.exists()
    assert not memory.exists()
    archived = tmp_path / "archive" / "shop.jsonl"
    assert (tmp_path / "archive" / "shop.jsonl.memory.sqlite").exists()
    info = details(archived)
    assert info["working_state"]["current_items"] == ["sku-1", "sku-2"]
    assert info["memory"] == str(tmp_path / "archive" / "shop.jsonl.memory.sqlite")

    async def reopen() -> None:
        manager = ReferenceContextManager(storage_path=archived, recall={})
        assert (await manager.get_tasks())["completed_tasks"][0]["text"] == "find running shoes"
        assert manager.memory is not None
        assert await manager.memory.count() == 1  # the memory came along, not rebuilt
        manager.close()

    run_async(reopen())
