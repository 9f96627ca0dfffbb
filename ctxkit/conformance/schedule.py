"""How a run spends its time: what runs beside the searches.

The profile (``quick``, ``default``, ``thorough``) says how many examples each search runs;
the searches themselves are the same in every schedule, so the schedule never changes what a
run finds.

``overlap`` (the default): the second core works while the first searches. The prompt-cache
loop runs on a worker of its own beside the searches, and each reproducer is verified while
the next failure is minimized. Those are other instances of the target running at the same
time: a target that is one server for every worker, or a ``--command`` program, runs one
worker at a time (:attr:`ctxkit.conformance.targets.routes.Route.shared`), and a target whose
instances share a file or a database should be run with ``serial``.

``serial``: everything one after another on one worker, as before ``overlap``; kept for such
targets and to compare against (``benchmarks/conformance_suite.py`` runs both).

Two ways to search less were measured and left out of the default, because each missed a
fault the default finds (a manager that splits a pair only past 40 messages): sharing one
budget of examples between the searches (later searches shorter), and taking only a search's
first failure (Hypothesis's exploration after a failure, and its shrinking of long examples,
is what reaches that fault). Hypothesis grows its examples from the ones before, so shorter
searches reach shorter histories; that is also why ``--jobs`` (:mod:`.shards`) is opt-in.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT", "SCHEDULES", "Schedule"]


@dataclass(frozen=True)
class Schedule:
    name: str
    beside: bool
    """The cache loop and the verifications run beside the searches and minimizing."""


SCHEDULES = {
    "overlap": Schedule("overlap", beside=True),
    "serial": Schedule("serial", beside=False),
}
DEFAULT = "overlap"
