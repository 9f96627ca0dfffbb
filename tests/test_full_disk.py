"""The reference manager on a real full filesystem: a small tmpfs mounted for the test.

Views go on when their audit entry cannot be written (issue 14, item 3); every change to the
history is refused cleanly and changes nothing; once there is room again, nothing was lost.
Needs root to mount (as CI runs): skipped otherwise, and a failure under CI.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxkit import events
from ctxkit.reference import ReferenceContextManager
from ctxkit.reference.journal import HistoryFileError, read_history_file
from ctxkit.telemetry import PrometheusMetrics
from ctxkit.workload import conversation
from tests.chat import run
from tests.system import missing

DISK_BYTES = 256 * 1024


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """An empty tmpfs of DISK_BYTES, unmounted again after the test."""
    if os.geteuid() != 0:
        missing("mounting a small tmpfs to fill it needs root (CI runs as root)")
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        missing(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=True)


def fill(directory: Path) -> Path:
    """Take every free byte of the filesystem; returns the file that holds them."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (64 * 1024, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    with pytest.raises(OSError, match="No space left") as full:
        (directory / "probe").write_bytes(b"x" * 4096)
    assert full.value.errno == errno.ENOSPC
    return filler


async def add_until_refused(manager: ReferenceContextManager) -> None:
    """Use up the room left in the history file's last page: a full disk still takes an
    append that fits there. Tiny messages, so what is left is smaller than any audit entry."""
    with pytest.raises(HistoryFileError, match="No space left on device"):  # noqa: PT012
        for number in range(1_000):
            await manager.add_message({"role": "user", "content": str(number % 10)})


def test_a_full_disk_refuses_changes_but_never_a_view(
    disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = disk / "c.jsonl"
    messages = conversation(40, seed=14)
    seen: list[events.Event] = []

    async def scenario() -> dict[str, Any]:
        manager = ReferenceContextManager(storage_path=path, max_tokens=100_000)
        manager.bus.subscribe(seen.append)
        prometheus = PrometheusMetrics()
        manager.bus.subscribe(prometheus)
        for message in messages:
            await manager.add_message(message)
        filler = fill(disk)
        await add_until_refused(manager)
        history = await manager.get_messages()
        file_bytes = path.read_bytes()

        # Views that compact (each leaves messages out, so each has an audit entry).
        views = []
        for budget in (2_000, 1_500, 1_200):
            views.append(await manager.get_messages_for_request(token_budget=budget))
        assert all(views)
        assert len(manager.audit()) == 3
        failures = [e for e in seen if e.name == events.AUDIT_WRITE_FAILED]
        assert len(failures) == 1  # once for the run of failures, not once per view
        assert "No space left on device" in failures[0].data["error"]
        assert failures[0].data["unwritten"] == 1
        manager.bus.flush()
        assert prometheus.registry.get_sample_value("ctxkit_audit_write_failures_total") == 1
        warnings = [r for r in caplog.records if "kept in memory" in r.getMessage()]
        assert [w.levelno for w in warnings] == [logging.WARNING]

        # Every change to the history is refused and changes nothing.
        with pytest.raises(HistoryFileError, match="No space left"):
            await manager.add_message({"role": "user", "content": "one more " * 20})
        with pytest.raises(HistoryFileError, match="No space left"):
            await manager.checkpoint("on a full disk")
        with pytest.raises(HistoryFileError, match="No space left"):
            await manager.set_messages([])
        assert await manager.get_messages() == history
        assert manager.checkpoints() == []
        assert path.read_bytes() == file_bytes

        # Room again: the entries kept in memory go first, then the change.
        filler.unlink()
        await manager.add_message({"role": "user", "content": "after the disk was freed"})
        point = await manager.checkpoint("freed")
        manager.close()
        return {"history": history, "audit": manager.audit(), "checkpoint": point}

    with caplog.at_level(logging.INFO, logger="ctxkit"):
        before = run(scenario())
    records = read_history_file(path).records
    audits = [r["entry"] for r in records if r["op"] == "audit"]
    assert audits == before["audit"]
    last_audit = max(i for i, r in enumerate(records) if r["op"] == "audit")
    assert records[last_audit + 1]["message"]["content"] == "after the disk was freed"

    async def reopened() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async with ReferenceContextManager(storage_path=path) as again:
            return await again.get_messages(), again.audit()

    history, audit = run(reopened())
    assert history == [*before["history"], {"role": "user", "content": "after the disk was freed"}]
    assert audit == before["audit"]


def test_closing_on_a_full_disk_says_what_the_file_lacks(
    disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = disk / "c.jsonl"

    async def scenario() -> None:
        manager = ReferenceContextManager(storage_path=path, max_tokens=100_000)
        for message in conversation(30, seed=15):
            await manager.add_message(message)
        fill(disk)
        await add_until_refused(manager)
        await manager.get_messages_for_request(token_budget=1_500)
        manager.close()
        assert manager._file is not None
        assert manager._file.closed

    with caplog.at_level(logging.INFO, logger="ctxkit"):
        run(scenario())
    assert any(
        "closing with 1 audit entries that could not be written" in r.getMessage()
        for r in caplog.records
    )
