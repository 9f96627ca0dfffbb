"""The Python implementation of the conformance protocol: ``python -m ctxkit.conformance.worker``.

The suite never runs a target in its own process: a hang, a crash or ``sys.exit`` in the
target must cost one verdict, not the run. This worker holds a Python target and answers the
runner's requests as ``conformance/PROTOCOL.md`` specifies: on two pipes of its own (named by
``CTXKIT_PROTOCOL_FDS``), so neither the target's prints nor a closed fd 0 reach them, each line
framed by the token ``hello`` gave, so bytes a target writes into the channel (any inherited
pipe) are recognised as such rather than read as a request. Each answer carries the events
emitted since the last one and a digest of ``get_messages()``, so the runner can check
non-destructiveness after every step cheaply.

``hello`` also answers how a reproducer imports and builds the target (``build``: see
:meth:`ctxkit.conformance.targets.load.Target.import_form`), a field other implementations need not
send. When the runner closes the channel, the last manager's cleanups and the ``atexit``
handlers run, and the worker leaves at once (:func:`leave`): nothing the target left running
(a non-daemon thread, a SIGTERM it ignores) holds the run up.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import sys
import traceback
from typing import Any, NoReturn

from ctxkit.conformance.replay import add_concurrently, close_manager, edit_in_place
from ctxkit.conformance.targets.grpc_messages import CannotCross
from ctxkit.conformance.targets.load import (
    ContractError,
    EventRecorder,
    LoadError,
    Target,
    load_target,
)
from ctxkit.conformance.targets.protocol import (
    EXIT_CHANNEL_LOST,
    PROTOCOL_VERSION,
    RunningDigest,
    digest,
    protocol_fds,
)
from ctxkit.exact import exact_form


def to_json(value: Any) -> Any:
    """What a target returned, as JSON-ready data (pydantic models and the like as dicts).

    Never raises but MemoryError: a value that cannot be written as JSON (a cycle, a
    ``model_dump`` that raises) becomes a string that says so, which the parent sees as data.
    """
    try:
        return json.loads(json.dumps(value, default=_fallback))
    except MemoryError:
        raise
    except Exception as exc:
        return f"<not JSON-serialisable: {_text(exc)}: {_text(value, repr)[:200]}>"


def _text(value: Any, show: Any = str) -> str:
    """``str(value)`` (or ``show``), even when the object's own method raises."""
    try:
        return show(value)
    except MemoryError:
        raise
    except Exception:
        return object.__repr__(value)


def _fallback(value: Any) -> Any:
    for method in ("model_dump", "dict", "_asdict"):
        if callable(getattr(value, method, None)):
            return getattr(value, method)()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return repr(value)


