"""What the upstream bug reports share: the history a counterexample's last view was asked
for, replayed from its trace, so a report can show it in the library's own types."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["history_before_view"]


def history_before_view(trace: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The history when the counterexample's last view was asked for, and its budget."""
    history: list[dict[str, Any]] = []
    budget = 0
    for call in trace:
        op, value = call["op"], call.get("value")
        if op in ("add", "add_then_edit"):
            history.append(value)
        elif op == "add_concurrently":
            history.extend(value)
        elif op in ("set", "set_then_edit"):
            history = list(value)
        elif op == "clear":
            history = []
        elif op in ("request", "request_then_edit"):
            snapshot, budget = list(history), (value or {}).get("token_budget") or 0
    return snapshot if trace else [], budget
