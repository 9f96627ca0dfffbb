"""Python source for a value: what reproducer scripts and bug reports write their data with.

Only Python literals (and ``float("nan")``, ``json.loads(...)`` for what literals cannot say),
laid out to about :data:`WIDTH` columns, so a script that holds one is valid Python by
construction. Standard library only: any layer may use it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

__all__ = ["WIDTH", "literal"]

WIDTH = 96
"""Lines are kept to about this width where a value allows it."""

_NESTING = 40
"""Deeper than this, a value is written as ``json.loads("...")``: Python's parser refuses
too many nested brackets."""


def literal(value: Any, indent: int = 0, column: int | None = None) -> str:
    """``value`` as Python source that evaluates to an equal value; spread over lines indented
    by ``indent`` spaces when it does not fit on one starting at ``column`` (by default, the
    indentation)."""
    if _depth(value) > _NESTING:
        return f"json.loads({_string(json.dumps(value, ensure_ascii=True))})"
    flat = _flat(value)
    start = indent if column is None else column
    if len(flat) + start <= WIDTH or not isinstance(value, dict | list | tuple | str):
        return flat
    inner = " " * (indent + 4)
    if isinstance(value, str):
        pieces = "\n".join(inner + _string(piece) for piece in _pieces(value))
        return f"(\n{pieces}\n{' ' * indent})"
    if isinstance(value, dict):
        items = [f"{_flat(k)}: {literal(v, indent + 4)}" for k, v in value.items()]
        open_, close = "{", "}"
    else:
        items = [literal(v, indent + 4) for v in value]
        open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
    body = "".join(f"{inner}{item},\n" for item in items)
    return f"{open_}\n{body}{' ' * indent}{close}"


def _flat(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f'float("{value!r}")'
    if isinstance(value, str):
        return _repeated(value) or _string(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_flat(k)}: {_flat(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flat(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(_flat(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    raise TypeError(f"no literal for a {type(value).__name__}: {value!r:.80}")


def _string(text: str) -> str:
    """A string literal; double-quoted unless the text holds a double quote."""
    quoted = repr(text)
    if quoted.startswith("'") and '"' not in text:
        return f'"{quoted[1:-1]}"'
    return quoted


def _repeated(text: str) -> str:
    """A long run of one short unit as ``"unit" * n``: a 24 kB output stays one line."""
    if len(text) < 200:
        return ""
    for size in range(1, 9):
        unit = text[:size]
        count, rest = divmod(len(text), size)
        if not rest and unit * count == text:
            return f"{_string(unit)} * {count}"
    return ""


def _pieces(text: str, size: int = 72) -> Iterator[str]:
    """A long string in pieces, broken after newlines where it has them."""
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        newline = text.rfind("\n", start, end)
        if end < len(text) and newline >= start:
            end = newline + 1
        yield text[start:end]
        start = end


def _depth(value: Any, limit: int = _NESTING + 1) -> int:
    """Nesting depth of containers, counted without recursion and only up to ``limit``."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            deepest = max(deepest, depth)
            if depth >= limit:
                return depth
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest
