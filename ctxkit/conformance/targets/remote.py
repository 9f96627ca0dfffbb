"""A context manager held by another process, called through the conformance protocol.

Reproducers for targets that are not Python objects (a JavaScript module, a ``--command``)
open the target as the run did and call it with the contract's method names; each call is one
protocol request. What the target raised comes back as :class:`RemoteError`; a hang, a crash
or a broken channel as
:class:`~ctxkit.conformance.targets.worker_client.TargetUnusable`, as in a run.
"""

from __future__ import annotations

import atexit
from collections.abc import Mapping, Sequence
from typing import Any

from ctxkit.conformance.judge.invariants import ANNOTATION_KEYS
from ctxkit.conformance.targets.routes import Route
from ctxkit.conformance.targets.worker_client import Child, Reply

__all__ = ["RemoteError", "RemoteManager"]

CALL_TIMEOUT_S = 60.0
"""Seconds a call may take unless the script says otherwise (``returns_within``)."""


class RemoteError(Exception):
    """The target raised (or rejected the call); ``type`` is the name of what it raised."""

    def __init__(self, type_: str, message: str) -> None:
        super().__init__(f"{type_}: {message}" if message else type_)
        self.type = type_


class RemoteManager:
    """The contract's methods, each a protocol request. ``edit_after=True`` makes the target's
    process edit what crossed the call once it returns, as a careless caller would (see
    PROTOCOL.md): a caller's edits must happen where the objects are.

    ``events`` gets every event the target emits, as ``(name, data)``.
    """

    def __init__(self, child: Child) -> None:
        self._child = child
        self.events: list[tuple[str, Any]] = []

    @classmethod
    def start(
        cls, route: Route, config: Mapping[str, Any] | None = None, *, form: str | None = None
    ) -> RemoteManager:
        """Start the route's program, load the target (in ``form``, if given) and build a
        manager."""
        child = Child(route.command, timeout=CALL_TIMEOUT_S)
        atexit.register(child.close)
        manager = cls(child)
        hello = child.hello(route.target, dict(config or {}), ANNOTATION_KEYS, form=form)
        manager._answer(hello)
        manager._call("reset")
        return manager

    def _answer(self, reply: Reply) -> Any:
        self.events.extend((name, data) for name, data in reply.events)
        if not reply.ok:
            raise RemoteError(reply.type, reply.message)
        return reply.value

    def _call(self, op: str, **args: Any) -> Any:
        return self._answer(self._child.call(op, **args))

    async def add_message(self, message: Any, *, edit_after: bool = False) -> None:
        self._call("add", message=message, edit_after=edit_after)

    async def add_concurrently(self, messages: Sequence[Any]) -> None:
        """``add_message`` for every message at once, in the target's own process."""
        self._call("add_many", messages=list(messages))

    async def get_messages_for_request(
        self,
        token_budget: int | None = None,
        provider: Any = None,
        *,
        edit_after: bool = False,
    ) -> Any:
        defaults = None if provider is None else dict(provider.get_info().defaults)
        return self._call(
            "view", token_budget=token_budget, provider=defaults, edit_after=edit_after
        )

    async def get_messages(self, *, edit_after: bool = False) -> Any:
        return self._call("get", edit_after=edit_after)

    async def set_messages(self, messages: Sequence[Any], *, edit_after: bool = False) -> None:
        self._call("set", messages=list(messages), edit_after=edit_after)

    async def clear(self) -> None:
        self._call("clear")

    def close(self) -> None:
        """End the target's process (it ends with this one anyway)."""
        self._child.close()
