"""The reference manager in its persistent configurations, on a throwaway history file or a
new conversation in a PostgreSQL database.

For checking the persistent configurations with the conformance suite, which builds a fresh
manager for every run::

    ctxkit conformance ctxkit.reference:scratch_manager
    CTXKIT_STORE=postgresql://USER@HOST/DATABASE ctxkit conformance \
        ctxkit.reference.scratch:scratch_store_manager

Each file manager gets a new file in one temporary directory per process; the file is removed
when the manager is closed or collected, and the directory when the process exits. Each
database manager gets a conversation of its own (``scratch-<random>``), left in the database.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
import weakref
from pathlib import Path
from typing import Any

from ctxkit.reference.manager import ReferenceContextManager

__all__ = ["STORE_VARIABLE", "scratch_manager", "scratch_store_manager"]

STORE_VARIABLE = "CTXKIT_STORE"
"""The database :func:`scratch_store_manager` keeps its conversations in."""

_directory: Path | None = None


ctxkit_shapes = "all"
"""Like the reference manager it builds, it takes every message shape."""


def scratch_manager(hooks: Any = None, **config: Any) -> ReferenceContextManager:
    """A :class:`ReferenceContextManager` with ``storage_path`` on a new throwaway file.

    ``hooks``: where its events go (named, so ``ctxkit conformance`` observes them);
    ``config``: any other manager keyword (``fsync``, ``max_tokens``...).
    """
    global _directory
    if _directory is None:
        _directory = Path(tempfile.mkdtemp(prefix="ctxkit-scratch-"))
        atexit.register(shutil.rmtree, _directory, ignore_errors=True)
    path = _directory / f"{uuid.uuid4().hex}.jsonl"
    manager = ReferenceContextManager(storage_path=path, hooks=hooks, **config)
    weakref.finalize(manager, path.unlink, missing_ok=True)
    return manager


def scratch_store_manager(hooks: Any = None, **config: Any) -> ReferenceContextManager:
    """A :class:`ReferenceContextManager` on a new conversation in the database
    ``$CTXKIT_STORE`` names (``store=``; see :func:`scratch_manager` for the arguments)."""
    from ctxkit.reference.manager import ConfigError

    url = os.environ.get(STORE_VARIABLE)
    if not url:
        raise ConfigError(
            f"scratch_store_manager keeps its conversations in the database ${STORE_VARIABLE} "
            "names: set it to postgresql://USER@HOST:PORT/DATABASE"
        )
    name = f"scratch-{uuid.uuid4().hex}"
    return ReferenceContextManager(store=url, conversation=name, hooks=hooks, **config)
