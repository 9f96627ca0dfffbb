"""The coordinator a mounted target sees: Amplifier's own when amplifier-core is installed, a
stand-in that behaves like it otherwise.

A ``mount(coordinator, config)`` target gets the coordinator of :func:`make_coordinator`:

* ``amplifier``: amplifier-core's real ``ModuleCoordinator`` (its Rust kernel) with its real
  ``HookRegistry``: handlers the module registers run on ``emit`` exactly as in Amplifier.
  Used when ``amplifier_core`` imports (``pip install 'ctxkit-llm[amplifier]'``).
* ``stand-in``: :class:`StandInCoordinator`, stdlib only, offering what the contract's
  coordinator offers: ``mount``/``get``/``unmount``, ``hooks`` (``emit``, ``emit_and_collect``,
  ``register``/``on`` returning an unregister callable, ``unregister``, ``list_handlers``),
  ``register_contributor``/``collect_contributions``, ``register_capability``/
  ``get_capability``, ``register_cleanup``/``cleanup``, ``config``, ``session_id``,
  ``parent_id``. Its hooks call handlers lowest priority first (ties in registration order),
  hand each a copy of the data, skip a handler that raises, stop at a ``deny``.

``CTXKIT_COORDINATOR=amplifier|stand-in`` forces one (``auto``, the default, picks as above).

Either way ``coordinator.hooks`` (and ``coordinator.get("hooks")``) is a :class:`RecordingHooks`:
a thin proxy over the registry that appends ``(event, data)`` to the run's recorder for every
``emit``, whatever the name (custom ones such as ``context:budget`` too; the real registry has
no wildcard to listen with), before the registry calls its handlers, so events a handler emits
in turn come after the one that called it. amplifier-core's ``HookRegistry`` cannot be
subclassed, so the proxy sits on a ``ModuleCoordinator`` subclass whose ``hooks`` property
returns it; ``mount_points["hooks"]`` still holds the real registry.
"""

from __future__ import annotations

import atexit
import copy
import functools
import gc
import inspect
import json
import logging
import os
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ctxkit.extras import install_line

__all__ = [
    "ENV",
    "CoordinatorUnavailable",
    "RecordingHooks",
    "StandInCoordinator",
    "StandInHookResult",
    "StandInHooks",
    "coordinator_kind",
    "make_coordinator",
]

ENV = "CTXKIT_COORDINATOR"
SESSION_ID = "ctxkit-conformance"
Kind = Literal["amplifier", "stand-in"]

logger = logging.getLogger(__name__)


class CoordinatorUnavailable(Exception):
    """The coordinator asked for cannot be had. The message says how to fix it."""


class Recorder(Protocol):
    """Where the events go: :class:`ctxkit.conformance.targets.load.EventRecorder`."""

    async def emit(self, name: str, data: Any = None) -> None: ...


def coordinator_kind(choice: str | None = None) -> Kind:
    """Which coordinator mounts get: ``choice``, else ``$CTXKIT_COORDINATOR``, else ``auto``
    (``amplifier`` when amplifier-core imports, ``stand-in`` otherwise).

    Raises :class:`CoordinatorUnavailable` for an unknown choice, or for ``amplifier`` when
    amplifier-core does not import.
    """
    choice = (choice or os.environ.get(ENV) or "auto").strip().lower()
    if choice in ("stand-in", "standin", "stand_in"):
        return "stand-in"
    if choice not in ("auto", "amplifier"):
        raise CoordinatorUnavailable(
            f"{ENV}={choice!r} is not a coordinator; use amplifier, stand-in or auto"
        )
    try:
        _amplifier_coordinator_class()
    except ImportError as exc:
        if choice == "auto":
            return "stand-in"
        raise CoordinatorUnavailable(
            f"{ENV}=amplifier but amplifier-core does not import ({exc}); "
            f"{install_line('amplifier')}, or unset it to use the stand-in"
        ) from exc
    except Exception as exc:  # installed but broken: say so rather than quietly stand in
        raise CoordinatorUnavailable(
            f"importing amplifier-core raised {type(exc).__name__}: {exc}; repair the install, "
            f"or set {ENV}=stand-in to use the stand-in"
        ) from exc
    return "amplifier"


