"""Follow a growing JSON Lines file the way ``tail -F`` does, in bounded memory.

``ctxkit inspect --follow PATH`` reads the event stream another process writes
(:class:`ctxkit.telemetry.stream.EventStream`: one ``write(2)`` per line). The file may not
exist yet, may be truncated, rotated (renamed away and replaced) or deleted while we read it,
and may hold a backlog far larger than we want in memory. :class:`FileFollower` turns all of
that into a plain "give me the new complete lines" call; :func:`follow` runs it on a worker
thread. Nothing here imports Textual, so it is testable on its own.

Detection, once per :meth:`FileFollower.poll`:

* ``stat(path)`` against ``fstat(fd)`` (``st_dev``, ``st_ino``): a different file at the path
  is a rotation. The old file is read to its end first (its writer may still append to it for
  a moment after the rename), then the new one from its start. While the path is missing and
  the old file was only renamed (``st_nlink > 0``) it is kept and drained, since a writer that
  holds it open goes on writing there.
* ``fstat(fd).st_size`` below our offset is a truncation: read again from 0. (A file truncated
  and refilled past our offset between two polls cannot be told apart from growth, as with
  ``tail``.)
* A missing path with a deleted old file (``st_nlink == 0``): drain it, close it, and wait.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from collections.abc import Callable
from types import TracebackType

__all__ = ["FileFollower", "follow"]

_CHUNK = 256 << 10
"""Largest single ``pread``; the per-poll budget is ``max_read_bytes``."""


class FileFollower:
    """Return the complete new lines of a file on each :meth:`poll`, surviving rotation.

    Parameters:
        path: the file to follow; it need not exist yet.
        from_start: read what the file already holds. ``False`` starts at the end of a file
            that exists now (like ``tail -f -n0``); a file that appears later, or replaces
            this one, is always read from its start.
        max_line_bytes: longer lines (without their newline) are skipped and counted in
            :attr:`overlong`, never held whole.
        max_read_bytes: at most this much is read per poll, so a large backlog arrives over
            several polls instead of all at once.

    Memory is bounded by ``max_line_bytes`` (the partial last line) plus ``max_read_bytes``
    (one poll's lines). Lines are bytes without the ``\\n`` (and a trailing ``\\r``);
    nothing is decoded.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        from_start: bool = True,
        max_line_bytes: int = 1 << 20,
        max_read_bytes: int = 4 << 20,
    ) -> None:
        if max_line_bytes < 1 or max_read_bytes < 1:
            raise ValueError("max_line_bytes and max_read_bytes must be positive")
        self.path = os.fspath(path)
        self.max_line_bytes = max_line_bytes
        self.max_read_bytes = max_read_bytes
        self.status = f"waiting for {self.path}"
        """What the follower is doing, for a status bar."""
        self.error: str | None = None
        """The last file-system error (retried on the next poll); ``None`` once reading works."""
        self.overlong = 0
        """Lines skipped for being longer than ``max_line_bytes``."""
        self.rotations = 0
        self.truncations = 0
        self.bytes_read = 0
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        self._offset = 0
        self._buf = bytearray()
        """The partial last line; never longer than ``max_line_bytes``."""
        self._skipping = False
        """Discarding bytes up to the next newline (an overlong or cut-off line)."""
        self._closed = False
        # Open now, so "the current end" for from_start=False means the end at construction.
        self._open(at_end=not from_start)

    # -- public -------------------------------------------------------------------------

    def poll(self) -> list[bytes]:
        """Read what is new (at most ``max_read_bytes``) and return the completed lines.

        File-system trouble never raises: it is shown in :attr:`status` and :attr:`error`, and
        the next poll tries again.
        """
        if self._closed:
            raise ValueError("poll() on a closed FileFollower")
        lines: list[bytes] = []
        budget = self.max_read_bytes
        if self._fd is None and not self._open(at_end=False):
            return lines
        # Look at the path before draining the open file: anything the writer put in the old
        # file before we saw the new one is then read before we switch.
        path_ident, path_error = self._stat_path()
        budget = self._drain(lines, budget)
        if budget == 0:
            return lines  # a read error, or more to read in the current file first
        if path_ident is None and path_error is not None:
            self._fail(path_error)  # e.g. a directory we may no longer search; keep the file
            return lines
        if path_ident == self._ident:
            if self.error is not None:
                self.error = None
                self.status = f"following {self.path}"
            return lines
        # The path names another file, or nothing. Our file is read to its end.
        if path_ident is None:
            if self._old_file_deleted():
                self._close_fd()
                self.status = f"waiting for {self.path}"
            else:  # renamed away: its writer may still use it, so read it until a new file
                self.status = f"waiting for {self.path} (reading the renamed file meanwhile)"
            return lines
        self._close_fd()
        self.rotations += 1
        if self._open(at_end=False):
            self.status = f"reopened {self.path} after rotation"
            self._drain(lines, budget)
        return lines

    def close(self) -> None:
        """Release the file descriptor; polling afterwards is an error."""
        self._closed = True
        self._close_fd()

    def __enter__(self) -> FileFollower:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------

    def _open(self, *, at_end: bool) -> bool:
        """Open the path; on failure record why and report ``False``."""
        try:
            # O_NONBLOCK: opening a FIFO must not wait for its writer; it is refused below.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            self.error = None
            self.status = f"waiting for {self.path}"
            return False
        except OSError as error:
            self._fail(error)
            return False
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            if not stat.S_ISREG(st.st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            offset = st.st_size if at_end else 0
            # Starting mid-line would deliver the line's tail as if it were a whole line.
            cut = offset > 0 and os.pread(fd, 1, offset - 1) != b"\n"
        except OSError as error:
            os.close(fd)
            self._fail(error)
            return False
        self._fd = fd
        self._ident = (st.st_dev, st.st_ino)
        self._offset = offset
        self._buf.clear()
        self._skipping = cut
        self.error = None
        self.status = f"following {self.path}"
        return True

    def _stat_path(self) -> tuple[tuple[int, int] | None, OSError | None]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None, None
        except OSError as error:
            return None, error
        return (st.st_dev, st.st_ino), None

    def _old_file_deleted(self) -> bool:
        assert self._fd is not None
        try:
            return os.fstat(self._fd).st_nlink == 0
        except OSError:
            return True

    def _drain(self, lines: list[bytes], budget: int) -> int:
        """Read the open file from our offset until its end or the budget; return the rest."""
        assert self._fd is not None
        fd = self._fd
        try:
            if os.fstat(fd).st_size < self._offset:
                self._offset = 0
                self._buf.clear()
                self._skipping = False
                self.truncations += 1
                self.status = f"reopened {self.path} after truncation"
            while budget > 0:
                chunk = os.pread(fd, min(budget, _CHUNK), self._offset)
                if not chunk:
                    break
                self._offset += len(chunk)
                self.bytes_read += len(chunk)
                budget -= len(chunk)
                self._split(chunk, lines)
        except OSError as error:
            # Keep the file and our place in it: reopening would deliver lines twice.
            self._fail(error)
            return 0
        return budget

    def _split(self, chunk: bytes, lines: list[bytes]) -> None:
        """Append the lines ``chunk`` completes; keep (or skip) its unfinished tail."""
        limit = self.max_line_bytes
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                if not self._skipping:
                    if len(self._buf) + len(chunk) - start > limit:
                        self._buf.clear()
                        self._skipping = True
                        self.overlong += 1
                    else:
                        self._buf += chunk[start:]
                return
            if self._skipping:
                self._skipping = False
            elif len(self._buf) + end - start > limit:
                self._buf.clear()
                self.overlong += 1
            else:
                line = bytes(self._buf) + chunk[start:end] if self._buf else chunk[start:end]
                self._buf.clear()
                lines.append(line[:-1] if line.endswith(b"\r") else line)
            start = end + 1

    def _fail(self, error: OSError) -> None:
        reason = error.strerror or str(error)
        self.error = reason
        self.status = f"cannot read {self.path}: {reason}"

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        self._ident = None
        self._buf.clear()
        self._skipping = False
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def follow(
    path: str | os.PathLike[str],
    stop: threading.Event,
    on_lines: Callable[[list[bytes]], None],
    *,
    interval: float = 0.05,
    from_start: bool = True,
    max_line_bytes: int = 1 << 20,
    max_read_bytes: int = 4 << 20,
    on_poll: Callable[[FileFollower], None] | None = None,
) -> None:
    """Follow ``path`` until ``stop`` is set, handing each non-empty batch to ``on_lines``.

    ``on_poll`` is called with the follower after every poll (to show its ``status``).

    Meant for a worker thread. It sleeps ``interval`` only after a poll that read nothing, so
    a backlog (even one made of skipped overlong lines) is drained at full speed, and a set
    ``stop`` ends the wait at once.
    """
    with FileFollower(
        path,
        from_start=from_start,
        max_line_bytes=max_line_bytes,
        max_read_bytes=max_read_bytes,
    ) as follower:
        while not stop.is_set():
            before = follower.bytes_read
            lines = follower.poll()
            if lines:
                on_lines(lines)
            if on_poll is not None:
                on_poll(follower)
            if not lines and follower.bytes_read == before:
                stop.wait(interval)
