"""What a reproducer script imports: build the target as the run did, call it, and assert.

This is the suite's small public API for scripts and tests. Each ``check.*`` function raises
``AssertionError`` with the same sentence the run reported, so a reproducer fails (as a script:
a non-zero exit; under pytest: a failed test) exactly while the bug is there.

    from mypkg.context import MyManager

    from ctxkit.conformance.replay import check

    async def reproduce() -> None:
        manager = MyManager(max_tokens=8000)
        await manager.add_message({"role": "user", "content": "hi"})
        view = await manager.get_messages_for_request(token_budget=100)
        check.tool_pairs(view)

A target that is not imported by name (another language, ``--command``, gRPC) is opened by
its TARGET string: ``manager, events = await open_manager("manager.mjs:Window")``. An
Amplifier module's ``mount`` is mounted by :func:`mounted`; :class:`EventRecorder` is the
``hooks`` that records what a manager emits; :func:`run_apart` runs calls that end the process.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from ctxkit.conformance.judge import step_checks as checks
from ctxkit.conformance.judge.allow import parse_allow
from ctxkit.conformance.judge.invariants import Violation
from ctxkit.conformance.targets.load import EventRecorder
from ctxkit.conformance.targets.worker_client import first_line

__all__ = [
    "ConcurrentAddsFailed",
    "EventRecorder",
    "Provider",
    "add_concurrently",
    "check",
    "close_manager",
    "edit_in_place",
    "may_refuse",
    "mounted",
    "open_manager",
    "returns_within",
    "run_apart",
]

T = TypeVar("T")


class Provider:
    """A provider whose ``get_info().defaults`` sets the budget (``context_window`` minus
    ``max_output_tokens``)."""

    def __init__(self, defaults: Mapping[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.id = "ctxkit-conformance"

    def get_info(self) -> Provider:
        return self

    def __repr__(self) -> str:
        return f"Provider({self.defaults!r})"


async def open_manager(
    target: str | None,
    config: Mapping[str, Any] | None = None,
    *,
    command: str | None = None,
    form: str | None = None,
) -> tuple[Any, list[tuple[str, Any]]]:
    """A fresh manager built from a TARGET string exactly as ``ctxkit conformance`` builds it,
    and the list its events are recorded into. Targets import from the current directory, as
    they do for the command. A target in another language (a JavaScript module, or any
    ``command`` that speaks the protocol) runs in its own process behind a
    :class:`~ctxkit.conformance.targets.remote.RemoteManager`. ``form`` is ``--form``: ``contract``,
    ``function`` or ``session`` (see :mod:`ctxkit.forms`); detected when not given."""
    from ctxkit.conformance.targets.routes import route_for

    route = route_for(target, command)
    if route.kind != "python":
        from ctxkit.conformance.targets.remote import RemoteManager

        remote = RemoteManager.start(route, config, form=form)
        return remote, remote.events
    from ctxkit.conformance.targets.load import load_target

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    recorder = EventRecorder()
    manager = await load_target(target, dict(config or {}), form).build(recorder)
    return manager, recorder.events


async def close_manager(manager: Any) -> None:
    """Close a manager if it can be (``close`` or ``aclose``: a file it holds, a connection,
    a process); its failure to close is no failure of the contract, so it is not raised."""
    close = getattr(manager, "close", None) or getattr(manager, "aclose", None)
    if not callable(close):
        return
    try:
        result = close()
        if inspect.isawaitable(result):
            await result
    except Exception:
        pass


async def mounted(
    mount: Callable[..., Any], config: Mapping[str, Any] | None = None
) -> tuple[Any, list[tuple[str, Any]]]:
    """The context manager an Amplifier module's ``mount(coordinator, config)`` mounts, as
    ``ctxkit conformance`` mounts it (amplifier-core's coordinator when it is installed, its
    ``on_session_ready`` after), and the list its events are recorded into."""
    from ctxkit.conformance.targets.load import Target

    recorder = EventRecorder()
    name = getattr(mount, "__name__", "mount")
    manager = await Target(name, mount, "mount", dict(config or {})).build(recorder)
    return manager, recorder.events


def run_apart(path: str, timeout: float = 600.0) -> None:
    """Run the reproducer at ``path`` (``__file__``) with python in a process of its own, for
    calls that end the process: raise AssertionError, saying how it ended, while they do.

    The child imports what this process imports (its ``sys.path`` as ``PYTHONPATH``)."""
    import subprocess

    from ctxkit.conformance.targets.worker_client import how_it_ended

    paths = [os.path.abspath(p or os.curdir) for p in sys.path]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)))
    done = subprocess.run(
        [sys.executable, path], env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode == 0:
        return
    lines = (done.stdout + done.stderr).strip().splitlines()
    tail = "\n".join(lines[-8:])
    raise AssertionError(
        f"the calls end the process ({how_it_ended(done.returncode)})"
        + (f"; it printed:\n{tail}" if tail else "")
    )


class ConcurrentAddsFailed(Exception):
    """Some of the concurrent ``add_message`` calls raised: the message says how many raised
    what, and how many returned."""


async def add_concurrently(manager: Any, messages: Sequence[Any]) -> None:
    """``add_message`` for every message at once, as concurrent agents call it; raises
    :class:`ConcurrentAddsFailed` when any call raised (from the first that did)."""
    outcomes = await asyncio.gather(
        *(manager.add_message(m) for m in messages), return_exceptions=True
    )
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
            raise outcome  # an interrupt or an exit is not the manager's answer
    raised = [o for o in outcomes if isinstance(o, Exception)]
    if not raised:
        return
    said = Counter(
        f"{type(exc).__name__}: {line}" if (line := first_line(str(exc))) else type(exc).__name__
        for exc in raised
    )
    what = "; ".join(f"{count} raised {kind}" for kind, count in said.items())
    returned = len(outcomes) - len(raised)
    raise ConcurrentAddsFailed(
        f"{len(outcomes)} concurrent add_message calls: {what}; {returned} returned"
    ) from raised[0]


def edit_in_place(value: Any) -> None:
    """Scribble over a returned or passed-in structure, the way careless callers do: every
    string gets `` EDITED`` appended, every list one more message, every dict one more key."""
    if isinstance(value, list):
        for item in value:
            edit_in_place(item)
        value.append({"role": "user", "content": f"{checks.EDIT_MARK} BY CALLER"})
    elif isinstance(value, dict):
        for key, item in list(value.items()):
            if isinstance(item, str):
                value[key] = f"{item} {checks.EDIT_MARK}"
            else:
                edit_in_place(item)
        value["metadata_edit"] = True


async def may_refuse(call: Awaitable[T]) -> T | None:
    """A call the run saw refused, fairly (a budget too small for what must stay): its error
    is not the bug, so it is swallowed and the result is None."""
    try:
        return await call
    except Exception:
        return None


async def returns_within(seconds: float, call: Awaitable[T], what: str = "the call") -> T:
    """The call's result, or an AssertionError if it does not return in time, even when it
    blocks the event loop (a timer signal interrupts it where it can)."""
    with _alarm(seconds + 1, what):
        try:
            return await asyncio.wait_for(call, seconds)
        except TimeoutError:
            raise AssertionError(f"{what} did not return within {seconds:g} s") from None


@contextmanager
def _alarm(seconds: float, what: str) -> Any:
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "setitimer"
    ):
        yield
        return

    def expired(_signum: int, _frame: Any) -> None:
        raise AssertionError(f"{what} did not return within {seconds - 1:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _hold(found: list[Violation]) -> None:
    if found:
        raise AssertionError("\n".join(str(v) for v in found))


class check:
    """The assertions, one per check of the run; each raises AssertionError naming the
    property and saying what is wrong."""

    @staticmethod
    def is_list(view: Any) -> None:
        _hold(checks.is_list(view))

    @staticmethod
    def tool_pairs(view: Sequence[Any]) -> None:
        _hold(checks.tool_pairs(view))

    @staticmethod
    def attachments(view: Sequence[Any], history: Sequence[Mapping[str, Any]]) -> None:
        _hold(checks.attachments(view, history))

    @staticmethod
    def ordering(
        view: Sequence[Any],
        history: Sequence[Mapping[str, Any]],
        allow: Iterable[str] = (),
        ignore: Iterable[str] | None = None,
    ) -> None:
        _hold(checks.ordering(view, history, parse_allow(allow), _keys(ignore)))

    @staticmethod
    def preserved(
        view: Sequence[Any],
        history: Sequence[Mapping[str, Any]],
        allow: Iterable[str] = (),
        ignore: Iterable[str] | None = None,
    ) -> None:
        _hold(checks.preserved(view, history, parse_allow(allow), _keys(ignore)))

    @staticmethod
    def fits(view: Sequence[Mapping[str, Any]], budget: int, allow: Iterable[str] = ()) -> None:
        _hold(checks.fits(view, budget, parse_allow(allow)))

    @staticmethod
    def history(
        stored: Any,
        expected: Sequence[Mapping[str, Any]],
        property: str = "non_destructive",
        ignore: Iterable[str] | None = None,
    ) -> None:
        _hold(checks.history(stored, expected, property, _keys(ignore)))

    @staticmethod
    def stored_all(
        stored: Any,
        before: Sequence[Mapping[str, Any]],
        added: Sequence[Mapping[str, Any]],
        ignore: Iterable[str] | None = None,
    ) -> None:
        _hold(checks.stored_all(stored, before, added, _keys(ignore)))

    @staticmethod
    def empty_view(view: Any) -> None:
        _hold(checks.empty_view(view))

    @staticmethod
    def same_view(view: Any, again: Any) -> None:
        _hold(checks.same_view(view, again))

    @staticmethod
    def not_edited(again: Any) -> None:
        _hold(checks.not_edited(again))

    @staticmethod
    def events(emitted: Sequence[Any]) -> None:
        _hold(checks.events(emitted))

    @staticmethod
    async def refuses(call: Awaitable[Any], problem: str) -> None:
        """A bad message must get an error."""
        try:
            await call
        except Exception:
            return
        raise AssertionError(f"robustness: add_message accepted {problem} without an error")


def _keys(ignore: Iterable[str] | None) -> frozenset[str] | None:
    return None if ignore is None else frozenset(ignore)