def make_coordinator(recorder: Recorder, *, kind: Kind | None = None) -> Any:
    """A fresh coordinator whose hooks record every emit into ``recorder``; ``kind`` defaults
    to :func:`coordinator_kind`'s choice."""
    kind = kind or coordinator_kind()
    session = types.SimpleNamespace(session_id=SESSION_ID, parent_id=None, config={})
    if kind == "amplifier":
        _settle_at_exit()
        return _amplifier_coordinator_class()(session, recorder)
    return StandInCoordinator(recorder, session)


class RecordingHooks:
    """``coordinator.hooks`` as the target sees it: every ``emit`` is recorded, then passed to
    the registry; everything else is the registry's own."""

    def __init__(self, registry: Any, recorder: Recorder) -> None:
        self._registry = registry
        self._recorder = recorder

    @property
    def registry(self) -> Any:
        """The registry behind the proxy (amplifier-core's, or a :class:`StandInHooks`)."""
        return self._registry

    async def emit(self, event: str, data: Any) -> Any:
        await self._recorder.emit(event, data)
        return await self._registry.emit(event, data)

    async def emit_and_collect(self, event: str, data: Any, *args: Any, **kwargs: Any) -> Any:
        await self._recorder.emit(event, data)
        return await self._registry.emit_and_collect(event, data, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._registry, name)

    def __repr__(self) -> str:
        return f"RecordingHooks({self._registry!r})"


# -- amplifier-core's coordinator ----------------------------------------------------------------


@functools.cache
def _amplifier_coordinator_class() -> type:
    """A ``ModuleCoordinator`` whose ``hooks`` record. Imports amplifier-core (about 0.3 s)."""
    from amplifier_core import ModuleCoordinator

    own_hooks = ModuleCoordinator.hooks

    class RecordingCoordinator(ModuleCoordinator):  # type: ignore[misc, valid-type]
        """amplifier-core's coordinator, its ``hooks`` seen through :class:`RecordingHooks`."""

        def __new__(cls, session: Any, recorder: Recorder) -> RecordingCoordinator:
            return super().__new__(cls, session)  # the Rust kernel takes the session here

        def __init__(self, session: Any, recorder: Recorder) -> None:
            self._recording_hooks = RecordingHooks(own_hooks.__get__(self), recorder)

        @property
        def hooks(self) -> RecordingHooks:
            return self._recording_hooks

        def get(self, mount_point: str, name: str | None = None) -> Any:
            if mount_point == "hooks":
                return self._recording_hooks
            return super().get(mount_point, name)

    return RecordingCoordinator


@functools.cache
def _settle_at_exit() -> None:
    """Let amplifier-core's threads let go before the interpreter shuts down.

    A process that ran async hook handlers through the Rust registry and then exits may abort
    in finalization (``Fatal Python error: PyGILState_Release``, exit status 134 or 139; about
    one run in five of a short script), apparently because the kernel's threads still let go
    of Python objects as the interpreter goes. Collecting what is left and pausing 50 ms at
    exit, while everything is still alive, stopped it in every run tried (0 of 300). One hook
    per process serves the worker, reproducer scripts and anything else that builds targets.
    """
    atexit.register(_settle)


def _settle() -> None:
    gc.collect()
    time.sleep(0.05)


# -- the stand-in ----------------------------------------------------------------------------------


MOUNT_POINTS = ("orchestrator", "providers", "tools", "context", "module-source-resolver")
NAMED_MOUNT_POINTS = ("providers", "tools")


@dataclass
class StandInHookResult:
    """What the stand-in's ``emit`` returns, shaped like amplifier-core's ``HookResult``."""

    action: str = "continue"
    data: Any = None
    reason: str | None = None


