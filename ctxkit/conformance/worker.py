"""The process that holds the target: ``python -m ctxkit.conformance.worker REQUESTS ANSWERS``.

The suite never runs a target in its own process: a hang, a crash or ``sys.exit`` in the
target must cost one verdict, not the run. It runs contained (see
:mod:`ctxkit.conformance.sandbox`): stdin is ``/dev/null``, stdout and stderr are captured,
and the protocol has two pipes of its own, passed as the descriptors ``REQUESTS`` and
``ANSWERS``, so neither the target's prints nor a closed fd 0 reach it. The first line on
``REQUESTS`` is a random token; every later line is ``<token> <JSON request>`` and every
answer ``<token> <JSON answer>``, so bytes a target writes into the channel (any inherited
pipe) are recognised as such rather than read as an answer. Each answer carries the events
emitted since the last one and a digest of ``get_messages()``, so the parent can check
non-destructiveness after every step cheaply.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import os
import sys
import traceback
from typing import Any

from ctxkit.conformance.replay import edit_in_place
from ctxkit.conformance.target import ContractError, EventRecorder, LoadError, Target, load_target

EXIT_CHANNEL_LOST = 70
"""The worker's exit status when the target closed the protocol's descriptors."""


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


def digest(messages: Any, ignore: frozenset[str]) -> str:
    """A fingerprint of a history, annotation keys left out."""
    if isinstance(messages, list):
        messages = [
            {k: v for k, v in m.items() if k not in ignore} if isinstance(m, dict) else m
            for m in messages
        ]
    text = json.dumps(messages, sort_keys=True, default=_fallback, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Worker:
    def __init__(self) -> None:
        self.target: Target | None = None
        self.manager: Any = None
        self.recorder = EventRecorder()
        self.ignore: frozenset[str] = frozenset()
        self.sent_events = 0

    async def handle(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        if op == "load":
            self.target = load_target(args.get("target"), args.get("config"))
            self.ignore = frozenset(args.get("ignore", ()))
            return {
                "spec": self.target.spec,
                "kind": self.target.kind,
                "events": self.target.observes_events,
            }
        if op == "build":
            assert self.target is not None, "load first"
            await _close(self.manager)
            await self.target.close(self.manager)  # the cleanups its mount() registered
            self.manager = None
            self.recorder = EventRecorder()
            self.sent_events = 0
            self.manager = await self.target.build(self.recorder)
            return {}
        return await getattr(self, f"op_{op}")(**args)

    # Each op returns the value the parent needs; the digest and events are added after.

    async def op_add(self, message: Any) -> None:
        await self.manager.add_message(message)

    async def op_add_then_edit(self, message: Any) -> str:
        """Returns the history's digest before the edit, to tell a bad add from a leak."""
        await self.manager.add_message(message)
        before = digest(to_json(await self.manager.get_messages()), self.ignore)
        edit_in_place(message)
        return before

    async def op_add_concurrently(self, messages: list[Any]) -> None:
        await asyncio.gather(*(self.manager.add_message(m) for m in messages))

    async def op_add_bad(self, message: Any) -> dict[str, str] | None:
        try:
            await self.manager.add_message(message)
        except MemoryError:
            raise
        except Exception as exc:
            return {"type": type(exc).__name__, "message": _text(exc)[:300]}
        return None

    async def op_request(self, budget: int | None, defaults: dict[str, Any] | None) -> Any:
        return to_json(await self._request(budget, defaults))

    async def op_request_then_edit(
        self, budget: int | None, defaults: dict[str, Any] | None
    ) -> Any:
        """The view as returned, and the history's digest before the caller's edit."""
        view = await self._request(budget, defaults)
        snapshot = to_json(view)
        before = digest(to_json(await self.manager.get_messages()), self.ignore)
        edit_in_place(view)
        return {"view": snapshot, "before": before}

    async def _request(self, budget: int | None, defaults: dict[str, Any] | None) -> Any:
        """With a budget, with a provider, or with neither (the manager's own fallback)."""
        if defaults is not None:
            return await self.manager.get_messages_for_request(provider=_Provider(defaults))
        if budget is not None:
            return await self.manager.get_messages_for_request(token_budget=budget)
        return await self.manager.get_messages_for_request()

    async def op_get(self) -> Any:
        return to_json(await self.manager.get_messages())

    async def op_get_then_edit(self) -> Any:
        history = await self.manager.get_messages()
        snapshot = to_json(history)
        edit_in_place(history)
        return snapshot

    async def op_set(self, messages: list[Any]) -> None:
        await self.manager.set_messages(messages)

    async def op_set_then_edit(self, messages: list[Any]) -> str:
        """Returns the history's digest before the caller edits the list it passed."""
        await self.manager.set_messages(messages)
        before = digest(to_json(await self.manager.get_messages()), self.ignore)
        edit_in_place(messages)
        return before

    async def op_clear(self) -> None:
        await self.manager.clear()

    async def state(self) -> dict[str, Any]:
        """The events since the last answer and the history's digest."""
        events = self.recorder.events[self.sent_events :]
        self.sent_events = len(self.recorder.events)
        try:
            history_digest = digest(to_json(await self.manager.get_messages()), self.ignore)
        except MemoryError:
            raise
        except Exception as exc:
            history_digest = f"get_messages() raised {type(exc).__name__}: {_text(exc)}"
        return {"events": to_json(events), "digest": history_digest}


