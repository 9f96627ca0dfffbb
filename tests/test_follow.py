"""FileFollower on real files: growth, partial lines, truncation, rotation, deletion, limits."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.tui.follow import FileFollower, follow


def append(path: Path, data: bytes) -> None:
    """One unbuffered write, as the event stream does."""
    with open(path, "ab", buffering=0) as f:
        f.write(data)


def drain(follower: FileFollower, polls: int = 100) -> list[bytes]:
    """Poll until a poll reads nothing."""
    lines: list[bytes] = []
    for _ in range(polls):
        before = follower.bytes_read
        lines += follower.poll()
        if follower.bytes_read == before:
            return lines
    raise AssertionError("still reading after many polls")


def test_waits_for_the_file_then_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with FileFollower(path) as follower:
        assert follower.poll() == []
        assert follower.status == f"waiting for {path}"
        assert follower.error is None
        append(path, b"one\ntwo\n")
        assert follower.poll() == [b"one", b"two"]
        assert follower.status == f"following {path}"


def test_keeps_up_with_growth_and_reads_existing_content(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    append(path, b"already\n")
    with FileFollower(path) as follower:
        assert follower.poll() == [b"already"]
        assert follower.poll() == []
        append(path, b"a\n")
        assert follower.poll() == [b"a"]
        append(path, b"b\nc\n")
        assert follower.poll() == [b"b", b"c"]
        assert follower.bytes_read == len(b"already\na\nb\nc\n")


def test_partial_line_is_returned_once_its_newline_arrives(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with FileFollower(path) as follower:
        append(path, b'{"event": ')
        assert follower.poll() == []
        append(path, b'"x"}\n{"ev')
        assert follower.poll() == [b'{"event": "x"}']
        append(path, b'ent": "y"}\n')
        assert follower.poll() == [b'{"event": "y"}']


def test_empty_lines_are_lines(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    append(path, b"\n\na\n\n")
    with FileFollower(path) as follower:
        assert follower.poll() == [b"", b"", b"a", b""]


def test_crlf_line_endings_are_stripped(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with FileFollower(path) as follower:
        append(path, b"a\r\nb\r")
        assert follower.poll() == [b"a"]
        append(path, b"\n\r\n")  # the "\r" and its "\n" arrive in different polls
        assert follower.poll() == [b"b", b""]
        append(path, b"mid\rdle\n")
        assert follower.poll() == [b"mid\rdle"]  # only a trailing "\r" goes


def test_truncation_starts_again_from_the_beginning(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    append(path, b"first\nsecond\nhalf a li")
    with FileFollower(path) as follower:
        assert follower.poll() == [b"first", b"second"]
        with open(path, "wb", buffering=0) as f:  # truncate in place, same inode
            f.write(b"new\n")
        assert follower.poll() == [b"new"]  # the old partial line is not glued on
        assert follower.truncations == 1
        assert follower.rotations == 0
        assert follower.status == f"reopened {path} after truncation"
        append(path, b"more\n")
        assert follower.poll() == [b"more"]


def test_rotation_reads_the_old_file_to_its_end_then_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    rotated = tmp_path / "events.jsonl.1"
    writer = open(path, "ab", buffering=0)  # noqa: SIM115 - held across the rename
    try:
        writer.write(b"1\n2\n")
        with FileFollower(path) as follower:
            assert follower.poll() == [b"1", b"2"]
            path.rename(rotated)
            writer.write(b"3\n")  # the writer still has the old file
            assert follower.poll() == [b"3"]  # path missing: the renamed file is still read
            assert follower.rotations == 0
            writer.write(b"4\n")
            append(path, b"5\n6\n")  # the new file
            writer.write(b"late\n")  # still the old file, written before we looked
            assert follower.poll() == [b"4", b"late", b"5", b"6"]
            assert follower.rotations == 1
            assert follower.status == f"reopened {path} after rotation"
            append(path, b"7\n")
            assert follower.poll() == [b"7"]
    finally:
        writer.close()


def test_rotation_between_two_polls(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    append(path, b"a\n")
    with FileFollower(path) as follower:
        assert follower.poll() == [b"a"]
        with open(path, "ab", buffering=0) as writer:
            path.rename(tmp_path / "old")
            append(path, b"c\n")
            writer.write(b"b\n")  # the old file grows after the new one exists
        assert follower.poll() == [b"b", b"c"]
        assert follower.rotations == 1


def test_deletion_waits_for_the_file_to_come_back(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    append(path, b"a\n")
    with FileFollower(path) as follower:
        assert follower.poll() == [b"a"]
        path.unlink()
        assert follower.poll() == []
        assert follower.status == f"waiting for {path}"
        assert follower.poll() == []
        append(path, b"b\nc\n")
        assert follower.poll() == [b"b", b"c"]  # the new file, from its start
        assert follower.status == f"following {path}"
        assert follower.truncations == 0


def test_overlong_line_is_skipped_counted_and_never_held(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    limit = 100
    with FileFollower(path, max_line_bytes=limit, max_read_bytes=64) as follower:
        append(path, b"x" * limit + b"\n")  # exactly the limit is allowed
        assert drain(follower) == [b"x" * limit]
        for _ in range(50):  # a 5,000-byte line arriving in pieces
            append(path, b"y" * 100)
            assert follower.poll() == []
            assert len(follower._buf) <= limit
        append(path, b"y\nnext\n" + b"z" * (limit + 1) + b"\nlast\n")
        assert drain(follower) == [b"next", b"last"]
        assert follower.overlong == 2
        assert len(follower._buf) <= limit


def test_backlog_arrives_over_several_polls_in_order(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    expected = [f"event-{i:05d}".encode() for i in range(2_000)]
    append(path, b"".join(line + b"\n" for line in expected))
    budget = 1_000
    got: list[bytes] = []
    batches = 0
    with FileFollower(path, max_read_bytes=budget) as follower:
        while True:
            before = follower.bytes_read
            lines = follower.poll()
            assert follower.bytes_read - before <= budget
            if follower.bytes_read == before:
                break
            batches += 1
            got += lines
    assert got == expected
    assert batches >= 24  # 24,000 bytes at 1,000 per poll


def test_from_start_false_skips_what_is_already_there(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    append(path, b"old\nhalf of an old li")
    with FileFollower(path, from_start=False) as follower:
        append(path, b"ne\nnew\n")  # the rest of the old line is not a line of ours
        assert follower.poll() == [b"new"]
        assert follower.overlong == 0


def test_from_start_false_reads_a_file_created_later_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with FileFollower(path, from_start=False) as follower:
        append(path, b"a\n")
        assert follower.poll() == [b"a"]


def test_unreadable_path_is_reported_and_retried(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.mkdir()
    with FileFollower(path) as follower:
        assert follower.poll() == []
        assert follower.status == f"cannot read {path}: Is a directory"
        assert follower.error == "Is a directory"
        path.rmdir()
        append(path, b"a\n")
        assert follower.poll() == [b"a"]
        assert follower.error is None
        assert follower.status == f"following {path}"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_permission_denied_is_reported_and_retried(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    append(path, b"a\n")
    path.chmod(0)
    with FileFollower(path) as follower:
        assert follower.poll() == []
        assert follower.status == f"cannot read {path}: Permission denied"
        path.chmod(0o600)
        assert follower.poll() == [b"a"]


def test_close_releases_the_file(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    append(path, b"a\n")
    follower = FileFollower(path)
    fd = follower._fd
    assert fd is not None
    with follower:
        pass
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)
    with pytest.raises(ValueError, match="closed"):
        follower.poll()


def test_follow_delivers_another_threads_lines_and_stops_promptly(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    expected = [f"line {i}".encode() for i in range(300)]
    batches: list[list[bytes]] = []
    stop = threading.Event()
    reader = threading.Thread(
        target=follow, args=(path, stop, batches.append), kwargs={"interval": 0.01}
    )
    reader.start()
    try:
        with open(path, "ab", buffering=0) as f:
            for i, line in enumerate(expected):
                f.write(line + b"\n")
                if i % 50 == 0:
                    time.sleep(0.02)
        deadline = time.monotonic() + 10
        while sum(map(len, batches)) < len(expected) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        reader.join(timeout=2)
    assert not reader.is_alive()
    assert all(batches)
    assert [line for batch in batches for line in batch] == expected


def test_follow_returns_at_once_when_stopped_during_a_long_interval(tmp_path: Path) -> None:
    stop = threading.Event()
    reader = threading.Thread(
        target=follow, args=(tmp_path / "missing", stop, lambda _: None), kwargs={"interval": 60}
    )
    reader.start()
    time.sleep(0.05)
    started = time.monotonic()
    stop.set()
    reader.join(timeout=2)
    assert not reader.is_alive()
    assert time.monotonic() - started < 1


def test_follow_drains_a_backlog_without_sleeping_between_polls(tmp_path: Path) -> None:
    # 200 KB of one skipped line: many polls that return no lines but make progress.
    path = tmp_path / "events.jsonl"
    append(path, b"a\n" + b"x" * 200_000 + b"\nb\n")
    got: list[bytes] = []
    stop = threading.Event()

    def on_lines(lines: list[bytes]) -> None:
        got.extend(lines)
        if b"b" in lines:
            stop.set()

    kwargs = {"interval": 30, "max_line_bytes": 100, "max_read_bytes": 1_000}
    reader = threading.Thread(target=follow, args=(path, stop, on_lines), kwargs=kwargs)
    reader.start()
    reader.join(timeout=5)
    stop.set()
    reader.join(timeout=2)
    assert got == [b"a", b"b"]


WRITER = """
import os, sys, time
path = sys.argv[1]
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
for i in range(150):
    os.write(fd, b'{"n": %d}\\n' % i)
    if i % 10 == 0:
        time.sleep(0.002)
