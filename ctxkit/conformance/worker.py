"""The child process that holds the target: ``python -m ctxkit.conformance.worker``.

The suite never runs a target in its own process: a hang, a crash or ``sys.exit`` in the
target must cost one verdict, not the run. The parent sends one JSON request per line on
stdin; the worker answers one JSON line on a private copy of stdout (the target's own prints go
to stderr). Each answer carries the events emitted since the last one and a digest of
``get_messages()``, so the parent can check non-destructiveness after every step cheaply.
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

from ctxkit.conformance.target import ContractError, EventRecorder, LoadError, Target, load_target


def to_json(value: Any) -> Any:
    """What a target returned, as JSON-ready data (pydantic models and the like as dicts)."""
    return json.loads(json.dumps(value, default=_fallback))


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


def edit_in_place(value: Any) -> None:
    """Scribble over a returned or passed-in structure, the way careless callers do."""
    if isinstance(value, list):
        for item in value:
            edit_in_place(item)
        value.append({"role": "user", "content": "EDITED BY CALLER"})
    elif isinstance(value, dict):
        for key, item in list(value.items()):
            if isinstance(item, str):
                value[key] = item + " EDITED"
            else:
                edit_in_place(item)
        value["metadata_edit"] = True


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
        except Exception as exc:
            return {"type": type(exc).__name__, "message": str(exc)[:300]}
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
        except Exception as exc:
            history_digest = f"get_messages() raised {type(exc).__name__}: {exc}"
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


def _error(exc: BaseException, kind: str) -> dict[str, Any]:
    return {
        "ok": False,
        "kind": kind,
        "type": type(exc).__name__,
        "message": str(exc)[:2000],
        "traceback": "".join(traceback.format_exception(exc))[-6000:],
    }


async def serve(protocol: Any) -> None:
    worker = Worker()
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:  # the parent is done: let the last manager release what it holds
            await _close(worker.manager)
            if worker.target is not None:
                await worker.target.close(worker.manager)  # the cleanups its mount() registered
            return
        request = json.loads(line)
        op = request["op"]
        try:
            value = await worker.handle(op, request.get("args", {}))
            answer: dict[str, Any] = {"ok": True, "value": value}
            if op not in ("load", "build") and worker.manager is not None:
                answer.update(await worker.state())
        except LoadError as exc:
            answer = _error(exc, "load")
        except ContractError as exc:
            answer = _error(exc, "contract")
        except (SystemExit, KeyboardInterrupt) as exc:
            answer = _error(exc, "exit")
        except Exception as exc:
            answer = _error(exc, "raised")
            if worker.manager is not None:
                answer.update(await worker.state())
        protocol.write(json.dumps(answer, default=_fallback) + "\n")
        protocol.flush()
        if answer.get("kind") == "exit":
            os._exit(3)


def main() -> None:
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", errors="surrogatepass")
    os.dup2(2, 1)  # whatever the target prints goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    asyncio.run(serve(protocol))


if __name__ == "__main__":
    main()
