"""Which program speaks the protocol for a target: the Python worker, a ``--command`` the user
names, the Node harness for a JavaScript module, or the gRPC bridge for ``grpc://HOST:PORT``.

The runner only ever talks the protocol (``conformance/PROTOCOL.md``); a route says what to
start and what to say in ``hello``.
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from ctxkit.conformance.targets.worker_client import PYTHON_WORKER

__all__ = ["JS_SUFFIXES", "NODE_HARNESS", "Route", "RouteError", "route_for"]

JS_SUFFIXES = (".mjs", ".js", ".cjs")

NODE_HARNESS = Path(__file__).parent.parent / "spec" / "harnesses" / "node" / "harness.mjs"
"""The Node implementation of the protocol, shipped with ctxkit."""


class RouteError(Exception):
    """The route cannot be taken: a bad ``--command``, no ``node``. The message says why."""


@dataclass(frozen=True)
class Route:
    """``command`` to start; ``target`` to name in ``hello``; ``kind`` for messages."""

    command: tuple[str, ...]
    target: str | None
    kind: str = "python"

    @property
    def hint(self) -> str:
        """What to check when the program did not get through ``hello``."""
        if self.kind != "command":
            return ""
        return (
            "\n  (does it speak ctxkit's conformance protocol? It must answer the hello "
            "request on the descriptors named by CTXKIT_PROTOCOL_FDS; see PROTOCOL.md)"
        )

    @property
    def shared(self) -> str:
        """Why every worker of a run would reach the same instance of the target (a server
        they connect to, a program ctxkit does not know), or "" when each builds its own: then
        several may run at once (:mod:`ctxkit.conformance.schedule`)."""
        if (self.target or "").startswith("grpc://"):
            return "a gRPC server, one for every worker"
        if self.kind == "command":
            return "a --command program, which may hold one instance for every worker"
        return ""

    def cannot_start(self, exc: OSError) -> str:
        """Why the program did not start, as a sentence that says what to do."""
        if self.kind == "node":
            return f"the Node harness could not start: {exc}. Is Node.js 18 or newer installed?"
        return f"{shlex.join(self.command)} could not start: {exc}"


def _is_javascript(target: str) -> bool:
    path = target.rsplit(":", 1)[0] if not target.endswith(JS_SUFFIXES) else target
    return path.endswith(JS_SUFFIXES)


def route_for(target: str | None, command: str | None = None) -> Route:
    """The route for a TARGET string and an optional ``--command``. Raises RouteError."""
    if command is not None:
        try:
            argv = tuple(shlex.split(command))
        except ValueError as exc:
            raise RouteError(f"--command {command!r} is not a command line: {exc}") from None
        if not argv:
            raise RouteError("--command is empty; give the program that speaks the protocol")
        if shutil.which(argv[0]) is None:
            raise RouteError(f"--command: no program {argv[0]!r} on PATH (or it is not executable)")
        return Route(argv, target, "command")
    if target is not None and (_is_javascript(target) or target.startswith("js:")):
        node = shutil.which("node")
        if node is None:
            raise RouteError(
                f"{target}: a JavaScript target runs under Node.js, and `node` is not on PATH. "
                "Install Node.js 18 or newer (https://nodejs.org, or your system's nodejs "
                "package)"
            )
        return Route((node, str(NODE_HARNESS)), target, "node")
    return Route(PYTHON_WORKER, target, "python")
