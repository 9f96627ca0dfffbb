"""What is known about a library's failure of a property: the adapters record it, the survey
shows it. Beneath both, so that the adapters import nothing above them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Finding"]


@dataclass(frozen=True)
class Finding:
    """What a failure of a library is: ``bug`` (a real bug), ``design`` (an arguable design
    choice, accepted by ``allow``) or ``adapter`` (a limitation of ctxkit's adapter)."""

    kind: str
    reason: str
    allow: str | None = None
