"""Retention: old units a view leaves out by count, age or size, whatever the budget.

The limits hold for the history's units as a whole (not one budget's view), so one
:class:`Horizon` per generation of the history serves every budget's plan. It is a position
in the list of complete units: units before it are out of every view unless pinned (see
:mod:`ctxkit.reference.pins`), units from it on are in, as far as retention goes. It only
moves forward within a generation (adds make counts and sizes grow, time passes), so it is
advanced with running totals and costs work that follows the units passed and the units
added, never the whole history. A limit that pinned units alone exceed leaves only the
pinned units. Age is read in arrival order: the horizon stops at the first unit that is not
old, so a unit stamped earlier by a clock that stepped back stays until those before it go.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

from ctxkit.reference.pins import always_pinned, has_user_turn
from ctxkit.reference.store import History

__all__ = ["LIMIT_NAMES", "Horizon", "Limits", "limit_names"]

COUNT, TIME, SIZE = 1, 2, 4
LIMIT_NAMES = ((COUNT, "count"), (TIME, "time"), (SIZE, "size"))
"""Each limit's bit, and its name in audit entries, in the order entries list them."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The retention settings (validated by the manager)."""

    messages: int | None = None
    seconds: float | None = None
    size: int | None = None
    """Bytes of the retained messages as compact JSON (see :meth:`History.size`)."""
    summarize: bool = False

    def __bool__(self) -> bool:
        return self.messages is not None or self.seconds is not None or self.size is not None


def limit_names(mask: int) -> list[str]:
    """The names of the limits in a mask, in :data:`LIMIT_NAMES` order."""
    return [name for bit, name in LIMIT_NAMES if mask & bit]


@dataclass(slots=True)
class Horizon:
    """Where retention puts the start of every view, over one generation of a history."""

    history: History
    limits: Limits
    generation: int = 0
    scanned: int = 0
    """History units looked at (like a plan's, it stops at a call still waiting)."""
    units: list[int] = field(default_factory=list)
    """The complete units, in order; positions below index this list."""
    counts: list[int] = field(default_factory=lambda: [0])
    """``counts[p]``: messages of units ``units[:p]``; ``fixed_counts`` the same over the
    units pinned for good. ``sizes`` and ``fixed_sizes`` in bytes (kept with a size limit)."""
    fixed_counts: list[int] = field(default_factory=lambda: [0])
    sizes: list[int] = field(default_factory=lambda: [0])
    fixed_sizes: list[int] = field(default_factory=lambda: [0])
    always: set[int] = field(default_factory=set)
    """Unit indices pinned for good."""
    newest_user: int | None = None
    """Position of the newest unit holding a user turn."""
    start: int = 0
    """Position of the horizon: ``units[start:]`` are within the limits."""
    why: list[int] = field(default_factory=list)
    """For each position before ``start``, the limits that moved the horizon past it."""

    @classmethod
    def over(cls, history: History, limits: Limits) -> Horizon:
        return cls(history=history, limits=limits, generation=history.generation)

    # -- where it is -------------------------------------------------------------------------

    @property
    def unit(self) -> int:
        """The horizon as a unit index: units before it are out unless pinned."""
        return self.units[self.start] if self.start < len(self.units) else self.scanned

    @property
    def pins(self) -> tuple[int | None, int | None]:
        """The pins that move (unit indices): the newest user turn's and the newest unit."""
        newest_user = None if self.newest_user is None else self.units[self.newest_user]
        return newest_user, (self.units[-1] if self.units else None)

    def limits_of(self, unit_index: int) -> int:
        """The mask of limits that moved the horizon past a unit before it."""
        return self.why[bisect_left(self.units, unit_index)]

    # -- moving it ---------------------------------------------------------------------------

    def update(self, now: float) -> None:
        """Take in the units added since, then move the horizon as far as the limits say."""
        self._scan()
        limits = self.limits
        units = self.units
        old = None if limits.seconds is None else now - limits.seconds
        times = self.history.times
        history_units = self.history.units
        while self.start < len(units):
            mask = 0
            if limits.messages is not None and self._total(self.counts, self.fixed_counts) > (
                limits.messages
            ):
                mask |= COUNT
            if limits.size is not None and self._total(self.sizes, self.fixed_sizes) > limits.size:
                mask |= SIZE
            if old is not None and times[history_units[units[self.start]].stop - 1] < old:
                mask |= TIME
            if not mask:
                break
            self.why.append(mask)
            self.start += 1

    def _total(self, totals: list[int], fixed: list[int]) -> int:
        """What the view would hold with the horizon where it is: every pinned unit, and
        the unpinned units from the horizon on."""
        end, start = len(self.units), self.start
        moving = self._moving_pins()
        pinned = fixed[end] + sum(totals[p + 1] - totals[p] for p in moving)
        inside = totals[end] - totals[start] - (fixed[end] - fixed[start])
        inside -= sum(totals[p + 1] - totals[p] for p in moving if p >= start)
        return pinned + inside

    def _moving_pins(self) -> set[int]:
        """Positions of the pins that move, less those pinned for good."""
        units = self.units
        positions = {len(units) - 1}
        if self.newest_user is not None:
            positions.add(self.newest_user)
        return {p for p in positions if units[p] not in self.always}

    def _scan(self) -> None:
        history = self.history
        history_units = history.units
        sizing = self.limits.size is not None
        for index in range(self.scanned, len(history_units)):
            unit = history_units[index]
            if unit.status == "pending":
                break
            self.scanned = index + 1
            if unit.status == "broken":
                continue
            count = len(unit)
            size = sum(history.size(i) for i in range(unit.start, unit.stop)) if sizing else 0
            fixed = always_pinned(history, unit)
            if fixed:
                self.always.add(index)
            if has_user_turn(history, unit):
                self.newest_user = len(self.units)
            self.units.append(index)
            self.counts.append(self.counts[-1] + count)
            self.fixed_counts.append(self.fixed_counts[-1] + (count if fixed else 0))
            self.sizes.append(self.sizes[-1] + size)
            self.fixed_sizes.append(self.fixed_sizes[-1] + (size if fixed else 0))