class Worker:
    """Protocol version 1 (``conformance/PROTOCOL.md``) for a Python target."""

    def __init__(self) -> None:
        self.target: Target | None = None
        self.manager: Any = None
        self.recorder = EventRecorder()
        self.ignore: frozenset[str] = frozenset()
        self.history = HistoryDigest(self.ignore)
        self.sent_events = 0
        self.before: Any = None
        self.digests = True
        """Answers carry the history's digest (``hello``'s ``digests``; a replay needs none)."""
        self.calling = ""
        """The call a ``turn`` is in, for an error's ``during``."""

    async def handle(self, op: str, args: dict[str, Any]) -> Any:
        if op == "hello":
            return self.hello(**args)
        if op == "reset":
            return await self.reset()
        if self.manager is None:
            raise ProtocolMisuse(f"{op!r} before reset: no manager is built yet")
        method = getattr(self, f"op_{op}", None)
        if method is None:
            raise ProtocolMisuse(f"unknown op {op!r}")
        return await method(**args)

    def hello(
        self,
        protocol: int,
        token: str = "",
        target: str | None = None,
        config: dict[str, Any] | None = None,
        ignore: list[str] | tuple[str, ...] = (),
        form: str | None = None,
        digests: bool = True,
    ) -> dict[str, Any]:
        if protocol != PROTOCOL_VERSION:
            raise ProtocolVersion(f"this worker speaks protocol {PROTOCOL_VERSION}, not {protocol}")
        self.target = load_target(target, config, form)
        self.ignore = frozenset(ignore)
        self.digests = bool(digests)
        self.history = HistoryDigest(self.ignore)
        return {
            "protocol": PROTOCOL_VERSION,
            "implementation": {
                "name": "ctxkit-python-worker",
                "version": _version(),
                "language": "python",
            },
            "target": self.target.spec,
            "events": self.target.observes_events,
            "form": self.target.form,
            "build": self.target.import_form(),  # how a reproducer imports and builds it
            **({"speaks": spoken.to_json()} if (spoken := self.target.spoken) else {}),
        }

    async def reset(self) -> None:
        if self.target is None:
            raise ProtocolMisuse("reset before hello: no target is loaded")
        await close_manager(self.manager)
        await self.target.close(self.manager)  # the cleanups its mount() registered
        self.manager = None
        self.recorder = EventRecorder()
        self.sent_events = 0
        self.manager = await self.target.build(self.recorder)

    async def _edited(self, value: Any, edit_after: bool) -> None:
        """With ``edit_after``: note the history, then scribble over ``value`` as a careless
        caller would (:func:`ctxkit.conformance.replay.edit_in_place`)."""
        if edit_after:
            self.before = to_json(await self.manager.get_messages())
            edit_in_place(value)

    async def op_add(self, message: Any, edit_after: bool = False) -> None:
        await self.manager.add_message(message)
        await self._edited(message, edit_after)

    async def op_add_many(self, messages: list[Any]) -> None:
        await add_concurrently(self.manager, messages)

    async def op_view(
        self,
        token_budget: int | None = None,
        provider: dict[str, Any] | None = None,
        edit_after: bool = False,
    ) -> Any:
        """With a provider, a budget, both (as a replay asks: a manager may read either), or
        neither (the manager's own fallback); only what was given is passed."""
        given: dict[str, Any] = {}
        if token_budget is not None:
            given["token_budget"] = token_budget
        if provider is not None:
            given["provider"] = _Provider(provider)
        view = await self.manager.get_messages_for_request(**given)
        snapshot = to_json(view)
        await self._edited(view, edit_after)
        return snapshot

    async def op_turn(
        self,
        messages: list[Any],
        token_budget: int | None = None,
        provider: dict[str, Any] | None = None,
    ) -> Any:
        """One model call of a recorded conversation: the messages added in order, then the
        view (a replay's one round trip per call)."""
        self.calling = "add_message"
        for message in messages:
            await self.manager.add_message(message)
        self.calling = "get_messages_for_request"
        return await self.op_view(token_budget, provider)

    async def op_get(self, edit_after: bool = False) -> Any:
        history = await self.manager.get_messages()
        snapshot = to_json(history)
        await self._edited(history, edit_after)
        return snapshot

    async def op_set(self, messages: list[Any], edit_after: bool = False) -> None:
        await self.manager.set_messages(messages)
        await self._edited(messages, edit_after)

    async def op_clear(self) -> None:
        await self.manager.clear()

    async def state(self) -> dict[str, Any]:
        """The events since the last answer, the history's digest, and ``before``."""
        events = self.recorder.events[self.sent_events :]
        self.sent_events = len(self.recorder.events)
        answer: dict[str, Any] = {
            "events": [{"name": str(name), "data": to_json(data)} for name, data in events]
        }
        if self.digests:
            try:
                answer["digest"] = self.history.of(await self.manager.get_messages())
            except MemoryError:
                raise
            except Exception:
                pass  # no digest: the runner asks with get and sees what get_messages() does
        if self.before is not None:
            answer["before"], self.before = self.before, None
        return answer


