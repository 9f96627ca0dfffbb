"""Reaching PostgreSQL: the connection string, one pool per database per process, and the one
event loop every database call of the process runs on.

Every call is psycopg's async connection on a loop of ctxkit's own, in a thread of its own
(``ctxkit-postgres``): a manager serves any event loop (and none), one process multiplexes all
its conversations over one loop and one pool, and the caller's loop never waits on the network
(the manager hands a change to a worker thread, which waits here). A forked child starts
without them (the parent's connections are never touched from the child).
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from ctxkit.extras import MissingExtra
from ctxkit.reference.journal import HistoryFileError

__all__ = [
    "CALL_TIMEOUT",
    "StoreTimeout",
    "StoreUnavailable",
    "application_name",
    "call",
    "check_url",
    "connect",
    "display_url",
    "is_database_url",
    "pool",
    "run",
]

T = TypeVar("T")

SCHEMES = ("postgresql://", "postgres://")
CALL_TIMEOUT = 60.0
"""Seconds a database call may take before the caller is told the server does not answer."""
CANCEL_GRACE = 10.0
"""Seconds a timed-out call is given to be cancelled on the server before it is left."""
CONNECT_TIMEOUT = 10
"""Seconds to wait for a connection before saying the server cannot be reached."""


class StoreUnavailable(HistoryFileError):
    """The database cannot be reached or dropped the connection: the change was not made (or
    its answer was lost); the next call connects again."""


class StoreTimeout(StoreUnavailable):
    """A call got no answer in time (:data:`CALL_TIMEOUT`): whether it was done is not known."""


def is_database_url(value: object) -> bool:
    """``value`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return isinstance(value, str) and value.startswith(SCHEMES)


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401 - the extra brings both
    except ModuleNotFoundError as exc:
        raise MissingExtra("a PostgreSQL store", "postgres", f"no module {exc.name}") from None
    return psycopg


def check_url(url: str) -> dict[str, Any]:
    """The connection string's parts; ``ValueError`` in one sentence when it cannot be one."""
    if not is_database_url(url):
        raise ValueError(
            "a database is named by a postgresql:// URL (postgresql://USER@HOST:PORT/DATABASE), "
            f"got {url!r}"
        )
    psycopg = _psycopg()
    try:
        return psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        reason = str(exc).strip().splitlines()[0]
        raise ValueError(
            f"{display_url(url)!r} is not a valid PostgreSQL connection string: {reason}"
        ) from None


def display_url(url: str) -> str:
    """``url`` without its password, for messages and listings."""
    scheme, _, rest = url.partition("://")
    if "@" in rest.split("/", 1)[0]:
        who, _, where = rest.partition("@")
        user = who.split(":", 1)[0]
        return f"{scheme}://{user}@{where}"
    return url


def application_name() -> str:
    """What this process's connections call themselves, so a lock's holder can be named."""
    return f"ctxkit pid {os.getpid()} on {socket.gethostname()}"[:63]


class _Runner:
    """An event loop in a daemon thread: where every database call of the process runs."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="ctxkit-postgres", daemon=True
        )
        self.thread.start()
        self.pools: dict[str, Any] = {}
        self.opening: asyncio.Lock | None = None
        """Held while a pool opens (made on the loop, the first time)."""


_runner: _Runner | None = None
_runner_lock = threading.Lock()
_abandoned: list[_Runner] = []
"""A forked child's copy of the parent's runner: kept, never closed (its connections are the
parent's; closing them would end the parent's sessions)."""


def _after_fork() -> None:
    global _runner
    if _runner is not None:
        _abandoned.append(_runner)
    _runner = None


os.register_at_fork(after_in_child=_after_fork)


def _the_runner() -> _Runner:
    global _runner
    with _runner_lock:
        if _runner is None:
            _runner = _Runner()
        return _runner


def call(coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coroutine`` on the database loop and wait for it (from any thread but that one's).
    A call that does not finish in ``timeout`` seconds (:data:`CALL_TIMEOUT` unless given) is
    cancelled and raises :class:`StoreTimeout`."""
    timeout = CALL_TIMEOUT if timeout is None else timeout
    runner = _the_runner()
    if threading.current_thread() is runner.thread:
        coroutine.close()
        raise RuntimeError("a database call waited for from the database loop itself")
    # Timed out on the loop itself: wait_for returns only once the call is cancelled, and
    # psycopg cancels a running statement on the server then, so a change that timed out
    # was not made (unless the server is gone too: then nobody can tell).
    future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coroutine, timeout), runner.loop)
    try:
        return future.result(timeout + CANCEL_GRACE)
    except TimeoutError:
        future.cancel()
        raise StoreTimeout(f"the database did not answer within {timeout:g} s") from None


async def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Await ``coroutine`` on the database loop from any event loop."""
    runner = _the_runner()
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, runner.loop))


def unreachable(url: str, exc: BaseException) -> StoreUnavailable:
    """The error for a server that cannot be reached or dropped the connection, in one
    sentence."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return StoreUnavailable(f"{display_url(url)}: the database cannot be reached ({reason})")


async def connect(url: str, *, fsync: str = "always") -> Any:
    """A connection of its own (a writer's, which holds its conversation's lock for its life),
    in autocommit: every statement is its own committed transaction. ``fsync="never"``
    commits without waiting for the server's disk (``synchronous_commit off``)."""
    psycopg = _psycopg()
    try:
        connection = await psycopg.AsyncConnection.connect(
            url,
            autocommit=True,
            application_name=application_name(),
            connect_timeout=CONNECT_TIMEOUT,
        )
        if fsync == "never":
            await connection.execute("SET synchronous_commit TO off")
    except psycopg.OperationalError as exc:
        raise unreachable(url, exc) from None
    return connection


async def pool(url: str) -> Any:
    """The process's pool for ``url`` (opened on first use), for short calls: reading,
    listing, memory."""
    runner = _the_runner()
    found = runner.pools.get(url)
    if found is not None:
        return found
    if runner.opening is None:
        runner.opening = asyncio.Lock()
    async with runner.opening:  # one pool per database, however many ask at once
        found = runner.pools.get(url)
        return found if found is not None else await _open_pool(runner, url)


async def _open_pool(runner: _Runner, url: str) -> Any:
    # One connection first: a server that is not there is said at once, with its reason,
    # rather than after the pool's retries.
    await (await connect(url)).close()
    from psycopg_pool import AsyncConnectionPool

    opened = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=8,
        open=False,
        timeout=CONNECT_TIMEOUT,
        kwargs={"autocommit": True, "application_name": application_name()},
        check=AsyncConnectionPool.check_connection,
    )
    runner.pools[url] = opened
    try:
        await opened.open(wait=True, timeout=CONNECT_TIMEOUT)
    except Exception as exc:
        del runner.pools[url]
        await opened.close()
        raise unreachable(url, exc) from None
    return opened
