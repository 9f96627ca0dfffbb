"""The OpenAI Agents SDK's ``SQLiteSession`` behind the context contract, read as ``Runner``
reads it.

The session is the history: ``add_message`` is ``add_items([m])``, ``set_messages`` clears the
session and adds the messages, ``get_messages`` reads every item (``ctxkit.forms
.SessionManager``). A request's view is what ``Runner.run`` makes of the session before its
first model call: ``agents.run_internal.session_persistence.prepare_input_with_session(input,
session, None, None)``, the SDK's own function, called as ``run.py`` calls it with no
``RunConfig``, with no new input (the newest message is already in the session).

Verified against openai-agents 0.24's source:

* ``prepare_input_with_session`` resolves ``session.session_settings`` (overlaid with
  ``RunConfig.session_settings``); with a ``limit`` it reads ``get_items(limit=limit)``, the
  newest ``limit`` items, else ``get_items()``.
* It then normalizes the items (``ensure_input_item_format``, ``strip_internal_input_item
  _metadata``, the reasoning-id policy), and ``drop_orphan_function_calls`` removes tool calls
  that have no output, and, when a limit was applied (``output_pruning_indexes``), outputs whose
  call the limit cut off, with a reasoning item that preceded a dropped call. Then
  ``normalize_input_items_for_api`` and ``deduplicate_input_items_preferring_latest``.
  So the split openai-agents-python #4322 reports (a limit that begins the input with a
  ``function_call_output`` whose call was left out) no longer reaches the model in 0.24.

Items are Responses API input items (ctxkit's ``responses`` shape), stored as JSON and read
back unchanged. A message in another shape is refused on add rather than converted: the
session would then hold something other than what was added. A plain ``{"role", "content":
str}`` message is a valid Responses item (``EasyInputMessage``) and is taken.

Option: ``limit``, passed to ``SessionSettings(limit=...)`` exactly as written (``None``: every
item). Not written: the SDK's default, ``SessionSettings()`` (no limit).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxkit.adapters.base import DEFAULT_MAX_TOKENS, LibraryAdapter, library_options
from ctxkit.forms import SessionManager
from ctxkit.messages import InvalidMessage, copy_message, inspect_message, validate_history

__all__ = ["SQLiteSessionAdapter", "bug_report", "check_item"]

_PLAIN_ROLES = frozenset({"system", "developer", "user", "assistant"})


def check_item(message: Any, index: int | None = None) -> None:
    """Refuse a message that is not a Responses input item (a plain role and text message is
    one)."""
    info = inspect_message(message, index)
    if info.form == "responses":
        return
    if (
        set(message) <= {"role", "content"}
        and message.get("role") in _PLAIN_ROLES
        and isinstance(message.get("content"), str)
    ):
        return
    raise InvalidMessage(
        f"is written in the {info.form} shape; an Agents SDK session holds Responses API items "
        "(ctxkit.shapes.convert writes a history as 'responses')",
        index=index,
    )


class SQLiteSessionAdapter(LibraryAdapter):
    """``agents.SQLiteSession`` (in memory) with ``SessionSettings(limit=...)``, read as
    ``Runner`` reads it (see the module)."""

    name = "openai_agents:sqlite_session"
    ctxkit_shapes = ("responses",)
    OPTIONS = ("limit",)

    def __init__(
        self, max_tokens: int = DEFAULT_MAX_TOKENS, hooks: Any = None, **options: Any
    ) -> None:
        super().__init__(max_tokens, hooks)
        from agents import SessionSettings, SQLiteSession

        self.options = library_options(f"{self.name} (SessionSettings)", options, self.OPTIONS)
        self.settings = SessionSettings(**self.options)
        self.session = SQLiteSession("ctxkit", session_settings=self.settings)
        self._store = SessionManager(self.session)

    async def add_message(self, message: dict[str, Any]) -> None:
        check_item(message)
        await self._store.add_message(copy_message(message))

    async def get_messages(self) -> list[dict[str, Any]]:
        return await self._store.get_messages()

    async def set_messages(self, messages: Sequence[dict[str, Any]]) -> None:
        messages = list(messages)
        validate_history(messages)
        for index, message in enumerate(messages):
            check_item(message, index)
        await self._store.set_messages([copy_message(m) for m in messages])

    async def clear(self) -> None:
        await self._store.clear()

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict[str, Any]]:
        from agents.run_internal.session_persistence import prepare_input_with_session

        prepared, _ = await prepare_input_with_session([], self.session, None, None)
        return list(prepared) if isinstance(prepared, list) else []

    async def close(self) -> None:
        self.session.close()


def _reasoning_cut(history: list[dict[str, Any]], view: list[Any]) -> bool:
    """A call in ``view`` that history shows right after a reasoning item, without it."""
    for index, item in enumerate(history[1:], start=1):
        before = history[index - 1]
        if not (isinstance(item, dict) and item.get("type") in ("function_call",)):
            continue
        if not (isinstance(before, dict) and before.get("type") == "reasoning"):
            continue
        ids = [v.get("id") if isinstance(v, dict) else None for v in view]
        if item.get("id") in ids:
            at = ids.index(item.get("id"))
            if at == 0 or ids[at - 1] != before.get("id"):
                return True
    return False


def bug_report(property_id: str, cell: Any) -> str:
    """An upstream report, openai-agents only: the history in a ``SQLiteSession`` and the
    largest ``SessionSettings(limit=...)`` at which ``Runner.run`` sends the model a
    ``function_call`` without the ``reasoning`` item that preceded it. Empty when the failure
    is not that."""
    import asyncio

    from agents import SessionSettings, SQLiteSession
    from agents.run_internal.session_persistence import prepare_input_with_session

    from ctxkit.adapters.reports import history_before_view
    from ctxkit.literal import literal

    if property_id != "tool_pair_integrity" or not cell.trace:
        return ""
    history, _ = history_before_view(cell.trace)

    async def view(limit: int) -> list[Any]:
        session = SQLiteSession("report", session_settings=SessionSettings(limit=limit))
        await session.add_items(history)
        prepared, _ = await prepare_input_with_session([], session, None, None)
        return list(prepared)

    found = next(
        (n for n in range(len(history), 0, -1) if _reasoning_cut(history, asyncio.run(view(n)))),
        None,
    )
    if found is None:
        return ""
    listed = "\n".join(f"    {literal(item, 8, 60)}," for item in history)
    return f"""### A session limit sends a `function_call` without its `reasoning` item