def _history_digest(history: Any, ignore: frozenset[str]) -> str:
    """The digest of what ``get_messages()`` returned: of the history itself when it is plain
    JSON data (most are: it saves writing and reading it back once per call), else of its
    JSON form (:func:`to_json`). Both give the same digest for plain data; where they could
    differ (integer keys), a digest that differs only makes the runner ask for the history."""
    try:
        return digest(history, ignore)
    except (TypeError, ValueError):
        return digest(to_json(history), ignore)


_LIST_HEADER = 5
"""The type code and item count in front of a list's items in its exact form."""


class HistoryDigest:
    """:func:`_history_digest` after every call, kept as the history grows: when the history
    still begins with every message it held at the last digest, only the messages added since
    are written and hashed. Writing a history of hundreds of messages whole after every call
    was a third of a worker's time on a long search.

    "Still begins with" is decided on the history's :func:`~ctxkit.exact.exact_form`, in
    which a list's items are written one after another, so an unchanged prefix of messages is
    an unchanged prefix of bytes. A history without one, or that is not a list, is digested
    whole, as before; so is any history whose earlier messages changed.
    """

    def __init__(self, ignore: frozenset[str]) -> None:
        self.ignore = ignore
        self._forget()

    def _forget(self) -> None:
        self._running = RunningDigest(self.ignore)
        self._items = b""  # marshal's form of the messages digested so far, without the header
        self._count = 0

    def of(self, history: Any) -> str:
        form = exact_form(history) if type(history) is list else None
        if form is None:
            self._forget()
            return _history_digest(history, self.ignore)
        if len(history) < self._count or not form.startswith(self._items, _LIST_HEADER):
            self._forget()
        try:
            for message in history[self._count :]:
                self._running.add(message)
        except (TypeError, ValueError):  # not JSON as it is (a set, bytes, integer keys)
            self._forget()
            return _history_digest(history, self.ignore)
        self._items, self._count = form[_LIST_HEADER:], len(history)
        return self._running.hexdigest()


class ProtocolMisuse(Exception):
    """A request this worker cannot read: a bug in the runner, never in the target."""


class ProtocolVersion(Exception):
    """The runner speaks a protocol version this worker does not."""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from ctxkit.extras import DISTRIBUTION

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


class _Provider:
    """A provider whose ``get_info().defaults`` gives the budget."""

    def __init__(self, defaults: dict[str, Any]) -> None:
        self._info = type("ProviderInfo", (), {"defaults": defaults, "id": "conformance"})()

    def get_info(self) -> Any:
        return self._info


def _error(exc: BaseException) -> dict[str, Any]:
    """An answer for what the target (or loading it) raised; ``kind`` says how to read it."""
    if isinstance(exc, MemoryError):
        kind = "memory"
    elif isinstance(exc, SystemExit | KeyboardInterrupt):
        kind = "exit"
    elif isinstance(exc, LoadError):
        kind = "load"
    elif isinstance(exc, ContractError):
        kind = "contract"
    elif isinstance(exc, ProtocolMisuse | ProtocolVersion):
        kind = "protocol"
    elif isinstance(exc, CannotCross):  # what a transport (gRPC) cannot carry
        kind = "unsupported"
    else:
        kind = "raised"  # any other exception, asyncio.CancelledError included
    error: dict[str, Any] = {"type": type(exc).__name__, "message": ""}
    try:
        error["message"] = _text(exc)[:2000]
        error["traceback"] = "".join(traceback.format_exception(exc))[-6000:]
    except MemoryError:
        pass  # a short answer is better than none
    return {"ok": False, "kind": kind, "error": error}


async def respond(worker: Worker, op: str, args: dict[str, Any]) -> dict[str, Any]:
    """The answer to one request: a value or what was raised, then events and digest."""
    worker.before = None
    try:
        value = await worker.handle(op, args)
        answer: dict[str, Any] = {"ok": True, "value": value}
        if op != "hello" and worker.manager is not None:
            answer.update(await worker.state())
        return answer
    except BaseException as exc:
        answer = _error(exc)
        if op == "turn":
            answer["error"]["during"] = worker.calling
    if answer["kind"] == "raised" and worker.manager is not None:
        try:
            answer.update(await worker.state())
        except BaseException as exc:
            return _error(exc)
    return answer