@dataclass(order=True)
class _Handler:
    priority: int
    order: int
    name: str = field(compare=False)
    function: Callable[..., Any] = field(compare=False)


class StandInHooks:
    """A hook registry like amplifier-core's, in Python: handlers run lowest priority first,
    ties in registration order; each gets a JSON copy of the data; one that raises is logged
    and skipped; ``deny`` stops the chain, ``modify`` with data passes that data on."""

    SESSION_START = "session:start"
    SESSION_END = "session:end"
    PROMPT_SUBMIT = "prompt:submit"
    TOOL_PRE = "tool:pre"
    TOOL_POST = "tool:post"
    CONTEXT_PRE_COMPACT = "context:pre_compact"
    ORCHESTRATOR_COMPLETE = "orchestrator:complete"
    USER_NOTIFICATION = "user:notification"

    def __init__(self) -> None:
        self._handlers: dict[str, list[_Handler]] = {}
        self._registered = 0

    def register(
        self, event: str, handler: Callable[..., Any], priority: int = 0, name: str | None = None
    ) -> Callable[[], None]:
        """Call ``handler(event, data)`` (sync or async) on each ``emit(event, ...)``; returns
        a function that unregisters it."""
        self._registered += 1
        name = name or f"_auto_{event}_{self._registered}"
        entry = _Handler(priority, self._registered, name, handler)
        self._handlers.setdefault(event, []).append(entry)
        self._handlers[event].sort()

        def unregister() -> None:
            if entry in self._handlers.get(event, ()):
                self._handlers[event].remove(entry)

        return unregister

    on = register

    def unregister(self, name: str) -> None:
        """Remove every handler registered under ``name``."""
        for event, entries in self._handlers.items():
            self._handlers[event] = [e for e in entries if e.name != name]

    def list_handlers(self, event: str | None = None) -> dict[str, list[str]]:
        events = [event] if event is not None else list(self._handlers)
        return {e: [h.name for h in self._handlers.get(e, ())] for e in events}

    async def emit(self, event: str, data: Any) -> StandInHookResult:
        current = data
        for entry in list(self._handlers.get(event, ())):
            result = await self._call(entry, event, current)
            if result.action == "deny":
                return result
            if result.action == "modify" and result.data is not None:
                current = result.data
        return StandInHookResult(data=current)

    async def emit_and_collect(
        self,
        event: str,
        data: Any,
        timeout: float | None = None,  # noqa: ASYNC109 (accepted, not enforced)
    ) -> list[Any]:
        """The ``data`` of each handler's non-empty result, in handler order."""
        results = [await self._call(e, event, data) for e in list(self._handlers.get(event, ()))]
        return [r.data for r in results if r.data is not None]

    async def _call(self, entry: _Handler, event: str, data: Any) -> StandInHookResult:
        try:
            returned = entry.function(event, _copy(data))
            if inspect.isawaitable(returned):
                returned = await returned
        except Exception as exc:
            logger.error("Hook handler error for event %r (handler %r): %s", event, entry.name, exc)
            return StandInHookResult()
        return _result(returned)


def _copy(data: Any) -> Any:
    """What a handler gets: the data after a JSON trip, as across amplifier-core's boundary."""
    try:
        return json.loads(json.dumps(data, default=repr))
    except (TypeError, ValueError):
        return copy.deepcopy(data)


def _result(returned: Any) -> StandInHookResult:
    """A handler's return as amplifier-core reads it: None or a dict (parsed as a HookResult,
    unknown keys ignored) or a HookResult; anything else fails closed, as a deny."""
    if returned is None:
        return StandInHookResult()
    if isinstance(returned, dict):
        action = returned.get("action", "continue")
        data, reason = returned.get("data"), returned.get("reason")
    else:
        action = getattr(returned, "action", None)
        data, reason = getattr(returned, "data", None), getattr(returned, "reason", None)
    if not isinstance(action, str):
        logger.error("Hook handler returned unparseable result: failing closed (deny)")
        return StandInHookResult("deny", reason="Hook handler returned invalid response")
    return StandInHookResult(action, data, reason)


