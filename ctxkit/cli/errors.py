"""Exit codes and the error a command raises for a user's mistake.

Imports nothing of ctxkit: every command module may import it, and it imports none of them.
"""

from __future__ import annotations

__all__ = [
    "EXIT_FOUND_PROBLEM",
    "EXIT_INCONCLUSIVE",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
]

EXIT_OK = 0
EXIT_FOUND_PROBLEM = 1
"""The job ran and found a problem (a required property failed, the budget cannot hold the
pinned content, a conversation could not be archived because a process has it open)."""
EXIT_INCONCLUSIVE = 4
"""The job ran and found nothing wrong, but what it checked was never exercised (a
conformance run in which the manager never compacted): not a pass."""
EXIT_USAGE = 2
"""The user's mistake: a bad option, an unreadable file, a target that cannot be loaded."""
EXIT_INTERNAL = 3
"""ctxkit's own bug, and nothing else."""
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""
