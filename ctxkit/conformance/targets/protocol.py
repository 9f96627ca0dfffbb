"""The wire protocol between the runner and an implementation, version 1: its constants, the
digest of a history, and how descriptors are passed. ``conformance/PROTOCOL.md`` is the
specification; ``conformance/protocol.schema.json`` its schema.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Collection, Mapping
from typing import Any

__all__ = [
    "EXIT_CHANNEL_LOST",
    "FDS_VARIABLE",
    "OPS",
    "PROTOCOL_VERSION",
    "RunningDigest",
    "canonical_json",
    "digest",
    "protocol_fds",
]

PROTOCOL_VERSION = 1

FDS_VARIABLE = "CTXKIT_PROTOCOL_FDS"
"""The environment variable that names the request and answer descriptors: ``"R,W"``."""

OPS = ("hello", "reset", "add", "add_many", "view", "get", "set", "clear", "turn")

EXIT_CHANNEL_LOST = 70
"""The Python worker's exit status when the target closed the protocol's descriptors."""


def protocol_fds(environ: Mapping[str, str] = os.environ) -> tuple[int, int]:
    """The (requests, answers) descriptors the runner passed. Raises ValueError if unset."""
    value = environ.get(FDS_VARIABLE, "")
    try:
        requests, answers = (int(part) for part in value.split(","))
    except ValueError:
        raise ValueError(
            f"{FDS_VARIABLE} is {value!r}; it must name two descriptors as 'REQUESTS,ANSWERS'. "
            "This program is started by `ctxkit conformance`, not by hand"
        ) from None
    return requests, answers


def canonical_json(value: Any) -> str:
    """JSON with sorted keys, no whitespace and no ASCII escaping: the digest's input."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(messages: Any, ignore: Collection[str] = ()) -> str:
    """The protocol's digest of a history: SHA-256 of its canonical JSON, the ``ignore`` keys
    left out of every message object."""
    if ignore and isinstance(messages, list):
        messages = [_kept(m, ignore) for m in messages]
    text = canonical_json(messages)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _kept(message: Any, ignore: Collection[str]) -> Any:
    """A message as the digest reads it: a message object without its ``ignore`` keys."""
    if isinstance(message, dict):
        return {k: v for k, v in message.items() if k not in ignore}
    return message


class RunningDigest:
    """:func:`digest` of a list that grows at its end, kept as it grows: each message is
    written once, not the whole history again at every step (a history of hundreds of
    messages is checked after every call)."""

    def __init__(self, ignore: Collection[str] = ()) -> None:
        self._ignore = ignore
        self._hash = hashlib.sha256(b"[")
        self._count = 0

    def add(self, message: Any) -> None:
        if self._ignore:
            message = _kept(message, self._ignore)
        text = ("," if self._count else "") + canonical_json(message)
        self._hash.update(text.encode("utf-8", "surrogatepass"))
        self._count += 1

    def hexdigest(self) -> str:
        ended = self._hash.copy()
        ended.update(b"]")
        return ended.hexdigest()
