"""The reference manager's PostgreSQL store (the ``postgres`` extra: psycopg and psycopg-pool).

``ReferenceContextManager(store="postgresql://USER@HOST:PORT/DATABASE", conversation="abc")``
keeps the conversation in the database instead of a history file: the same records, one row
each (:mod:`ctxkit.reference.postgres.history`), over connections of one pool and one event
loop per process (:mod:`ctxkit.reference.postgres.connection`).
"""

from ctxkit.reference.postgres.connection import StoreUnavailable, is_database_url

__all__ = ["StoreUnavailable", "is_database_url"]
