"""The history file's reader on bytes that are not text: a clear report, not an AttributeError."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from ctxkit.reference.journal import HistoryFileCorrupt, lock_holder, lock_holders, parse_history

HEADER = (
    b'{"ctxkit":"history","version":1,"conversation_id":"a","encoding":"o200k_base","created":1}\n'
)


def test_a_last_line_of_binary_bytes_is_a_torn_tail() -> None:
    loaded = parse_history(Path("a.jsonl"), HEADER + b"\x89\xff\x00\n")
    assert loaded.torn is not None
    assert (loaded.torn.line, loaded.torn.reason) == (2, "is not JSON (not UTF-8 text)")
    assert loaded.size == len(HEADER)


def test_binary_bytes_before_the_last_line_are_damage() -> None:
    with pytest.raises(HistoryFileCorrupt, match=r"line 2 \(byte \d+\) is not JSON \(not UTF-8"):
        parse_history(Path("a.jsonl"), HEADER + b"\x89\xff\x00\n" + b'{"op":"clear","at":2}\n')


def test_lock_holders_key_by_device_and_inode(tmp_path: Path):
    path = tmp_path / "held"
    with open(path, "w") as file:
        assert lock_holder(path) is None
        fcntl.flock(file, fcntl.LOCK_EX)
        status = os.stat(path)
        key = (os.major(status.st_dev), os.minor(status.st_dev), status.st_ino)
        assert lock_holders()[key] == os.getpid()
        assert lock_holder(path) == os.getpid()
        assert lock_holder(path, {}) is None  # asks only what it is given
    assert lock_holder(path) is None
    assert lock_holder(tmp_path / "missing") is None
