"""How a run spends its time: what each search is given, and what runs beside the searches.

The profile (``quick``, ``default``, ``thorough``) says how many examples a property is
checked in; the schedule says how a run gets there.

``budget`` (the default) spends the profile's examples once. The first search checks every
property; the examples it ran to their end before its first failure checked every property
all the way, so a later search, for the properties the first did not fail, runs only what is
left of the profile's examples, but never less than a quarter of them: fresh examples whose
histories no earlier failure cut short. (Only examples before the first failure count: what
Hypothesis runs after it, more examples and then shrinking, depends on how long it takes, and
the same seed must give the same searches.) Hypothesis shrinks a search's failures for a
few seconds only, since ctxkit's own minimizer then removes every step and call a failure
does not need. The prompt-cache loop runs on a worker of its own beside the searches, and
each reproducer is verified while the next failure is minimized: the second core does that
work. The beside worker is a second instance of the target running at the same time: a
target whose instances share a file or a database should be run with ``full``.

``full`` is the schedule before budgets: every search runs all the profile's examples,
Hypothesis shrinks for up to 20 seconds per search, and everything runs one after another.
It searches more for its time; it is kept to compare against
(``benchmarks/conformance_suite.py`` runs both) and for a long search before a release.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SCHEDULES", "Schedule"]


@dataclass(frozen=True)
class Schedule:
    name: str
    shares_budget: bool
    """A later search runs what is left of the profile's examples (at least a quarter)."""
    shrink_seconds: float
    """How long Hypothesis may shrink a search's failures, unless ``--shrink-seconds``."""
    beside: bool
    """The cache loop and the verifications run beside the searches and minimizing."""
    summary: str

    def examples(self, max_examples: int, clean: int, search: int) -> int:
        """Examples for search number ``search`` (1-based), after ``clean`` examples of the
        earlier searches ran to their end without a failure."""
        if search == 1 or not self.shares_budget:
            return max_examples
        return max(max_examples - clean, -(-max_examples // 4))


SCHEDULES = {
    "budget": Schedule(
        "budget",
        shares_budget=True,
        shrink_seconds=5.0,
        beside=True,
        summary="the profile's examples shared by the searches; the cache loop and the "
        "verifications beside them",
    ),
    "full": Schedule(
        "full",
        shares_budget=False,
        shrink_seconds=20.0,
        beside=False,
        summary="every search runs all the profile's examples; one phase after another",
    ),
}
