"""Replay candidates that attack the process that runs them: each keeps every message (so its
figures, until it strikes, are the recording's) and, at the second view of a conversation,
does what its ``how`` says. Not members of ``ZOO``: tests/test_replay_hostile.py replays one
recording through all of them at once, with a well-behaved candidate beside them.

``how``: ``exit0`` (sys.exit(0)), ``exit3`` (sys.exit(3)), ``os_exit`` (os._exit(0)),
``sigkill`` (kills its own process), ``sleep`` (time.sleep for ever), ``await`` (awaits a
future that never ends), ``spin`` (a CPU loop), ``cancelled`` (raises CancelledError),
``base`` (raises a bare BaseException), ``raises`` (ValueError, in every conversation),
``leaks`` (50 MB more on every call, until the memory cap), ``prints`` (4 MB to stdout on every
call), ``closes_stdout`` (closes fd 1 and 2, then answers), ``str`` (returns a str), ``none``
(returns None), ``close_exit`` (correct, but ``close()`` raises SystemExit(7)). Their
JavaScript kin are in tests/zoo_js/replay_hostile.mjs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from typing import Any

STRIKES_AT = 2
"""The view of each conversation at which the candidate strikes (1-based)."""

_LEAKED: list[bytes] = []


class Hostile:
    def __init__(self, how: str) -> None:
        self.how = how
        self.messages: list[Any] = []
        self.views = 0

    async def add_message(self, message: Any) -> None:
        self.messages.append(message)

    async def get_messages(self) -> list[Any]:
        return list(self.messages)

    async def set_messages(self, messages: list[Any]) -> None:
        self.messages = list(messages)

    async def clear(self) -> None:
        self.messages = []

    async def get_messages_for_request(self, token_budget: Any = None, provider: Any = None) -> Any:
        self.views += 1
        if self.how == "raises":
            raise ValueError("this candidate cannot make a view")
        if self.how in ("leaks", "prints"):
            self._every_call()
        elif self.views == STRIKES_AT:
            return await self._strike()
        return list(self.messages)

    def _every_call(self) -> None:
        if self.how == "leaks":
            _LEAKED.append(os.urandom(50 << 20))
        else:
            sys.stdout.write("x" * (4 << 20) + "\n")
            sys.stdout.flush()

    async def _strike(self) -> Any:
        how = self.how
        if how == "exit0":
            sys.exit(0)
        if how == "exit3":
            sys.exit(3)
        if how == "os_exit":
            os._exit(0)
        if how == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if how == "sleep":
            time.sleep(3600)  # noqa: ASYNC251 (the point: a synchronous hang)
        if how == "await":
            await asyncio.get_running_loop().create_future()
        if how == "spin":
            while True:
                pass
        if how == "cancelled":
            raise asyncio.CancelledError()
        if how == "base":
            raise BaseException("a bare BaseException")
        if how == "closes_stdout":  # once: the next conversation finds them closed
            with contextlib.suppress(OSError):
                os.close(1)
                os.close(2)
            return list(self.messages)
        if how == "str":
            return "the view, as one string"
        if how == "none":
            return None
        return list(self.messages)  # close_exit: strikes when closed

    def close(self) -> None:
        if self.how == "close_exit":
            raise SystemExit(7)


def exits_five(messages: list[Any]) -> list[Any]:
    """A history function that ends the process on its second view."""
    exits_five.calls += 1  # type: ignore[attr-defined]
    if exits_five.calls % STRIKES_AT == 0:  # type: ignore[attr-defined]
        sys.exit(5)
    return list(messages)


exits_five.calls = 0  # type: ignore[attr-defined]
