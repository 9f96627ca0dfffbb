"""The OpenTelemetry Collector ``file`` exporter's binary form. With ``format: proto`` or
``compression: zstd`` it writes each export as a 4-byte big-endian length and that many bytes:
an OTLP export request (protobuf, or OTLP/JSON), zstd-compressed when ``compression`` is set.
The file does not say whether it holds traces or logs; :func:`~ctxkit.audit.otlp.decode_export`
tells them apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from ctxkit.audit.otlp import NotOtlp, Record, decode_export
from ctxkit.audit.request import parse_json
from ctxkit.extras import install_line

__all__ = ["MAX_EXPORT_BYTES", "Decoded", "MissingDecompressor", "frames", "is_framed"]

MAX_EXPORT_BYTES = 256 * 1024 * 1024
"""The most one export may hold, compressed or not: a length past it is no frame of the
exporter's (and a zstd frame is never inflated past it)."""

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class MissingDecompressor(RuntimeError):
    """The file is zstd-compressed and the ``zstandard`` package is not installed."""


@dataclass(slots=True)
class Decoded:
    """A protobuf export, decoded: its spans or log records."""

    records: list[Record]


def is_framed(start: bytes) -> bool:
    """Whether a file that starts with ``start`` is in the framed form: a length's first byte
    is 0 for any export under 16 MiB, where OTLP/JSON text starts with ``{``, ``[`` or
    white space."""
    return start[:1] == b"\x00"


def frames(handle: IO[bytes]) -> Iterator[tuple[int, Any, str, int]]:
    """(frame number, OTLP/JSON data or :class:`Decoded` or None, what is wrong, bytes read so
    far) per frame. A cut-off last frame (a file still being written) is a problem, then the
    end."""
    consumed = 0
    number = 0
    while head := handle.read(4):
        number += 1
        consumed += len(head)
        if len(head) < 4:
            yield number, None, "its length is cut off (a file still being written?)", consumed
            return
        size = int.from_bytes(head, "big")
        if size > MAX_EXPORT_BYTES:
            yield number, None, f"says it holds {size} bytes, more than any export", consumed
            return
        payload = handle.read(size)
        consumed += len(payload)
        if len(payload) < size:
            yield (
                number,
                None,
                f"cut off at {len(payload)} of {size} bytes (a file still being written?)",
                consumed,
            )
            return
        try:
            yield number, _decode(payload), "", consumed
        except ValueError as exc:
            yield number, None, str(exc), consumed


def _decode(payload: bytes) -> Any:
    if payload[:4] == ZSTD_MAGIC:
        payload = _inflate(payload)
    if payload.lstrip()[:1] == b"{":
        return parse_json(payload)
    try:
        return Decoded(decode_export(payload))
    except NotOtlp as exc:
        raise ValueError(str(exc)) from None


def _inflate(payload: bytes) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise MissingDecompressor(
            "the file's exports are zstd-compressed (the file exporter's compression: zstd); "
            "reading them needs the zstandard package: " + install_line("audit")
        ) from None
    try:
        claimed = zstandard.frame_content_size(payload)  # -1: the frame does not say
        if claimed > MAX_EXPORT_BYTES:
            raise ValueError(f"says it inflates to {claimed} bytes, past any export")
        return zstandard.ZstdDecompressor().decompress(payload, max_output_size=MAX_EXPORT_BYTES)
    except zstandard.ZstdError as exc:
        raise ValueError(f"does not decompress as zstd: {exc}") from None
