"""The lifecycle of stored conversations: states, tail reads, open files, and cleanup that
moves, never deletes, and never moves a history a live process holds."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from ctxkit.durations import format_age, parse_duration
from ctxkit.reference import ReferenceContextManager, lifecycle
from ctxkit.reference.journal import HistoryFileCorrupt, HistoryFileLocked, encode_record
from ctxkit.reference.lifecycle import (
    DEFAULT_TTL,
    UnknownConversation,
    cleanup,
    details,
    examine,
    scan,
)
from tests.stored_cases import CHAT, T0, Holder, append, append_record, store


def tree(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``directory`` with its bytes and mtime: what "changes nothing" means."""
    return {
        str(path.relative_to(directory)): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def load(path: Path) -> tuple[list[dict], list[dict]]:
    """Messages and checkpoints of a history file, through a real manager."""

    async def read() -> tuple[list[dict], list[dict]]:
        async with ReferenceContextManager(storage_path=path) as manager:
            return await manager.get_messages(), manager.checkpoints()

    return asyncio.run(read())


# -- states ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds_later", "state"),
    [
        (0, "active"),
        (299, "active"),
        (300, "idle"),
        (DEFAULT_TTL - 1, "idle"),
        (DEFAULT_TTL, "expired"),
    ],
)
def test_state_follows_the_last_record(tmp_path: Path, seconds_later: float, state: str) -> None:
    store(tmp_path, "a", at=T0)
    (found,) = scan(tmp_path, now=T0 + seconds_later)
    assert found.state == state
    assert found.last_activity == T0
    assert (found.id, found.conversation_id, found.encoding) == ("a", "a", "o200k_base")
    assert found.size_bytes == (tmp_path / "a.jsonl").stat().st_size
    assert found.open_by is None


def test_idle_after_and_ttl_are_settings(tmp_path: Path) -> None:
    store(tmp_path, "a", at=T0)
    assert scan(tmp_path, now=T0 + 60, idle_after=30)[0].state == "idle"
    assert scan(tmp_path, now=T0 + 60, ttl=60)[0].state == "expired"


def test_a_header_alone_dates_from_its_creation(tmp_path: Path) -> None:
    store(tmp_path, "empty", messages=[])
    (found,) = scan(tmp_path)
    assert found.last_activity == found.created
    assert time.time() - 60 < found.created <= time.time()
    assert found.state == "active"


def test_every_kind_of_record_counts_as_activity(tmp_path: Path) -> None:
    path = store(tmp_path, "a", at=T0, checkpoint="before")
    assert examine(path, now=T0).last_activity == T0
    append_record(path, {"op": "audit", "at": T0 + 50, "entry": {}})
    assert examine(path, now=T0).last_activity == T0 + 50


# -- the tail ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tail",
    [
        b'{"op":"add","at":1900000000,"mess',  # cut short: no newline
        b"\x00\x00\x00",  # a crash can leave zeros
        b'{"op":"add","at":1900000000,"mess\n',  # a whole line that does not parse
    ],
)
def test_a_torn_last_line_is_skipped(tmp_path: Path, tail: bytes) -> None:
    path = store(tmp_path, "a", at=T0)
    append(path, tail)
    found = examine(path, now=T0 + 1)
    assert (found.state, found.last_activity) == ("active", T0)
    # The same rule as a full read.
    info = details(path)
    assert info["last_activity"] == T0
    assert info["torn"] is not None


@pytest.mark.parametrize("tail", [b"not json\ngarbage\n", b'not json\n{"op":"add"'])
def test_a_bad_line_before_the_last_is_damage(tmp_path: Path, tail: bytes) -> None:
    path = store(tmp_path, "a", at=T0)
    append(path, tail)
    found = examine(path, now=T0)
    assert found.state == "unreadable"
    offset = path.stat().st_size - len(tail)
    assert f"(byte {offset}) has no checksum: damage, not a crash" in (found.reason or "")
    with pytest.raises(HistoryFileCorrupt, match=rf"\(byte {offset}\) has no checksum"):
        details(path)


def test_a_long_last_record_is_read_back_past_the_first_chunk(tmp_path: Path) -> None:
    big = {"role": "user", "content": "word " * 60_000}  # ~300 KB, more than one tail chunk
    path = store(tmp_path, "a", [*CHAT, big], at=T0)
    append(path, b'{"op":"clear","at":')  # torn
    assert path.stat().st_size > 4 * lifecycle.TAIL_BYTES
    assert examine(path, now=T0).last_activity == T0