class StandInCoordinator:
    """amplifier-core's ``ModuleCoordinator`` as far as a module's ``mount`` uses it."""

    def __init__(self, recorder: Recorder, session: Any = None) -> None:
        self.session = session
        self.hooks = RecordingHooks(StandInHooks(), recorder)
        self.mount_points: dict[str, Any] = {
            point: {} if point in NAMED_MOUNT_POINTS else None for point in MOUNT_POINTS
        }
        self.mount_points["hooks"] = self.hooks.registry
        self.session_state: dict[str, Any] = {}
        self._capabilities: dict[str, Any] = {}
        self._contributors: dict[str, list[tuple[str, Callable[..., Any]]]] = {}
        self._cleanups: list[Callable[..., Any]] = []

    @property
    def session_id(self) -> str:
        return getattr(self.session, "session_id", "")

    @property
    def parent_id(self) -> str | None:
        return getattr(self.session, "parent_id", None)

    @property
    def config(self) -> dict[str, Any]:
        return getattr(self.session, "config", None) or {}

    async def mount(self, mount_point: str, module: Any, name: str | None = None) -> None:
        if mount_point == "hooks":
            raise ValueError("Hooks should be registered directly with the HookRegistry")
        if self._point(mount_point) in NAMED_MOUNT_POINTS:
            if name is None:
                raise ValueError(f"Name required for {mount_point}")
            self.mount_points[mount_point][name] = module
        else:
            self.mount_points[mount_point] = module

    def get(self, mount_point: str, name: str | None = None) -> Any:
        if mount_point == "hooks":
            return self.hooks
        if self._point(mount_point) in NAMED_MOUNT_POINTS:
            found = self.mount_points[mount_point]
            return found if name is None else found.get(name)
        return self.mount_points[mount_point]

    async def unmount(self, mount_point: str, name: str | None = None) -> None:
        if self._point(mount_point) in NAMED_MOUNT_POINTS:
            if name is None:
                raise ValueError(f"Name required to unmount from {mount_point}")
            self.mount_points[mount_point].pop(name, None)
        else:
            self.mount_points[mount_point] = None

    def _point(self, mount_point: str) -> str:
        if mount_point not in self.mount_points:
            raise ValueError(f"Unknown mount point: {mount_point}")
        return mount_point

    def register_capability(self, name: str, value: Any) -> None:
        self._capabilities[name] = value

    def get_capability(self, name: str) -> Any:
        return self._capabilities.get(name)

    def register_contributor(self, channel: str, name: str, callback: Callable[..., Any]) -> None:
        self._contributors.setdefault(channel, []).append((name, callback))

    @property
    def channels(self) -> dict[str, list[dict[str, Any]]]:
        return {
            channel: [{"name": name, "callback": callback} for name, callback in entries]
            for channel, entries in self._contributors.items()
        }

    async def collect_contributions(self, channel: str) -> list[Any]:
        """The contributors' non-None returns; one that raises is logged and skipped."""
        found = []
        for name, callback in self._contributors.get(channel, ()):
            try:
                value = callback()
                if inspect.isawaitable(value):
                    value = await value
            except Exception as exc:
                logger.warning("Contributor %r on channel %r failed: %s", name, channel, exc)
                continue
            if value is not None:
                found.append(value)
        return found

    def register_cleanup(self, cleanup: Callable[..., Any]) -> None:
        self._cleanups.append(cleanup)

    async def cleanup(self) -> None:
        """Run the cleanups, newest first; one that raises is logged and the rest still run."""
        for function in reversed(self._cleanups):
            try:
                result = function()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                logger.error("Error during cleanup: %s", exc)