class _Provider:
    """A provider whose ``get_info().defaults`` gives the budget."""

    def __init__(self, defaults: dict[str, Any]) -> None:
        self._info = type("ProviderInfo", (), {"defaults": defaults, "id": "conformance"})()

    def get_info(self) -> Any:
        return self._info


async def _close(manager: Any) -> None:
    """Close the previous run's manager if it can be (a file it holds, a connection); its
    failure to close is no failure of the contract, so it is not reported."""
    close = getattr(manager, "close", None) or getattr(manager, "aclose", None)
    if not callable(close):
        return
    try:
        result = close()
        if inspect.isawaitable(result):
            await result
    except Exception:
        pass


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
    else:
        kind = "raised"  # any other exception, asyncio.CancelledError included
    answer = {"ok": False, "kind": kind, "type": type(exc).__name__}
    try:
        answer["message"] = _text(exc)[:2000]
        answer["traceback"] = "".join(traceback.format_exception(exc))[-6000:]
    except MemoryError:
        pass  # a short answer is better than none
    return answer


async def respond(worker: Worker, op: str, args: dict[str, Any]) -> dict[str, Any]:
    """The answer to one request: a value or what was raised, then events and digest."""
    try:
        value = await worker.handle(op, args)
        answer: dict[str, Any] = {"ok": True, "value": value}
        if op not in ("load", "build") and worker.manager is not None:
            answer.update(await worker.state())
        return answer
    except BaseException as exc:
        answer = _error(exc)
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
        text = json.dumps({"ok": False, "kind": "memory", "type": "MemoryError"})
    except Exception as exc:
        text = json.dumps(
            {"ok": False, "kind": "raised", "type": "UnserialisableAnswer", "message": _text(exc)}
        )
    return prefix + text.encode("utf-8", "surrogatepass") + b"\n"


def _garbage(line: bytes, prefix: bytes) -> dict[str, Any]:
    """The answer to a request line that is not ours: the target wrote into the channel.
    The message shows what it wrote, up to where a request of ours begins."""
    ours = line.find(prefix)
    return {"ok": False, "kind": "protocol", "message": repr(line[: ours if ours > 0 else 60][:60])}


async def serve(requests: Any, answers: Any) -> None:
    """Answer requests until the parent closes the channel (or the target breaks it)."""
    worker = Worker()
    loop = asyncio.get_running_loop()
    try:
        prefix = requests.readline().rstrip(b"\n") + b" "
        while True:
            line = await loop.run_in_executor(None, requests.readline)
            if not line:  # the parent is done: let the last manager release what it holds
                await _close(worker.manager)
                if worker.target is not None:
                    await worker.target.close(worker.manager)  # what its mount() registered
                return
            if not line.startswith(prefix):
                answer = _garbage(line, prefix)
            else:
                try:
                    request = json.loads(line[len(prefix) :].decode("utf-8", "surrogatepass"))
                    op, args = request["op"], request.get("args", {})
                except (ValueError, KeyError, TypeError):
                    answer = _garbage(line, prefix)
                else:
                    answer = await respond(worker, op, args)
            answers.write(encode(answer, prefix))
            answers.flush()
            if answer.get("kind") in ("exit", "memory"):
                os._exit(3)
    except (OSError, ValueError) as exc:  # the target closed or replaced our descriptors
        sys.stderr.write(f"ctxkit worker: the protocol channel is gone: {exc}\n")
        os._exit(EXIT_CHANNEL_LOST)


def main() -> None:
    try:
        requests, answers = (int(fd) for fd in sys.argv[1:3])
    except ValueError:
        sys.exit("usage: python -m ctxkit.conformance.worker REQUESTS_FD ANSWERS_FD")
    for fd in (requests, answers):
        os.set_inheritable(fd, False)  # the target's own children do not get the channel
    asyncio.run(serve(os.fdopen(requests, "rb"), os.fdopen(answers, "wb")))


if __name__ == "__main__":
    main()
