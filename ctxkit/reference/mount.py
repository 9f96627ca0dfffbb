"""Amplifier module entry point: ``mount(coordinator, config)``."""

from __future__ import annotations

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

    Events go to ``coordinator.hooks`` (``await hooks.emit(name, data)``) when it has one.
    Unknown config keys raise :class:`~ctxkit.reference.manager.ConfigError`, so a typo in a
    mount plan is caught at start rather than silently ignored.
    """
    manager = ReferenceContextManager.from_config(config, hooks=getattr(coordinator, "hooks", None))
    result = coordinator.mount("context", manager)
    if inspect.isawaitable(result):
        await result
