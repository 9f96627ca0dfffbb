"""Exact keys for JSON-like values, for the memos that see every message of every view.

Its own module because the judge keys its memo with it and must not import
:mod:`ctxkit.messages`, the code it checks."""

from __future__ import annotations

import marshal
from typing import Any


def exact_form(value: Any) -> bytes | None:
    """``value`` as bytes that are equal exactly when the values are: the same types and values
    (1, 1.0 and True apart, as JSON writes them) and, in dicts, the same key order. None for
    what marshal cannot write (an object of its own, a cycle, nesting too deep). Several times
    cheaper than sorted JSON, so it keys the memos that see every message of every view.
    Version 0 of marshal's format: no back-references and nothing that depends on a string
    being interned, so a list's bytes are its items' bytes one after another."""
    try:
        return marshal.dumps(value, 0)
    except ValueError:
        return None