def encode(answer: dict[str, Any], prefix: bytes) -> bytes:
    """One framed answer line; an answer that cannot be written says so instead."""
    try:
        text = json.dumps(answer, default=_fallback)
    except MemoryError:
        text = json.dumps({"ok": False, "kind": "memory", "error": {"type": "MemoryError"}})
    except Exception as exc:
        error = {"type": "UnserialisableAnswer", "message": _text(exc)}
        text = json.dumps({"ok": False, "kind": "raised", "error": error})
    return prefix + text.encode("utf-8", "surrogatepass") + b"\n"


def _request(line: bytes) -> tuple[str, dict[str, Any]]:
    request = json.loads(line.decode("utf-8", "surrogatepass"))
    op, args = request["op"], request.get("args") or {}
    if not isinstance(op, str) or not isinstance(args, dict):
        raise TypeError("op must be a string and args an object")
    return op, args


async def serve(requests: Any, answers: Any) -> None:
    """Answer requests until the runner closes the channel (or the target breaks it); then
    the process ends (:func:`leave`): this is the worker's whole life."""
    worker = Worker()
    loop = asyncio.get_running_loop()
    try:
        try:
            op, args = _request(requests.readline())
            if op != "hello":
                raise ValueError(f"the first request must be hello, not {op!r}")
            prefix = str(args["token"]).encode() + b" "
        except (ValueError, KeyError, TypeError) as exc:
            sys.stderr.write(f"ctxkit worker: no hello: {exc}\n")
            os._exit(EXIT_CHANNEL_LOST)
        answer = await respond(worker, op, args)
        while True:
            answers.write(encode(answer, prefix))
            answers.flush()
            if answer.get("kind") in ("exit", "memory"):
                os._exit(3)
            line = await loop.run_in_executor(None, requests.readline)
            if not line:  # the runner is done: let the last manager release what it holds
                await close_manager(worker.manager)
                if worker.target is not None:
                    await worker.target.close(worker.manager)  # what its mount() registered
                leave(0)
            if not line.startswith(prefix):
                answer = _garbage(line, prefix)
                continue
            try:
                op, args = _request(line[len(prefix) :])
            except (ValueError, KeyError, TypeError):
                answer = _garbage(line, prefix)
            else:
                answer = await respond(worker, op, args)
    except (OSError, ValueError) as exc:  # the target closed or replaced our descriptors
        sys.stderr.write(f"ctxkit worker: the protocol channel is gone: {exc}\n")
        os._exit(EXIT_CHANNEL_LOST)


def leave(status: int) -> NoReturn:
    """End the worker now that the protocol is done: run the ``atexit`` handlers (the target
    flushes and closes what it holds), flush, and exit without waiting for anything the
    target left running. An ordinary exit would join every non-daemon thread it started, and a
    thread that never ends would hold the run up until the runner kills the worker."""
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    os._exit(status)


def _garbage(line: bytes, prefix: bytes) -> dict[str, Any]:
    """The answer to a request line that is not ours: the target wrote into the channel.
    The message shows what it wrote, up to where a request of ours begins."""
    ours = line.find(prefix)
    shown = repr(line[: ours if ours > 0 else 60][:60])
    return {"ok": False, "kind": "protocol", "error": {"type": "Garbage", "message": shown}}


def main() -> None:
    try:
        requests, answers = protocol_fds()
    except ValueError as exc:
        sys.exit(f"ctxkit worker: {exc}")
    for fd in (requests, answers):
        os.set_inheritable(fd, False)  # the target's own children do not get the channel
    asyncio.run(serve(os.fdopen(requests, "rb"), os.fdopen(answers, "wb")))


if __name__ == "__main__":
    main()
