"""How a run spends its time: how it searches, and what runs beside the search.

The profile (``quick``, ``default``, ``thorough``) says how many examples a search runs.

``single`` (the default): one search. A failure is noted (the smallest of each property
kept) and the search goes on: the step's other checks still run, the example goes on (on a
fresh manager where the failure left the history unlike the model), and every example of the
profile is run with every property checked. Then ctxkit's minimizer makes each failure small
(its steps, the lists inside them, its calls, its budgets) and its reproducer is checked in a
fresh process. Nothing depends on the clock but the deadline: the same seed gives the same
answer. The cache loop and the verifications run beside, as in ``overlap``.

``overlap``: the schedule before ``single``. The first failure ends Hypothesis's search;
Hypothesis explores a little further and shrinks what it found (``--shrink-seconds``), and a
new search of the profile's examples looks for the properties still open, until one finds
nothing. A failing target costs two or three searches and the shrinking; a property found only
while Hypothesis shrinks depends on how far it got in its time. The prompt-cache loop runs on
a worker of its own beside the searches, and each reproducer is verified while the next
failure is minimized. Those are other instances of the target running at the same time: a
target that is one server for every worker, or a ``--command`` program, runs one worker at a
time (:attr:`ctxkit.conformance.targets.routes.Route.shared`), and a target whose instances
share a file or a database should be run with ``serial``.

``serial``: ``overlap``'s searches with everything one after another on one worker; kept for
such targets and to compare against (``benchmarks/conformance_suite.py`` runs it beside the
default).

Measured and left out: sharing one budget of examples between ``overlap``'s searches (later
searches shorter), and ``overlap`` taking only a search's first failure; each missed a fault
the others find (a manager that splits a pair only past 40 messages), because its property
was not checked long enough. ``single`` checks every property through every example instead.
Hypothesis grows its examples from the ones before, so shorter searches reach shorter
histories; that is also why ``--jobs`` (:mod:`.shards`) is opt-in. Also measured and left
out: running the cache loop after a quick search on the search's own worker, which saves
starting a second worker: on six targets (the zoo and the reference manager, 2026-11-28) the
runs took 34% longer for 5% less CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT", "DEFAULT_MAX_TOKENS", "SCHEDULES", "Schedule"]

DEFAULT_MAX_TOKENS = 256_000
"""Tokens a history is grown to, by default, when no view of the searches was compacted,
looking for the size where the target compacts: past the context windows of today's models
(128k, 200k), where managers that follow a model's window compact (``--max-tokens``)."""


@dataclass(frozen=True)
class Schedule:
    name: str
    beside: bool
    """The cache loop and the verifications run beside the searches and minimizing."""
    goes_on: bool
    """One search notes each failure and goes on to its last example; ctxkit's minimizer
    makes each small (:attr:`ctxkit.conformance.search.machine.Session.goes_on`)."""


SCHEDULES = {
    "single": Schedule("single", beside=True, goes_on=True),
    "overlap": Schedule("overlap", beside=True, goes_on=False),
    "serial": Schedule("serial", beside=False, goes_on=False),
}
DEFAULT = "single"
