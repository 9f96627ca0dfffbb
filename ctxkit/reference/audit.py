"""The truncation audit log: one entry per decision that left messages out of a view or
shortened them, so what a model never saw can be told afterwards.

An entry is a plain JSON-ready dict (other code reads these keys)::

    {"at": seconds, "reason": "budget" | "retention",
     "limits": [...],          # retention only: which of "count", "time", "size" applied
     "budget": tokens,         # the token budget of the view
     "dropped": [[a, b], ...], # history message ranges [a, b) left out plainly
     "summarized": [[a, b]],   # ranges left out but stood for by the summary
     "truncated": [i, ...],    # history messages shown with shortened content
     "tokens_before": n, "tokens_after": n, "history_messages": n}

Ranges are in history order, merged where they touch. A later view that reuses the same
decision adds no entry. Each left-out message is in one range of one entry per budget, save
one case: summarized messages are recorded again as dropped by the compaction that had to
let their summary go (the view could not fit it). With a history file the entries are
written there too (:mod:`ctxkit.reference.journal`), so they survive a restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from ctxkit.messages import Unit

__all__ = ["audit_entry", "message_ranges"]


def message_ranges(units: Sequence[Unit], unit_indices: Iterable[int]) -> list[list[int]]:
    """The history message ranges of these units, sorted and merged where they touch."""
    # Units tile the history, so a run of consecutive unit indices is one message range;
    # only the ends of each run are looked up (a compaction may drop thousands of units).
    merged: list[list[int]] = []
    ordered = sorted(unit_indices)
    if not ordered:
        return merged
    first = last = ordered[0]
    for unit_index in ordered[1:]:
        if unit_index > last + 1:
            merged.append([units[first].start, units[last].stop])
            first = unit_index
        last = unit_index
    merged.append([units[first].start, units[last].stop])
    return merged


def audit_entry(
    *,
    at: float,
    reason: Literal["budget", "retention"],
    budget: int,
    units: Sequence[Unit],
    dropped: Iterable[int] = (),
    summarized: Iterable[int] = (),
    truncated: Iterable[int] = (),
    limits: Iterable[str] = (),
    tokens_before: int,
    tokens_after: int,
    history_messages: int,
) -> dict[str, Any]:
    """An entry; ``dropped`` and ``summarized`` are unit indices, ``truncated`` message
    indices."""
    return {
        "at": at,
        "reason": reason,
        "limits": list(limits),
        "budget": budget,
        "dropped": message_ranges(units, dropped),
        "summarized": message_ranges(units, summarized),
        "truncated": sorted(truncated),
        "tokens_before": tokens_before,
        "tokens_after": tokens_after,
        "history_messages": history_messages,
    }
