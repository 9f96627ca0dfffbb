"""How a run spends its time: what each search is given, and what runs beside the searches.

The profile (``quick``, ``default``, ``thorough``) says how many examples a property is
checked in; the schedule says how a run gets there.

``budget`` (the default) spends the profile's examples once. The first search checks every
property; the examples it ran to their end before its first failure checked every property
all the way, so a later search, for the properties the first did not fail, runs only what is
left of the profile's examples, but never less than a quarter of them: fresh examples whose
histories no earlier failure cut short. A search reports one finding, its first failure, and
the next search looks for the rest: what Hypothesis runs after a first failure (more examples,
then shrinking) depends on how long it takes, and the same seed must give the same verdicts
and the same searches on a busy machine as on a quiet one; for the same reason only examples
before a search's first failure count against the budget. Hypothesis shrinks a failure for a
few seconds only, since ctxkit's own minimizer then removes every step and call a failure
does not need. The second core works too: a long search is split with a second process
(``--jobs``, :mod:`ctxkit.conformance.shards`), the prompt-cache loop runs on a worker of its
own beside the searches, and each reproducer is verified while the next failure is minimized.
Those are other instances of the target running at the same time: a target whose instances
share a file or a database should be run with ``full``.

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
    first_finding_only: bool
    """A search reports the property of its first failure only; the next search looks for
    the others. What Hypothesis finds after the first failure depends on how long it takes
    (it stops generating 10 s after it and shrinks for a time), so taking more than the first
    could make the same seed give different verdicts on a busy machine."""
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
        first_finding_only=True,
        summary="the profile's examples shared by the searches; the cache loop and the "
        "verifications beside them",
    ),
    "full": Schedule(
        "full",
        shares_budget=False,
        shrink_seconds=20.0,
        beside=False,
        first_finding_only=False,
        summary="every search runs all the profile's examples; one phase after another",
    ),
}
