"""A JSON Lines stream of events, one per line, flushed per event, for ``ctxkit inspect``.

Each line is an object::

    {"v": 1, "ts": 1763700000.123, "event": "ctxkit:view", "data": {...}}

``v`` is :data:`SCHEMA_VERSION`; ``ts`` is Unix seconds when the event was published. Message
text (a summary's ``content``, an invariant violation's ``message``, which can quote the
messages it compares) is left out unless ``include_text=True``; its length is kept as
``content_chars`` or ``message_chars``. A write that fails (a full disk, a removed mount) is
logged and the event dropped; the manager goes on, and writing resumes when the file takes
writes again.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import IO

from ctxkit.events import Event

__all__ = ["SCHEMA_VERSION", "EventStream", "encode_event"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1

_WARN_EVERY_S = 60.0
_TEXT_KEYS = ("content", "message")
"""Payload keys whose text is written only with ``include_text=True``."""
_encode = json.JSONEncoder(separators=(",", ":"), default=str).encode


def encode_event(event: Event, *, include_text: bool = False) -> str:
    """One line of the stream (without the newline)."""
    data = event.data
    if not include_text and ("content" in data or "message" in data):
        data = dict(data)
        for key in _TEXT_KEYS:
            if key in data:
                text = data.pop(key)
                data[f"{key}_chars"] = len(text) if isinstance(text, str) else None
    return _encode(
        {"v": SCHEMA_VERSION, "ts": round(event.time, 6), "event": event.name, "data": data}
    )


class EventStream:
    """A bus subscriber appending each event to a JSON Lines file.

    Parameters:
        path: the file; created with its directory if missing, appended to if present.
        include_text: also write message text (summaries), which is off by default.

    Example::

        stream = EventStream("events.jsonl")
        manager.bus.subscribe(stream)
        ...
        stream.close()
    """

    deferred = True
    """Delivered when the caller's task yields, not inside the request (see
    :mod:`ctxkit.events`)."""

    def __init__(self, path: str | os.PathLike[str], *, include_text: bool = False) -> None:
        self.path = Path(path)
        self.include_text = include_text
        self.written = 0
        self.dropped = 0
        """Events lost to write errors."""
        self._lock = threading.Lock()
        self._last_warning = -_WARN_EVERY_S
        self._closed = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] | None = self._open()

    def _open(self) -> IO[bytes]:
        # Unbuffered: each line is one write(2) to the file, so a reader sees whole events
        # as soon as they happen, with no separate flush.
        return open(self.path, "ab", buffering=0)

    def __call__(self, event: Event) -> None:
        line = (encode_event(event, include_text=self.include_text) + "\n").encode()
        with self._lock:
            if self._closed:
                return
            try:
                if self._file is None:
                    self._file = self._open()
                written = self._file.write(line)
                if written is not None and written < len(line):  # a short write: disk full
                    raise OSError(errno.ENOSPC, "short write")
            except OSError as error:
                self._lost(error)
            else:
                self.written += 1

    def _lost(self, error: OSError) -> None:
        self.dropped += 1
        # The next write reopens the file; a reader skips a torn line.
        self._discard()
        now = time.monotonic()
        if now - self._last_warning >= _WARN_EVERY_S:
            self._last_warning = now
            log.warning(
                "event stream %s: write failed (%s); %d event(s) dropped so far, the manager "
                "is unaffected",
                self.path,
                error.strerror or error,
                self.dropped,
            )

    def _discard(self) -> None:
        old, self._file = self._file, None
        if old is not None:
            with contextlib.suppress(OSError):
                old.close()

    def close(self) -> None:
        """Close the file (every event is already written). Further events are ignored."""
        with self._lock:
            self._closed = True
            self._discard()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