def test_listing_finds_damage_anywhere_by_the_checksums(tmp_path: Path) -> None:
    """Issue 14, item 6: a flipped byte far from both ends made a listing say "idle"."""
    path = store(tmp_path, "a", at=T0)
    for number in range(100):
        append_record(path, {"op": "clear", "at": T0 + number})
    message = {"role": "user", "content": "y" * 70_000}
    append_record(path, {"op": "add", "at": T0 + 500, "message": message, "cost": {"user": 1}})
    assert examine(path, now=T0 + 500).verified
    data = bytearray(path.read_bytes())
    line_50 = sum(map(len, bytes(data).splitlines(keepends=True)[:49]))
    data[line_50 + 30] ^= 1  # inside line 50: still JSON, a time one off
    path.write_bytes(bytes(data))
    found = examine(path, now=T0 + 500)
    assert found.state == "unreadable"
    assert found.reason == (
        f"line 50 (byte {line_50}) does not match its checksum (its bytes changed after it "
        "was written): damage, not a crash"
    )
    with pytest.raises(HistoryFileCorrupt, match="line 50 "):
        details(path)


def test_a_version_1_history_is_listed_as_not_verified(tmp_path: Path) -> None:
    """A file from before checksums: listed from its ends, and said to be so."""
    path = tmp_path / "old.jsonl"
    header = {"ctxkit": "history", "version": 1, "conversation_id": "old", "created": T0}
    path.write_bytes(
        encode_record(header, checksum=False)
        + encode_record({"op": "clear", "at": T0 + 1}, checksum=False)
    )
    found = examine(path, now=T0 + 2)
    assert (found.state, found.verified, found.last_activity) == ("active", False, T0 + 1)