os.rename(path, path + ".1")
for i in range(150, 170):
    os.write(fd, b'{"n": %d}\\n' % i)  # still the renamed file
os.close(fd)
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
for i in range(170, 300):
    os.write(fd, b'{"n": %d}\\n' % i)
os.close(fd)
"""


def test_follows_a_writer_in_another_process_across_its_rotation(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    got: list[bytes] = []
    with FileFollower(path) as follower:
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
        try:
            deadline = time.monotonic() + 20
            while writer.poll() is None and time.monotonic() < deadline:
                got += follower.poll()
                time.sleep(0.001)
            assert writer.wait(timeout=10) == 0
        finally:
            writer.kill()
        got += drain(follower)
    assert got == [b'{"n": %d}' % i for i in range(300)]


def _strip_cr(line: bytes) -> bytes:
    return line[:-1] if line.endswith(b"\r") else line


@settings(max_examples=50, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30),
    max_line_bytes=st.integers(1, 50),
    max_read_bytes=st.integers(1, 64),
    data=st.data(),
)
def test_any_chunking_and_polling_yields_exactly_the_lines(
    lines: list[bytes], max_line_bytes: int, max_read_bytes: int, data: st.DataObject
) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(stream)), max_size=20), label="cuts"))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        got: list[bytes] = []
        with FileFollower(
            path, max_line_bytes=max_line_bytes, max_read_bytes=max_read_bytes
        ) as follower:
            for piece in pieces:
                append(path, piece)
                for _ in range(data.draw(st.integers(0, 2), label="polls")):
                    got += follower.poll()
                    assert len(follower._buf) <= max_line_bytes
            got += drain(follower, polls=len(stream) + 2)
            assert follower.bytes_read == len(stream)
    kept = [line for line in lines if len(line) <= max_line_bytes]
    assert got == [_strip_cr(line) for line in kept]
    assert follower.overlong == len(lines) - len(kept)
