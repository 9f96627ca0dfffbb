"""The reference manager's PostgreSQL store (the ``postgres`` extra: psycopg and psycopg-pool).

``ReferenceContextManager(store="postgresql://USER@HOST:PORT/DATABASE", conversation="abc")``
keeps the conversation in the database instead of a history file: the same records, one row
each (:mod:`ctxkit.reference.postgres.history`), over connections of one pool and one event
loop per process (:mod:`ctxkit.reference.postgres.connection`). :class:`DatabaseMemory` is the
semantic memory there (:mod:`ctxkit.reference.postgres.memory`); listing, archiving and
copying conversations are in :mod:`ctxkit.reference.postgres.lifecycle`.
"""

from typing import Any

from ctxkit.reference.postgres.connection import StoreTimeout, StoreUnavailable, is_database_url

__all__ = ["DatabaseMemory", "StoreTimeout", "StoreUnavailable", "is_database_url"]


def __getattr__(name: str) -> Any:
    """``DatabaseMemory`` on first use: naming a database (``ctxkit contexts list URL``)
    need not load the memory's modules."""
    if name == "DatabaseMemory":
        from ctxkit.reference.postgres.memory import DatabaseMemory

        return DatabaseMemory
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
