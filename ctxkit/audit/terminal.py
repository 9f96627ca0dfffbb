"""Recorded text made safe for a terminal: a conversation key, a model name or a message
recorded with an escape sequence in it could otherwise move the cursor, recolour or retitle
the terminal of whoever reads the report, or hide a line of it. The HTML pages escape what
they show; text output escapes control characters the same way Python writes them
(``\\x1b``), so what was recorded stays readable and nothing of it acts.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 control characters, DEL, and the bidirectional marks and overrides that can
make a line read other than it is."""


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` with every control character escaped (``\\x1b``); newlines kept when
    ``lines`` (text of several lines), escaped otherwise (one line must stay one line)."""
    if lines:
        return "\n".join(_CONTROL.sub(_escaped, line) for line in text.split("\n"))
    return _CONTROL.sub(_escaped, text)
