"""The reference manager in its persistent configuration, on a throwaway history file.

For checking the persistent configuration with the conformance suite, which builds a fresh
manager for every run::

    ctxkit conformance ctxkit.reference:scratch_manager

Each manager gets a new file in one temporary directory per process; the file is removed when
the manager is closed or collected, and the directory when the process exits.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import uuid
import weakref
from pathlib import Path
from typing import Any

from ctxkit.reference.manager import ReferenceContextManager

__all__ = ["scratch_manager"]

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
