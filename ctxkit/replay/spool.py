"""A manager's figures, conversation by conversation, kept on disk as a replay goes: each
conversation's JSON object is written when it ends and read back, as often as the report
needs, one at a time. What a replay holds in memory then follows the conversations in
flight, not the length of the recording."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Spool", "write_json"]


class Spool:
    """JSON objects in a temporary file, one a line, in the order they were appended."""

    def __init__(self) -> None:
        # held for the spool's life (closed by close(), or deleted when collected)
        self._file = tempfile.NamedTemporaryFile(prefix="ctxkit-replay-", suffix=".jsonl")  # noqa: SIM115
        self._count = 0

    def append(self, figures: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(figures, ensure_ascii=False).encode("utf-8") + b"\n")
        self._count += 1

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Every object from the first, through a reader of its own (two readings may be
        under way at once)."""
        self._file.flush()
        with open(self._file.name, "rb") as lines:
            for _, line in zip(range(self._count), lines, strict=False):
                yield json.loads(line)

    def close(self) -> None:
        self._file.close()


_MARK = "\x00ctxkit-conversations\x00"


def write_json(report: Mapping[str, Any], path: Path) -> None:
    """The report as JSON at ``path``, its managers' conversations written one by one from
    wherever they are (a :class:`Spool` or a list), never all in memory at once."""
    managers: Sequence[Mapping[str, Any]] = report["managers"]
    skeleton = {**report, "managers": [{**m, "conversations": _MARK} for m in managers]}
    head, *tails = json.dumps(skeleton, indent=2).split(json.dumps(_MARK))
    with path.open("w", encoding="utf-8") as out:
        out.write(head)
        for manager, tail in zip(managers, tails, strict=True):
            out.write("[")
            separator = "\n        "
            for figures in manager["conversations"]:
                out.write(separator + json.dumps(figures))
                separator = ",\n        "
            out.write("\n      ]" if separator.startswith(",") else "]")
            out.write(tail)
        out.write("\n")
