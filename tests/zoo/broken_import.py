"""A member that cannot load: importing this module raises ImportError (exit 2 expected).

- Manager: a GoodManager that is never reached, because the import above it fails.
"""

from __future__ import annotations

import does_not_exist_ctxkit_zoo  # noqa: F401  (the fault: this module does not exist)

from tests.zoo.base import GoodManager


class Manager(GoodManager):
    """Fault (load): the module holding it raises ImportError, so a checker cannot load the
    target and must say so (exit status 2) rather than report properties."""
