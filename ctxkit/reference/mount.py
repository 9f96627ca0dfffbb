"""Amplifier module entry point: ``mount(coordinator, config)``."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from typing import Any

from ctxkit.reference.manager import ReferenceContextManager

__all__ = ["mount"]

ctxkit_shapes = "all"
"""The reference manager takes every message shape: ``ctxkit conformance`` judges it in all
of them (:mod:`ctxkit.shapes.spoken`)."""


async def mount(coordinator: Any, config: Mapping[str, Any] | None = None) -> None:
    """Build a :class:`ReferenceContextManager` from ``config`` and mount it as ``context``.

    Events go to ``coordinator.hooks`` (``await hooks.emit(name, data)``) when it has one. A
    manager with a history (``storage_path``, ``store``) is opened in a worker thread, so the
    coordinator's loop does not wait for the reading.
    Unknown config keys raise :class:`~ctxkit.reference.manager.ConfigError`, so a typo in a
    mount plan is caught at start rather than silently ignored.
    """
    hooks = getattr(coordinator, "hooks", None)
    if config and (config.get("store") or config.get("storage_path")):  # reads its history
        manager = await asyncio.to_thread(ReferenceContextManager.from_config, config, hooks=hooks)
    else:
        manager = ReferenceContextManager.from_config(config, hooks=hooks)
    result = coordinator.mount("context", manager)
    if inspect.isawaitable(result):
        await result