With `SessionSettings(limit={found})`, `Runner.run` reads the newest {found} session items and
drops outputs whose call the limit cut off (`drop_orphan_function_calls`), but not a
`function_call` whose preceding `reasoning` item the limit cut off. The Responses API rejects
that input: "Item 'fc_...' of type 'function_call' was provided without its required
'reasoning' item: 'rs_...'". Found by ctxkit's conformance suite; this reproducer uses
openai-agents only and sends nothing (the model records its input and stops the run).

```python
import asyncio

from agents import Agent, Runner, SessionSettings, SQLiteSession
from agents.models.interface import Model


class Sent(Exception):
    pass


class RecordInput(Model):
    async def get_response(self, system_instructions, input, *args, **kwargs):
        raise Sent(input)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


history = [
{listed}
]


async def main():
    session = SQLiteSession("report", session_settings=SessionSettings(limit={found}))
    await session.add_items(history)
    try:
        await Runner.run(Agent("a", model=RecordInput()), [], session=session)
    except Sent as sent:
        items = sent.args[0]
    before = {{
        item["id"]: history[i - 1].get("id")
        for i, item in enumerate(history)
        if i and item.get("type") == "function_call" and "id" in item
        and history[i - 1].get("type") == "reasoning"
    }}
    ids = [item.get("id") for item in items]
    for call, reasoning in before.items():
        if call in ids:
            at = ids.index(call)
            assert at and ids[at - 1] == reasoning, f"{{call}} is sent without {{reasoning}}"


asyncio.run(main())
```

Expected: a view that keeps or drops a reasoning item together with the item it preceded, as
`drop_orphan_function_calls` already does for a call it drops.
"""
