"""Finding and building the context manager under test from one string.

Forms of TARGET:

* ``module:attr``: a class or zero-argument factory (called with the ``--config`` keys as
  keyword arguments), or a ``mount(coordinator, config)`` function; ``attr`` may be dotted;
* ``module``: a module with a ``mount`` function;
* ``ep:NAME``: an installed ``amplifier.modules`` entry point;
* ``path/to/file.py`` or ``path/to/file.py:attr``: a file, ``mount`` by default;
* an adapter's short name (``langchain:trim_messages``; see :mod:`ctxkit.adapters`);
* nothing: ctxkit's reference manager.

What ``module:attr`` (or a file's ``attr``) names may take one of three forms
(:mod:`ctxkit.forms`), told apart by :func:`ctxkit.forms.detect_form` or given as ``form``:

* ``contract``: a class, factory or mount function that builds a context manager;
* ``function``: a function over the message list (``trim(messages)``, a pydantic-ai history
  processor), called before every request by a :class:`~ctxkit.forms.FunctionManager`; the
  ``--config`` keys are its keyword arguments, and one it does not take is refused;
* ``session``: an OpenAI Agents SDK ``Session`` (an object, or a class or factory building
  one with the ``--config`` keys), read as ``Runner`` reads it by a
  :class:`~ctxkit.forms.SessionManager`. An object is one long-lived store, cleared before
  each example.

A mount function gets the coordinator of
:mod:`ctxkit.conformance.targets.coordinator`: amplifier-core's
real one when it is installed, a stand-in otherwise (``CTXKIT_COORDINATOR`` picks).
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.machinery
import importlib.util
import inspect
import json
import logging
import os
import pkgutil
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ctxkit.conformance.targets.coordinator import (
    CoordinatorUnavailable,
    coordinator_kind,
    make_coordinator,
)
from ctxkit.extras import install_line
from ctxkit.forms import (
    CONTRACT_METHODS,
    FORMS,
    CompactingManager,
    FunctionManager,
    SessionManager,
    describe,
    detect_form,
    is_compacting,
    is_history_function,
    is_session,
    refused_options,
)
from ctxkit.shapes.spoken import (
    CHAT_FAMILY,
    DECLARATION,
    ShapeError,
    Spoken,
    declared_by,
    split_config,
)

__all__ = [
    "CONTRACT_METHODS",
    "DEFAULT_TARGET",
    "ContractError",
    "EventRecorder",
    "LoadError",
    "PlainMethods",
    "Target",
    "load_target",
]

if TYPE_CHECKING:
    from ctxkit.adapters import Adapter

logger = logging.getLogger(__name__)

DEFAULT_TARGET = "ctxkit.reference:mount"


class LoadError(Exception):
    """The target cannot be found or imported. The message says how to fix it."""


class ContractError(Exception):
    """The target was built but does not follow the protocol (missing or sync methods)."""


class PlainMethods(LoadError, ContractError):
    """The contract's methods are plain functions, not coroutines: the user's mistake, said
    before anything is checked (a usage error, exit 2), not a property the manager fails. A
    :class:`ContractError` too, for callers that catch those."""


class _NotFound(LoadError):
    """The module or attribute a target names does not exist (a typo, perhaps of an
    adapter's name)."""


class EventRecorder:
    """Every event the manager emits, as ``(name, data)`` in order: a mounted target's through
    its coordinator's hooks (:mod:`ctxkit.conformance.targets.coordinator`), a factory's as the
    ``hooks`` keyword (this object itself)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    async def emit(self, name: str, data: Any = None) -> None:
        self.events.append((name, data))


Kind = Literal["factory", "mount", "function", "session", "compacting"]
"""How a target is built: ``factory`` and ``mount`` give a context manager (the contract
form), ``function`` wraps a function over the message list, ``session`` a session store (a
class or factory building one, or the store itself)."""


@dataclass
class Target:
    """A loaded target: how to build a fresh manager, and whether its events can be seen.

    A mount target is mounted on the coordinator :mod:`ctxkit.conformance.targets.coordinator` makes
    (amplifier-core's when installed), as Amplifier's loader does: a truthy return of
    ``mount()`` is registered as a cleanup, and the module's ``async on_session_ready
    (coordinator)``, if it has one, runs after. :meth:`close` runs the cleanups.
    """

    spec: str
    obj: Callable[..., Any]
    kind: Kind
    config: dict[str, Any]
    _mounted: dict[int, tuple[Any, Any]] = field(default_factory=dict, repr=False)
    origin: tuple[str, str] | None = None
    """``(module, attribute)`` that import ``obj`` (as the target named them), None when it
    is not imported by name (a gRPC address)."""
    folder: str | None = None
    """For a file target: the folder that holds the file."""
    adapter: str | None = None
    """For a target named by an adapter: which, and the library it speaks for."""
    amplifier: bool = False
    """An Amplifier module: mounted, or served through Amplifier's gRPC ContextService."""

    @property
    def spoken(self) -> Spoken | None:
        """The shapes the target says it speaks (:mod:`ctxkit.shapes.spoken`): its own
        declaration, its adapter's, Amplifier's message model for an Amplifier module, Responses
        items for a session; None when nothing says (the runner then judges Chat Completions)."""
        try:
            declared = declared_by(self.obj)
        except ShapeError as exc:
            raise LoadError(f"{self.spec}: {exc}") from None
        if declared is not None and self.adapter is not None:
            return Spoken(declared[0], "adapter", self.adapter)
        if declared is not None:
            return Spoken(declared[0], "declared", f"{declared[1]} declares {DECLARATION}")
        if self.amplifier or self.kind == "mount":
            return Spoken(
                CHAT_FAMILY,
                "amplifier",
                "an Amplifier module: Amplifier's message model (Chat Completions messages, "
                "Anthropic content blocks)",
            )
        if self.kind == "session":
            return Spoken(
                ("responses",), "form", "an OpenAI Agents SDK Session holds Responses items"
            )
        if self.kind == "compacting":
            return Spoken(
                CHAT_FAMILY,
                "amplifier",
                "a manager of Amplifier's first contract (should_compact, compact): "
                "Amplifier's message model",
            )
        return None

    @property
    def form(self) -> str:
        """``contract``, ``function`` or ``session`` (:mod:`ctxkit.forms`)."""
        return self.kind if self.kind in ("function", "session", "compacting") else "contract"

    @property
    def observes_events(self) -> bool:
        """Events are seen through a mount's coordinator, or a factory's (or a function's)
        ``hooks`` keyword; a session has none."""
        if self.kind == "session":
            return False
        if self.kind == "function":
            return _named(self.obj, "hooks")
        return self.kind == "mount" or _named(self.obj, "hooks")

    def import_form(self) -> dict[str, Any] | None:
        """How a script builds this target by import, as plain data (the Python worker's
        ``hello`` answers with it;
        :mod:`ctxkit.conformance.reports.reproducer` renders it): ``module``
        and ``attr`` to import, the ``kind`` of build (``session_object`` for a session
        store given as an object), whether it takes ``hooks``, whether the factory is awaited,
        and ``pythonpath``: the folder to put on ``PYTHONPATH`` when the module is importable
        only from here (the current directory, a file's folder, ``PYTHONPATH``)."""
        if self.origin is None:
            return None
        module, attr = self.origin
        kind: str = self.kind
        if kind in ("session", "compacting") and not callable(self.obj):
            kind = f"{kind}_object"
        hooks = kind in ("factory", "function", "compacting") and self.observes_events
        return {
            "module": module,
            "attr": attr,
            "kind": kind,
            "hooks": hooks,
            "awaits": kind != "mount" and inspect.iscoroutinefunction(self.obj),
            "pythonpath": self.folder or _local_root(module),
        }

    async def build(self, recorder: EventRecorder) -> Any:
        """A fresh manager, checked against the protocol."""
        if self.kind == "mount":
            return await self._mount(recorder)
        if self.kind == "function":
            from ctxkit.messages import inspect_message  # the history is ctxkit's: it checks

            return FunctionManager(
                self.obj, hooks=recorder, options=self.config, validate=inspect_message
            )
        if self.kind in ("session", "compacting") and not callable(self.obj):
            wrapper = SessionManager if self.kind == "session" else CompactingManager
            manager = wrapper(self.obj)
            await manager.clear()  # one long-lived object: each example starts empty
            return manager
        kwargs = dict(self.config)
        if self.kind != "session" and _named(self.obj, "hooks"):
            kwargs["hooks"] = recorder
        manager = self.obj(**kwargs)
        if inspect.isawaitable(manager):
            manager = await manager
        if self.kind == "compacting" or is_compacting(manager):
            try:
                return CompactingManager(manager)
            except TypeError as exc:
                raise LoadError(f"{self.spec}: --form compacting, but {exc}") from None
        if self.kind == "session" or is_session(manager):
            if not is_session(manager):
                raise LoadError(
                    f"{self.spec}: --form session, but it built {describe(manager)}, not a "
                    "session with add_items, get_items, pop_item and clear_session"
                )
            return SessionManager(manager)
        check_protocol(manager)
        return manager

    async def close(self, manager: Any) -> None:
        """Run the cleanups of the mount that built ``manager`` (what ``mount()`` returned and
        what it passed to ``register_cleanup``), newest first, once. A cleanup that raises is
        logged, never raised: closing is no part of the contract. Does nothing for a manager
        this target did not mount."""
        _, coordinator = self._mounted.pop(id(manager), (None, None))
        if coordinator is not None:
            await coordinator.cleanup()

    async def _mount(self, recorder: EventRecorder) -> Any:
        coordinator = make_coordinator(recorder)
        cleanup = self.obj(coordinator, dict(self.config))
        if inspect.isawaitable(cleanup):
            cleanup = await cleanup
        if cleanup:
            coordinator.register_cleanup(cleanup)
        manager = coordinator.get("context")
        try:
            if manager is None:
                raise ContractError(
                    f"{self.spec}: mount() mounted nothing at 'context'; it should call "
                    "`await coordinator.mount('context', manager)`"
                )
            check_protocol(manager)
        except ContractError:
            await coordinator.cleanup()
            raise
        await _session_ready(self.obj, coordinator)
        self._mounted[id(manager)] = (manager, coordinator)
        return manager


async def _session_ready(mount: Callable[..., Any], coordinator: Any) -> None:
    """Call the module's ``async on_session_ready(coordinator)`` as Amplifier's loader does:
    found beside ``mount``, skipped with a warning if not async, and a failure logged and
    emitted as ``module:on_session_ready_failed``, never raised."""
    module = sys.modules.get(getattr(mount, "__module__", None) or "")
    ready = getattr(module, "on_session_ready", None)
    if ready is None:
        return
    module_id = module.__name__  # type: ignore[union-attr]
    if not inspect.iscoroutinefunction(ready):
        logger.warning("%s: on_session_ready() is sync, not async; skipped", module_id)
        return
    try:
        await ready(coordinator)
    except Exception as exc:
        logger.warning("on_session_ready for %r raised: %s", module_id, exc, exc_info=True)
        with contextlib.suppress(Exception):
            await coordinator.hooks.emit(
                "module:on_session_ready_failed", {"module_id": module_id, "error": str(exc)}
            )


def _local_root(module_name: str) -> str | None:
    """The folder ``module_name`` imports from when only this process finds it there (the
    current directory, ``PYTHONPATH``), not an installed location; None when installed."""
    top = module_name.partition(".")[0]
    where = getattr(sys.modules.get(top), "__file__", None)
    if not where:
        return None
    where = os.path.realpath(where)
    given = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    local = {os.getcwd(), *(os.path.abspath(p) for p in given if p)}
    search = [p for p in sys.path if p and os.path.abspath(p) not in local]
    for finder in sys.meta_path:  # installed: found without the local folders, the same file
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            found = find(top, search if finder is importlib.machinery.PathFinder else None)
        except Exception:
            continue
        origin = getattr(found, "origin", None)
        if origin and os.path.exists(origin) and os.path.realpath(origin) == where:
            return None
    folder = os.path.dirname(where)
    return os.path.dirname(folder) if os.path.basename(where) == "__init__.py" else folder


def _named(obj: Callable[..., Any], name: str) -> bool:
    """``obj`` has a parameter called ``name`` (``**kwargs`` does not count)."""
    try:
        return name in inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return False


def check_protocol(manager: Any) -> None:
    """Raise :class:`ContractError` naming missing methods and plain (non-async) ones."""
    missing = [m for m in CONTRACT_METHODS if not callable(getattr(manager, m, None))]
    if missing:
        raise ContractError(
            f"{type(manager).__name__} lacks {', '.join(missing)}; the context contract "
            f"needs async methods {', '.join(CONTRACT_METHODS)}"
        )
    _check_coroutines(type(manager).__name__, manager)


def _check_coroutines(name: str, obj: Any) -> None:
    """Raise :class:`PlainMethods` naming every contract method of ``obj`` (a manager or its
    class) that is a plain function."""
    plain = [
        m
        for m in CONTRACT_METHODS
        if callable(getattr(obj, m, None)) and not _is_async(getattr(obj, m))
    ]
    if plain:
        listed = ", ".join(plain[:-1]) + (" and " if len(plain) > 1 else "") + plain[-1]
        verb = "are plain functions" if len(plain) > 1 else "is a plain function"
        raise PlainMethods(
            f"{name}.{listed} {verb}, not coroutines: callers `await` every method of the "
            f"context contract, so declare {'them' if len(plain) > 1 else 'it'} `async def`"
        )


def _is_async(method: Any) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one."""
    if inspect.iscoroutinefunction(method):
        return True
    call = type(method).__dict__.get("__call__")
    return call is not None and inspect.iscoroutinefunction(call)


def _import(module_name: str, spec: str) -> Any:
    """The module, found as ``python -m`` would find it: installed, on PYTHONPATH, or in the
    current directory (searched last, so it shadows nothing installed)."""
    try:
        return _import_here(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            top = module_name.partition(".")[0]
            advice = (
                _dotted_hint(module_name, spec)
                or _close_module(module_name, exc.name, spec)
                or (
                    f"Run from the folder that holds {top}.py (or {top}/), or add that folder "
                    f"to the import path (PYTHONPATH=/path/to/it ctxkit conformance {spec}), "
                    "or pip install its package"
                )
            )
            raise _NotFound(
                f"{spec}: no module named {module_name!r} in the working folder "
                f"({os.getcwd()}), on PYTHONPATH or among the installed packages. {advice}"
            ) from exc
        raise LoadError(f"{spec}: importing {module_name!r} failed: {exc}") from exc
    except Exception as exc:
        raise LoadError(
            f"{spec}: importing {module_name!r} raised {type(exc).__name__}: {exc}"
        ) from exc


def _import_here(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        top = module_name.partition(".")[0]
        if exc.name != top or here in sys.path or "" in sys.path:
            raise
        sys.path.append(here)
        return importlib.import_module(module_name)


def _close_module(module_name: str, missing: str, spec: str = "") -> str:
    """``Did you mean ctxkit.reference?`` for ``ctxkit.refrence``: ``missing`` (the part of
    ``module_name`` not found) replaced by the closest module beside it, in its package or
    at the top level, if one is close."""
    parent, _, name = missing.rpartition(".")
    try:
        # a top-level name is compared with the working folder's modules alone: an installed
        # or standard module of a like name (ast for last_n) is not what was meant
        path = _import_here(parent).__path__ if parent else [os.getcwd()]
    except Exception:
        return ""
    close = _closest(name, {m.name for m in pkgutil.iter_modules(path)})
    if not close:
        return ""
    rest = module_name[len(missing) :] + spec.partition(module_name)[2]
    return f"Did you mean {f'{parent}.' if parent else ''}{close[0]}{rest}?"


def _closest(name: str, names: Iterable[str], n: int = 1) -> list[str]:
    """The names most like ``name``, case aside, best first."""
    by_lower = {candidate.lower(): candidate for candidate in names}
    return [by_lower[c] for c in difflib.get_close_matches(name.lower(), by_lower, n=n)]


def _dotted_hint(module_name: str, spec: str) -> str:
    """``pkg.mod.Class`` written for ``pkg.mod:Class``: say so, when that is what it is."""
    if ":" in spec or "." not in module_name:
        return ""
    parent, _, attr = module_name.rpartition(".")
    try:
        module = _import_here(parent)
    except Exception:
        return ""
    if not hasattr(module, attr):
        return ""
    return f"Did you mean {parent}:{attr}? A target names its attribute after a colon"


def _import_file(path: Path, spec: str) -> Any:
    if not path.is_file():
        raise LoadError(f"{spec}: no such file {str(path)!r}")
    name = f"ctxkit_target_{path.stem}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise LoadError(f"{spec}: cannot import {str(path)!r} as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        raise LoadError(
            f"{spec}: running {str(path)!r} raised {type(exc).__name__}: {exc}"
        ) from exc
    return module


def _attribute(module: Any, attr: str, spec: str, owner: str | None = None) -> Any:
    """``attr`` (dotted) of ``module``, named ``owner`` in what is said (a file by its path,
    not the name ctxkit imported it under)."""
    obj, owner = module, owner or module.__name__
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n in dir(obj) if not n.startswith("_"))
            close = _closest(part, names, n=3)
            meant = f"did you mean {' or '.join(close)}? It" if close else "it"
            raise _NotFound(
                f"{spec}: {owner!r}{_elsewhere(module)} has no attribute {part!r}; {meant} "
                f"has: {', '.join(names[:12])}{' ...' if len(names) > 12 else ''}"
            )
        obj, owner = getattr(obj, part), f"{owner}.{part}"
    return obj


def _elsewhere(module: Any) -> str:
    """Where a module was found when that is outside the working folder (an installed or
    standard module that a file of the same name in another folder was meant to be)."""
    where = getattr(module, "__file__", None)
    if not where or Path(where).resolve().is_relative_to(Path.cwd().resolve()):
        return ""
    return f" (the module at {where}, not one of the working folder {os.getcwd()})"


_MISSING_ARGUMENTS = re.compile(
    r"missing \d+ required (?:positional |keyword-only )?arguments?: (.+)"
)


def config_hint(error: str) -> str:
    """Where building a manager failed for want of its constructor's arguments, how to give
    them (``--config``); else empty."""
    found = _MISSING_ARGUMENTS.search(error)
    names = re.findall(r"'([^']+)'", found.group(1)) if found else []
    if not names:
        return ""
    example = json.dumps(dict.fromkeys(names, "..."))
    return f"; give {'it' if len(names) == 1 else 'them'} with --config '{example}'"


def _entry_point(name: str, spec: str) -> Any:
    found = entry_points(group="amplifier.modules", name=name)
    if not found:
        known = sorted(ep.name for ep in entry_points(group="amplifier.modules"))
        raise LoadError(
            f"{spec}: no installed amplifier.modules entry point named {name!r}; installed: "
            f"{', '.join(known) or 'none'}"
        )
    entry = next(iter(found))
    try:
        return entry.load()
    except Exception as exc:
        raise LoadError(
            f"{spec}: loading {entry.value!r} raised {type(exc).__name__}: {exc}"
        ) from exc


def _kind(obj: Any, spec: str) -> Kind:
    if inspect.isclass(obj):
        return "factory"
    if not callable(obj):
        raise LoadError(
            f"{spec}: {obj!r} is not callable; name a class, a zero-argument factory or a "
            "mount(coordinator, config) function"
        )
    try:
        parameters = list(inspect.signature(obj).parameters)
    except (TypeError, ValueError):
        return "factory"
    if getattr(obj, "__name__", "") == "mount" or parameters[:1] == ["coordinator"]:
        return "mount"
    return "factory"


def _form_kind(obj: Any, spec: str, config: dict[str, Any], form: str | None) -> Kind | None:
    """``function`` or ``session`` when ``obj`` takes that form (detected, or ``form``), None
    for a contract object (then :func:`_kind` says which). A form that does not fit ``obj``
    is a :class:`LoadError` that says what ``obj`` looks like."""
    detected = detect_form(obj, config=config)
    if form is None:
        form = detected
    elif form != detected:
        _check_forced(obj, spec, config, form)
    if form == "function":
        refused = refused_options(obj, config)
        if refused:
            raise LoadError(
                f"{spec}: the function takes no keyword {', '.join(map(repr, refused))}; "
                f"--config keys are passed to it as keywords on every request, and it is "
                f"{describe(obj)}"
            )
        return "function"
    if form in ("session", "compacting"):
        return form
    return None


def _check_forced(obj: Any, spec: str, config: dict[str, Any], form: str) -> None:
    """``--form`` names a form ``obj`` cannot take: say which forms exist and what it is."""
    looks = describe(obj)
    forms = (
        "the forms are contract (a context manager, its class or factory, or a mount "
        "function), function (a function over the message list), session (an object with "
        "add_items, get_items, pop_item and clear_session) and compacting (Amplifier's first "
        "contract: add_message, get_messages, should_compact, compact, clear)"
    )
    if form == "function" and (inspect.isclass(obj) or not callable(obj)):
        raise LoadError(f"{spec}: --form function, but it is {looks}; {forms}")
    if form == "function" and not is_history_function(obj, ()) and not _one_argument(obj):
        raise LoadError(
            f"{spec}: --form function, but {looks} cannot be called with the message list "
            f"alone; {forms}"
        )
    if form == "session" and not callable(obj) and not is_session(obj):
        raise LoadError(f"{spec}: --form session, but it is {looks}; {forms}")
    if form == "session" and inspect.isclass(obj) and not is_session(obj):
        raise LoadError(f"{spec}: --form session, but it is {looks}, not a session; {forms}")
    if form == "session" and is_history_function(obj, config):
        raise LoadError(f"{spec}: --form session, but it is {looks}; {forms}")
    if form == "contract" and is_session(obj):
        raise LoadError(f"{spec}: --form contract, but it is {looks}; {forms}")
    if form == "contract" and not callable(obj):
        raise LoadError(f"{spec}: --form contract, but it is {looks}; {forms}")


def _one_argument(obj: Any) -> bool:
    """``obj(messages)`` binds: one positional argument is all it needs."""
    try:
        inspect.signature(obj).bind(None)
    except (TypeError, ValueError):
        return False
    return True


def load_target(
    spec: str | None, config: dict[str, Any] | None = None, form: str | None = None
) -> Target:
    """Resolve a TARGET string (see the module docstring); ``form`` (``contract``,
    ``function`` or ``session``) overrides the detected form. Raises :class:`LoadError`."""
    spec = spec or DEFAULT_TARGET
    try:  # the declaration is the suite's, never a keyword of the target's
        config, _ = split_config(config or {})
    except ShapeError as exc:
        raise LoadError(str(exc)) from None
    if form is not None and form not in FORMS:
        raise LoadError(f"--form {form!r}: the forms are {', '.join(FORMS)}")
    if spec.startswith("grpc://"):
        if form not in (None, "contract"):
            raise LoadError(f"{spec}: a gRPC module is a context manager: --form contract")
        return _grpc(spec, config)
    adapted = _adapter(spec)
    if adapted is not None:
        module_name, attr = adapted.factory.split(":")
        obj = _attribute(_import(module_name, spec), attr, spec)
        target = _target(spec, obj, config, form, (module_name, attr))
        target.adapter = f"the {spec} adapter: the shapes {adapted.distribution} takes"
        return target
    try:
        return _python_target(spec, config, form)
    except _NotFound as exc:
        meant = _adapter_meant(spec)
        if meant is None:
            raise
        raise LoadError(meant) from exc


def _python_target(spec: str, config: dict[str, Any], form: str | None) -> Target:
    """A target that names no adapter: an entry point, a file or a module."""
    if spec.startswith("ep:"):
        obj = _entry_point(spec[3:], spec)
        return _target(spec, obj, config, form, _named_by(obj))
    path_part, _, attr = spec.partition(":")
    if path_part.endswith(".py"):
        path = Path(path_part)
        module = _import_file(path, spec)
        if not attr and not hasattr(module, "mount"):
            raise LoadError(
                f"{spec}: {path_part} has no mount(); name the class or factory"
                + "".join(f", e.g. {path_part}:{n}" for n in _contract_classes(module)[:1])
            )
        attr = attr or "mount"
        target = _target(spec, _attribute(module, attr, spec, owner=path_part), config, form)
        if path.stem.isidentifier():  # importable by its name from its folder
            target.origin = (path.stem, attr)
            target.folder = str(path.resolve().parent)
        return target
    else:
        if not path_part.replace(".", "").replace("_", "").isalnum():
            raise LoadError(
                f"{spec!r} is not a target; use module:attr, module, ep:NAME or path/to/file.py"
            )
        module = _import(path_part, spec)
        if not attr:
            if not hasattr(module, "mount"):
                raise LoadError(
                    f"{spec}: module {path_part!r} has no mount(); name the class or factory, "
                    f"e.g. {path_part}:MyContextManager"
                )
            attr = "mount"
    obj = _attribute(module, attr, spec)
    return _target(spec, obj, config, form, (path_part, attr))


def _contract_classes(module: Any) -> list[str]:
    """The classes a module defines that have the contract's methods, by name."""
    return sorted(
        name
        for name, obj in vars(module).items()
        if inspect.isclass(obj)
        and obj.__module__ == module.__name__
        and all(callable(getattr(obj, m, None)) for m in CONTRACT_METHODS)
    )


def _named_by(obj: Any) -> tuple[str, str] | None:
    """``(module, qualified name)`` that import ``obj`` again, if they do."""
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not module or not name or "<" in name:
        return None
    found: Any = sys.modules.get(module)
    for part in name.split("."):
        found = getattr(found, part, None)
    return (module, name) if found is obj else None


def _grpc(spec: str, config: dict[str, Any]) -> Target:
    """A ``ContextService`` served over gRPC (:mod:`ctxkit.conformance.targets.grpc_target`)."""
    import functools

    try:
        import grpc  # noqa: F401
        from amplifier_core._grpc_gen import amplifier_module_pb2_grpc  # noqa: F401
    except ImportError:
        raise LoadError(
            f"{spec}: checking a gRPC module needs grpcio and amplifier-core: "
            + install_line("grpc")
        ) from None
    from ctxkit.conformance.targets.grpc_target import GrpcContextManager, address_of

    try:
        address = address_of(spec)
    except ValueError as exc:
        raise LoadError(str(exc)) from None
    return Target(
        spec, functools.partial(GrpcContextManager, address), "factory", config, amplifier=True
    )


def _adapter_meant(spec: str) -> str | None:
    """For a target that is not found: the sentence naming the adapter meant, when the
    target names an adapter's library, or one close to it (``langchain:trim_mesages``,
    ``langchian:trim_messages``). A target that reads as a module path gets what was said of
    its module, never an adapter it did not name."""
    from ctxkit.adapters import ADAPTERS, JS_ADAPTERS

    names = [a.name for a in (*ADAPTERS, *JS_ADAPTERS)]
    family = spec.partition(":")[0]
    close = _closest(spec, names)
    families = {name.partition(":")[0] for name in names}
    if family not in families and _closest(family, families):  # langchian: for langchain:
        family = _closest(family, families)[0]
    kin = [name for name in names if name.partition(":")[0] == family]
    if kin:
        meant = (
            f"did you mean {close[0]}?" if close else f"the {family} adapters: {', '.join(kin)}."
        )
        return (
            f"{spec}: there is no adapter {spec!r}; {meant} "
            "(`ctxkit conformance --list-adapters` lists them all)"
        )
    return None


def _adapter(spec: str) -> Adapter | None:
    """The adapter named ``spec``, if one is; a LoadError if its library is not installed."""
    from ctxkit.adapters import by_name, installed_version

    adapter = by_name(spec)
    if adapter is None:
        return None
    if installed_version(adapter) is None:
        raise LoadError(f"{spec} needs {adapter.distribution}: {adapter.install}")
    return adapter


def _target(
    spec: str,
    obj: Any,
    config: dict[str, Any],
    form: str | None = None,
    origin: tuple[str, str] | None = None,
) -> Target:
    kind = _form_kind(obj, spec, config, form) or _kind(obj, spec)
    if kind == "factory" and inspect.isclass(obj):
        try:
            _check_coroutines(obj.__name__, obj)  # said once, before any example
        except PlainMethods as exc:
            raise PlainMethods(f"{spec}: {exc}") from None
    if kind == "mount":
        try:
            coordinator_kind()  # a bad CTXKIT_COORDINATOR is a load error, said once
        except CoordinatorUnavailable as exc:
            raise LoadError(f"{spec}: {exc}") from exc
    return Target(spec, obj, kind, config, origin=origin)
