"""A correct manager whose import takes a while: ``CTXKIT_TEST_IMPORT_S`` seconds (0 when
unset), as a module that loads a model or a large library at import time does.

Not a member of ``ZOO``: tests/test_conformance_hostile.py checks that loading counts
against ``--deadline`` and ``--load-timeout``, and that a report is written either way.
"""

from __future__ import annotations

import os
import time

from tests.zoo.base import GoodManager

IMPORT_SECONDS_VARIABLE = "CTXKIT_TEST_IMPORT_S"

time.sleep(float(os.environ.get(IMPORT_SECONDS_VARIABLE) or 0))


class SlowToImport(GoodManager):
    """Correct; only its module's import is slow."""