# -- unreadable files --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty: no header yet"),
        (b'{"name": "package.json"}\n', "line 1 is not a ctxkit history header"),
        (b'{"ctxkit": "history", "version": 99}\n', "line 1 has format version 99"),
        (b"[1, 2, 3]\n", "line 1 is not an object"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "line 1 is not JSON"),
        (b'{"ctxkit": "history", "version": 1, "crea', "line 1 has no newline"),
        (b'{"ctxkit":"history","version":1}\n', "no time in its header or records"),
    ],
)
def test_foreign_or_bad_files_are_listed_as_unreadable(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    store(tmp_path, "good", at=T0)
    (tmp_path / "bad.jsonl").write_bytes(content)
    listed = {found.id: found for found in scan(tmp_path, now=T0)}
    assert listed["good"].state == "active"
    assert listed["bad"].state == "unreadable"
    assert reason in (listed["bad"].reason or "")
    assert listed["bad"].size_bytes == len(content)


def test_scan_lists_history_files_only(tmp_path: Path) -> None:
    store(tmp_path, "a", at=T0)
    (tmp_path / "a.jsonl.torn").write_bytes(b"x\n")
    (tmp_path / "notes.txt").write_text("hi")
    (tmp_path / "dir.jsonl").mkdir()
    (tmp_path / ".jsonl").write_text("")
    assert [found.id for found in scan(tmp_path)] == ["a"]


def test_scan_of_a_missing_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        scan(tmp_path / "nope")


# -- open files --------------------------------------------------------------------------------


def test_a_history_open_in_another_process_is_listed_open_and_never_archived(
    tmp_path: Path,
) -> None:
    path = store(tmp_path, "busy", at=T0)
    store(tmp_path, "done", at=T0)
    holder = Holder(path)
    try:
        listed = {found.id: found for found in scan(tmp_path, now=T0 + DEFAULT_TTL)}
        assert listed["busy"].open_by == holder.pid
        assert listed["done"].open_by is None
        assert listed["busy"].state == "expired"  # old, but open: cleanup must still skip it

        actions = {action.id: action for action in cleanup(tmp_path, now=T0 + DEFAULT_TTL)}
        assert actions["busy"].outcome == "skipped"
        assert (actions["busy"].open, actions["busy"].open_by) == (True, holder.pid)
        assert actions["busy"].describe() == f"skipped busy: open by process {holder.pid}"
        assert (actions["done"].outcome, actions["done"].open) == ("archived", False)
        assert path.exists()

        (named,) = cleanup(tmp_path, ids=["busy"])
        assert (named.outcome, named.open_by) == ("skipped", holder.pid)
        assert path.exists()
        (planned,) = cleanup(tmp_path, ids=["busy"], dry_run=True)
        assert (planned.outcome, planned.open_by) == ("skipped", holder.pid)
    finally:
        holder.stop()
    (named,) = cleanup(tmp_path, ids=["busy"])
    assert named.outcome == "archived"
    assert not path.exists()


def test_a_manager_opening_a_history_during_its_move_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock is held across the rename: a manager opening the file meanwhile gets
    HistoryFileLocked, naming this process."""
    path = store(tmp_path, "a", at=T0)
    rename = os.rename
    seen: list[BaseException] = []

    def rename_while_someone_opens(source: Path, destination: Path) -> None:
        if Path(source) == path:
            try:
                ReferenceContextManager(storage_path=path).close()
            except HistoryFileLocked as exc:
                seen.append(exc)
        rename(source, destination)

    monkeypatch.setattr(lifecycle.os, "rename", rename_while_someone_opens)
    (action,) = cleanup(tmp_path, ids=["a"])
    assert action.outcome == "archived"
    assert len(seen) == 1
    assert f"by process {os.getpid()}" in str(seen[0])


def test_a_manager_open_in_this_process_is_skipped_too(tmp_path: Path) -> None:
    path = store(tmp_path, "a", at=T0)
    manager = ReferenceContextManager(storage_path=path)
    try:
        (action,) = cleanup(tmp_path, ids=["a"])
        assert (action.outcome, action.open_by) == ("skipped", os.getpid())
    finally:
        manager.close()


# -- cleanup -----------------------------------------------------------------------------------


def test_cleanup_archives_only_expired_conversations(tmp_path: Path) -> None:
    store(tmp_path, "old", at=T0)
    store(tmp_path, "new", at=T0 + DEFAULT_TTL)
    (tmp_path / "junk.jsonl").write_text("junk\n")
    now = T0 + DEFAULT_TTL + 10
    (action,) = cleanup(tmp_path, now=now)
    assert (action.id, action.outcome) == ("old", "archived")
    assert action.destination == tmp_path / "archive" / "old.jsonl"
    assert action.describe().startswith(f"archived old -> {action.destination} (expired:")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["archive", "junk.jsonl", "new.jsonl"]
    assert cleanup(tmp_path, now=now) == []
    assert [(f.id, f.state) for f in scan(tmp_path, now=now, archived=True)] == [
        ("junk", "unreadable"),
        ("new", "active"),
        ("old", "archived"),
    ]


def test_ttl_of_cleanup(tmp_path: Path) -> None:
    store(tmp_path, "a", at=T0)
    assert cleanup(tmp_path, now=T0 + 60, ttl=120) == []
    assert [a.outcome for a in cleanup(tmp_path, now=T0 + 60, ttl=60)] == ["archived"]


def test_named_conversations_are_archived_whatever_their_age(tmp_path: Path) -> None:
    store(tmp_path, "a", at=time.time())
    store(tmp_path, "b", at=time.time())
    (tmp_path / "junk.jsonl").write_text("junk\n")
    actions = cleanup(tmp_path, ids=["a", "junk", "a"])
    assert [(a.id, a.outcome, a.reason) for a in actions] == [
        ("a", "archived", "named"),
        ("junk", "archived", "named"),
    ]
    assert sorted(p.name for p in (tmp_path / "archive").iterdir()) == ["a.jsonl", "junk.jsonl"]


def test_an_unknown_id_moves_nothing(tmp_path: Path) -> None:
    store(tmp_path, "a", at=T0)
    before = tree(tmp_path)
    with pytest.raises(UnknownConversation, match=r"no conversation 'nope' in .* \(it has: a\)"):
        cleanup(tmp_path, ids=["a", "nope"])
    for bad in ["../a", "", "."]:
        with pytest.raises(UnknownConversation):
            cleanup(tmp_path, ids=[bad])
    assert tree(tmp_path) == before
    cleanup(tmp_path, ids=["a"])
    with pytest.raises(UnknownConversation, match="'a' is archived already"):
        cleanup(tmp_path, ids=["a"])


def test_cleanup_of_a_missing_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError, match="no such directory"):
        cleanup(tmp_path / "nope")


def test_ids_must_be_a_list(tmp_path: Path) -> None:
    store(tmp_path, "a", at=T0)
    with pytest.raises(TypeError, match="a list of ids"):
        cleanup(tmp_path, ids="a")
    assert cleanup(tmp_path, ids=[]) == []


def test_an_archived_history_still_loads(tmp_path: Path) -> None:
    path = store(tmp_path, "a", at=T0, checkpoint="done")
    messages, checkpoints = load(path)
    cleanup(tmp_path, ids=["a"])
    assert load(tmp_path / "archive" / "a.jsonl") == (messages, checkpoints)
    assert messages == CHAT
    assert [c["label"] for c in checkpoints] == ["done"]


def test_the_torn_sidecar_moves_along(tmp_path: Path) -> None:
    path = store(tmp_path, "a", at=T0)
    append(path, b'{"op":"add"')
    load(path)  # opening sets the torn bytes aside in a.jsonl.torn
    sidecar = tmp_path / "a.jsonl.torn"
    assert sidecar.read_bytes() == b'{"op":"add"\n'
    cleanup(tmp_path, ids=["a"])
    assert not sidecar.exists()
    assert (tmp_path / "archive" / "a.jsonl.torn").read_bytes() == b'{"op":"add"\n'
    assert details(tmp_path / "archive" / "a.jsonl")["set_aside"] == str(
        tmp_path / "archive" / "a.jsonl.torn"
    )


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    store(tmp_path, "old", at=T0)
    store(tmp_path, "named", at=T0 + DEFAULT_TTL)
    before = tree(tmp_path)
    (planned,) = cleanup(tmp_path, now=T0 + DEFAULT_TTL, dry_run=True)
    assert (planned.id, planned.outcome) == ("old", "would_archive")
    assert planned.destination == tmp_path / "archive" / "old.jsonl"
    assert planned.describe().startswith("would archive old -> ")
    (planned,) = cleanup(tmp_path, ids=["named"], dry_run=True)
    assert planned.outcome == "would_archive"
    assert tree(tmp_path) == before
    assert not (tmp_path / "archive").exists()


def test_a_name_taken_in_the_archive_gets_a_number(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / "a.jsonl").write_text("the first a\n")
    (archive / "a.1.jsonl.torn").write_text("a torn tail of another a\n")
    path = store(tmp_path, "a", at=T0)
    content = path.read_bytes()
    (action,) = cleanup(tmp_path, ids=["a"])
    assert action.destination == archive / "a.2.jsonl"
    assert (archive / "a.2.jsonl").read_bytes() == content
    assert (archive / "a.jsonl").read_text() == "the first a\n"
    assert (archive / "a.1.jsonl.torn").read_text() == "a torn tail of another a\n"
    assert not (archive / "a.1.jsonl").exists()


def test_a_conversation_written_to_after_the_scan_is_not_archived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Expiry is checked again once the file is locked: a writer may have come back."""
    path = store(tmp_path, "a", at=T0)
    scan_first = lifecycle.scan

    def scan_then_write(*args, **kwargs):
        found = scan_first(*args, **kwargs)
        append_record(path, {"op": "clear", "at": T0 + DEFAULT_TTL})
        return found

    monkeypatch.setattr(lifecycle, "scan", scan_then_write)
    (action,) = cleanup(tmp_path, now=T0 + DEFAULT_TTL + 1)
    assert action.outcome == "skipped"
    assert "written to meanwhile" in action.reason
    assert path.exists()


# -- details -----------------------------------------------------------------------------------


def test_details_of_a_history(tmp_path: Path) -> None:
    path = store(tmp_path, "a", at=T0, checkpoint="five")

    async def more() -> int:
        async with ReferenceContextManager(storage_path=path, clock=lambda: T0 + 5) as manager:
            await manager.add_message({"role": "user", "content": "and now?\n\n  more"})
            await manager.restore("c1")
            return manager.usage()["history_tokens"]

    tokens = asyncio.run(more())
    append_record(path, {"op": "audit", "at": T0 + 6, "entry": {"dropped": 1}})
    info = details(path, newest=2)
    assert info["messages"] == len(CHAT)
    assert info["tokens"] == tokens
    assert info["records"] == {"add": 6, "checkpoint": 2, "restore": 1, "audit": 1}
    assert [c["label"] for c in info["checkpoints"]] == ["five", "before restore to c1"]
    assert info["audit_entries"] == 1
    assert info["torn"] is None
    assert info["last_activity"] == T0 + 6
    assert info["header"]["conversation_id"] == "a"
    assert [(m["index"], m["role"], m["preview"]) for m in info["newest"]] == [
        (3, "tool", "a.py b.py"),
        (4, "assistant", "Two files: a.py and b.py."),
    ]
    assert info["newest"][1]["message"] == CHAT[4]


def test_preview_is_one_short_line() -> None:
    assert lifecycle.preview({"role": "user", "content": "a\n\nb  c"}) == "a b c"
    long = lifecycle.preview({"role": "user", "content": "x" * 200})
    assert len(long) == 80
    assert long.endswith("...")
    assert lifecycle.preview(CHAT[2]) == "[calls c1]"


# -- durations ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("24h", 86400), ("7d", 604800), ("1.5h", 5400)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["24", "h", "-1h", "1w", "", "1e9d9"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="write a number and a unit"):
        parse_duration(text)


def test_ages() -> None:
    assert [format_age(s) for s in (0, 59, 60, 3599, 7200, 86400 * 3)] == [
        "0s ago",
        "59s ago",
        "1m ago",
        "59m ago",
        "2h ago",
        "3d ago",
    ]
    assert format_age(-120) == "2m ahead"
