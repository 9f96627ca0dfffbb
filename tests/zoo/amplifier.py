"""Amplifier-style modules: ``mount(coordinator, config)`` written the way Amplifier's own
context modules write it, on a correct manager, so a run must pass on amplifier-core's real
coordinator and on ctxkit's stand-in alike.

- mount: what the newest amplifier-module-context-simple's mount() does. It registers an
  ``llm:response`` handler with a priority and a name, mounts the manager at ``context``,
  registers capabilities, and returns an async cleanup that unregisters the handler. The
  manager emits ``context:budget`` whenever its budget changes (a name that is no kernel
  constant) and ``context:pre_compact``/``context:post_compact`` through ``coordinator.hooks``.
  With config ``cleanup_log``, each cleanup appends a line to that file, saying how many
  ``llm:response`` handlers are left (a test reads it to see cleanups run).
- mount_own_event: registers a handler on ``context:post_compact`` that emits the module's own
  ``zoo:compacted``, and a second handler, on ``zoo:compacted``, that counts what it sees.
- on_session_ready: marks the mounted manager ready and emits ``zoo:session_ready``; Amplifier's
  loader calls it after mount().
"""

from __future__ import annotations

from typing import Any

from tests.zoo.base import POST_COMPACT, GoodManager

BUDGET = "context:budget"
LLM_RESPONSE = "llm:response"
METER = "zoo-context-meter"
OWN_EVENT = "zoo:compacted"
READY = "zoo:session_ready"


class MeteredManager(GoodManager):
    """Correct: a GoodManager that announces its budget when it changes and keeps the
    ``usage`` that ``llm:response`` events carry (context-simple's real-usage meter)."""

    def __init__(self, *, max_tokens: int = 4000, hooks: Any = None) -> None:
        super().__init__(max_tokens=max_tokens, hooks=hooks)
        self.budget_seen: int | None = None
        self.measured: list[Any] = []
        self.handled: list[str] = []
        self.ready = False

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict]:
        budget = self._budget(token_budget, provider)
        if budget != self.budget_seen:
            self.budget_seen = budget
            source = "explicit" if token_budget is not None else "provider" if provider else "max"
            await self._emit(BUDGET, {"budget": budget, "source": source})
        return await super().get_messages_for_request(token_budget, provider)

    async def on_llm_response(self, event: str, data: Any) -> None:
        usage = data.get("usage") if isinstance(data, dict) else None
        self.measured.append(usage)

    def foreground_usage(self) -> Any:
        return self.measured[-1] if self.measured else None


async def mount(coordinator: Any, config: dict[str, Any] | None = None) -> Any:
    config = config or {}
    hooks = getattr(coordinator, "hooks", None)
    manager = MeteredManager(max_tokens=config.get("max_tokens", 4000), hooks=hooks)
    unregister = None
    if hooks is not None:
        unregister = hooks.register(LLM_RESPONSE, manager.on_llm_response, priority=50, name=METER)
    await coordinator.mount("context", manager)
    register_capability = getattr(coordinator, "register_capability", None)
    if callable(register_capability):
        register_capability("context.request_retention", manager.get_messages_for_request)
        register_capability("context.foreground_usage", manager.foreground_usage)

    async def cleanup() -> None:
        if unregister is not None:
            unregister()
        if config.get("cleanup_log"):
            left = hooks.list_handlers(LLM_RESPONSE).get(LLM_RESPONSE, [])
            _note(config["cleanup_log"], f"cleanup: {LLM_RESPONSE} handlers left {len(left)}")

    return cleanup


async def mount_own_event(coordinator: Any, config: dict[str, Any] | None = None) -> None:
    config = config or {}
    hooks = coordinator.hooks
    manager = MeteredManager(max_tokens=config.get("max_tokens", 4000), hooks=hooks)

    async def announce(event: str, data: Any) -> None:
        await hooks.emit(OWN_EVENT, {"after": event, "message_count": data.get("message_count")})

    async def count(event: str, data: Any) -> None:
        manager.handled.append(event)

    hooks.register(POST_COMPACT, announce, priority=10, name="zoo-announce")
    hooks.register(OWN_EVENT, count, name="zoo-count")
    await coordinator.mount("context", manager)


async def on_session_ready(coordinator: Any) -> None:
    manager = coordinator.get("context")
    manager.ready = True
    await coordinator.hooks.emit(READY, {"session_id": coordinator.session_id})


def _note(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as file:
        file.write(line + "\n")
