"""Hypothesis profiles for the project's own tests (``HYPOTHESIS_PROFILE=stress`` digs deeper),
and the process marker fixture."""

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "stress", max_examples=1_000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def marker():
    """A fresh process marker (see tests/processes.py); whatever carries it is killed after
    the test, passed or failed."""
    from tests.processes import kill_marked, new_marker

    value = new_marker()
    yield value
    kill_marked(value)
