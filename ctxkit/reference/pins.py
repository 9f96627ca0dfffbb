"""Which units always stay in a view: the one rule budget compaction and retention share.

A unit stays when it starts with a system (or developer) message, when one of its messages
is marked ``metadata: {"pin": true}``, when it holds the newest user turn, or when it is the
newest unit of the view. The first two never change for a unit; the last two move forward
as the history grows.
"""

from __future__ import annotations

from ctxkit.messages import Unit
from ctxkit.reference.store import History

__all__ = ["always_pinned", "has_user_turn"]

_SYSTEM = ("system", "developer")


def always_pinned(history: History, unit: Unit) -> bool:
    """A system unit or one marked ``metadata.pin``: pinned for good."""
    if history.infos[unit.start].role in _SYSTEM:
        return True
    # Plain loops: this runs once per unit of a view on every compaction.
    for message in history.messages[unit.start : unit.stop]:
        metadata = message.get("metadata")
        if metadata is not None and isinstance(metadata, dict) and metadata.get("pin"):
            return True
    return False


def has_user_turn(history: History, unit: Unit) -> bool:
    """The unit holds a user turn (words of the user's own, not only tool results)."""
    return any(info.user_turn for info in history.infos[unit.start : unit.stop])
