"""Google ADK's ``ContextFilterPlugin`` behind the context contract, run by a real ``Runner``.

ctxkit keeps the history. Before every request the adapter writes it into a fresh ADK session
as events (:func:`to_adk`), runs a real ``Runner`` over ``App(plugins=[ContextFilterPlugin(
...)])`` once, with an ``LlmAgent`` whose model (a ``BaseLlm`` of the adapter's) records the
``LlmRequest`` it is given and answers ``"ok"``, and returns what that model received,
converted back (:func:`from_adk`). So the view is the plugin's output *and* everything ADK's
request pipeline does around it, exactly as a model class gets it (a provider's own class may
still add a content of its own, e.g. Gemini's "Continue processing previous requests" when the
last content is not a user's: that is the model's, not the framework's).

Verified against google-adk 2.13's source (``plugins/context_filter_plugin.py``,
``flows/llm_flows/context/_contents.py``, ``flows/llm_flows/tools/_rearranger.py``):

* The plugin is a ``before_model_callback``. With ``num_invocations_to_keep`` N (``None`` or
  0: no trimming), it counts *invocation starts* in the request's contents (a run of ``user``
  contents with no ``function_response`` part) and, when there are at least N +
  ``remove_amount`` of them, keeps the contents from the N-th newest start, moved left while a
  kept ``function_response`` with an id would lose its call. Then ``custom_filter(contents)``,
  if given, replaces the contents. Any exception inside is logged and the request goes on with
  what was built so far: a filter that fails sends the model more, never an error.
* The token budget plays no part: the plugin counts invocations.
* Before the plugin, ADK builds the contents from the session (``_get_contents``): events
  with no visible part (empty text, thought-only text) are left out, ``function_response``
  parts whose call is gone and ids-carrying calls without a response are dropped, async
  responses are moved after their call, and ``adk-`` call ids are stripped. The adapter's
  history is valid, so these repair nothing here; an empty text content is left out.
* The model is only called with a new message (or to resume an invocation): the adapter sends
  a user message with one empty text part, which ADK stores and then leaves out of the
  contents (it has no visible part), so the model receives exactly the history's contents.

Conversion. Gemini contents (ctxkit's ``gemini`` shape, camelCase or snake_case) become
``google.genai.types.Content`` events: ``user`` contents without function responses are the
user's (``author="user"``, each run of them starting a new ``invocation_id``), model contents
and function responses are the agent's, as ADK writes them; a content without a role is a
user's (the Gemini API's default, and what ``Runner`` makes of a new message). Leading system
messages (the shape's system prompt, written ``{"role": "system", "content": str}``) become
the agent's instruction, given as a function so that ADK injects no session state into it;
they come back at the head of the view when the model's ``system_instruction`` holds them. A
later system message has no place in Gemini contents: it becomes a user text content, which
the plugin counts as a user's turn (the adapter's limit). A plain text message (``{"role":
"user" | "assistant", "content": str}``) is a text content of that role (``user``, ``model``).
A content the model receives equal to the one made for a history message comes back as that
message, exactly; any other comes back as genai writes it (camelCase).

Options: ``ContextFilterPlugin``'s own, passed exactly as written (``None`` included):
``num_invocations_to_keep``, ``custom_filter`` (a function of ``list[Content]``, or
``"module:attr"`` naming one), ``name``, ``remove_amount``. Not written:
``num_invocations_to_keep=3`` (the plugin's own default, ``None``, trims nothing), the rest
ADK's defaults.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.adapters.base import DEFAULT_MAX_TOKENS, LibraryAdapter, library_options
from ctxkit.messages import InvalidMessage, copy_message, inspect_message, validate_history

__all__ = ["ContextFilter", "Converted", "check_content", "from_adk", "to_adk"]

APP = "ctxkit"
AGENT = "agent"
USER = "user"
ANSWER = "ok"
"""What the recording model answers (never seen: the view is what it was sent)."""
START = 1_735_689_600.0
"""The first event's timestamp (2025-01-01); each next one is a second later."""

_SYSTEM_ROLES = frozenset({"system", "developer"})
_PLAIN_ROLES = {"user": "user", "assistant": "model"}
"""The roles of a plain text message (``{"role", "content": str}``) and their Gemini roles."""


def _is_system(message: Mapping[str, Any]) -> bool:
    return message.get("role") in _SYSTEM_ROLES and "parts" not in message


def _is_plain(message: Mapping[str, Any]) -> bool:
    """A text message written ``{"role", "content": str}``: a system message (the Gemini
    shape's own form for one), or a user's or an assistant's text."""
    return (
        set(message) <= {"role", "content"}
        and isinstance(message.get("content"), str)
        and (message.get("role") in _SYSTEM_ROLES or message.get("role") in _PLAIN_ROLES)
    )


def check_content(message: Any, index: int | None = None) -> None:
    """Refuse what is neither a Gemini content that ``google.genai.types.Content`` takes nor a
    plain text message (``{"role": "system" | "developer" | "user" | "assistant", "content":
    str}``)."""
    info = inspect_message(message, index)
    if _is_plain(message):
        return
    if _is_system(message):
        raise InvalidMessage(
            "a system message beside Gemini contents is written {'role': 'system', 'content': str}",
            index=index,
        )
    if info.form != "gemini":
        raise InvalidMessage(
            f"is written in the {info.form} shape; an ADK session holds Gemini contents "
            "(ctxkit.shapes.convert writes a history as 'gemini')",
            index=index,
        )
    from google.genai import types
    from pydantic import ValidationError

    try:
        types.Content.model_validate(message)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidMessage(
            f"is not a google.genai Content: {first['msg']}", index=index, field=where
        ) from None


# -- ctxkit -> ADK ---------------------------------------------------------------------------


@dataclass
class Converted:
    """A history as ADK sees it: the instruction, one event per later message, and the
    content made for each (to know a content the model receives again)."""

    instruction: str
    system: list[dict[str, Any]]
    events: list[Any] = field(default_factory=list)
    made: list[tuple[int, Any]] = field(default_factory=list)
    """(history index, the Content made for that message), in history order."""


def _content(message: Mapping[str, Any]) -> Any:
    from google.genai import types

    if "parts" not in message:  # a plain text message; a system message is a user's text
        role = _PLAIN_ROLES.get(message["role"], "user")
        return types.Content(role=role, parts=[types.Part(text=message["content"])])
    content = types.Content.model_validate(message)
    if content.role is None:
        content.role = "user"
    return content


def _is_users(content: Any) -> bool:
    return content.role == "user" and not any(p.function_response for p in content.parts or [])


def to_adk(history: Sequence[dict[str, Any]]) -> Converted:
    """ADK session events for a JSON history (see the module)."""
    from google.adk.events import Event

    lead = 0
    while lead < len(history) and _is_system(history[lead]):
        lead += 1
    system = [copy_message(m) for m in history[:lead]]
    converted = Converted("\n".join(m["content"] for m in system), system)
    invocation, users_before = 0, False
    for index in range(lead, len(history)):
        content = _content(history[index])
        users = _is_users(content)
        if users and not users_before:
            invocation += 1
        users_before = users
        converted.made.append((index, content))
        converted.events.append(
            Event(
                author=USER if users else AGENT,
                invocation_id=f"e-{invocation}",
                content=content.model_copy(deep=True),
                timestamp=START + index,
            )
        )
    return converted


# -- ADK -> ctxkit ---------------------------------------------------------------------------


def from_adk(
    contents: Sequence[Any],
    system_instruction: Any,
    converted: Converted,
    history: Sequence[dict[str, Any]],
) -> list[dict[str, Any]]:
    """JSON messages for what the model received: the leading system messages when its system
    instruction holds them, then each content as the history message it equals (the first
    from where the last one matched, then any), else as genai writes it."""
    found: list[dict[str, Any]] = []
    if converted.system and converted.instruction in _text_of(system_instruction):
        found.extend(copy_message(m) for m in converted.system)
    last = 0
    for content in contents:
        equal = [(i, made) for i, made in converted.made if made == content]
        match = next((i for i, _ in equal if i >= last), equal[0][0] if equal else None)
        if match is None:
            found.append(content.model_dump(mode="json", exclude_none=True, by_alias=True))
            continue
        found.append(copy_message(history[match]))
        last = match + 1
    return found


def _text_of(instruction: Any) -> str:
    """A system instruction's text, whether ADK left it a string or a Content."""
    if instruction is None:
        return ""
    if isinstance(instruction, str):
        return instruction
    parts = getattr(instruction, "parts", None) or []
    return "\n".join(p.text for p in parts if getattr(p, "text", None))


# -- the recording model ---------------------------------------------------------------------


@functools.cache
def _recorder_class() -> type:
    """The adapter's model: an ADK ``BaseLlm`` that keeps every request it is given and answers
    ``"ok"``. Made once, on first use, so that importing this module needs no ADK."""
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types
    from pydantic import Field

    class Recorder(BaseLlm):  # type: ignore[misc]
        """Keeps the requests it is sent (``received``); answers every one with ``"ok"``."""

        received: list[Any] = Field(default_factory=list)

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            self.received.append(llm_request)
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(text=ANSWER)]),
                usage_metadata=types.GenerateContentResponseUsageMetadata(
                    prompt_token_count=0, candidates_token_count=1, total_token_count=1
                ),
            )

    return Recorder


# -- the adapter -----------------------------------------------------------------------------


def _load(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise TypeError(f"custom_filter must be a function or 'module:attr', got {spec!r}")
    target: Any = importlib.import_module(module)
    for name in attr.split("."):
        target = getattr(target, name)
    return target


class ContextFilter(LibraryAdapter):
    """``ContextFilterPlugin`` in a real ADK ``App`` and ``Runner`` (see the module)."""

    name = "google_adk:context_filter"
    SHAPES = ("gemini",)
    OPTIONS = ("num_invocations_to_keep", "custom_filter", "name", "remove_amount")
    DEFAULTS: Mapping[str, Any] = {"num_invocations_to_keep": 3}

    def __init__(
        self, max_tokens: int = DEFAULT_MAX_TOKENS, hooks: Any = None, **options: Any
    ) -> None:
        super().__init__(max_tokens, hooks)
        from google.adk.agents import LlmAgent
        from google.adk.apps import App
        from google.adk.plugins.context_filter_plugin import ContextFilterPlugin
        from google.adk.runners import Runner
        from google.adk.sessions import InMemorySessionService

        self.options = library_options(
            f"{self.name} (ContextFilterPlugin)", options, self.OPTIONS, self.DEFAULTS
        )
        given = dict(self.options)
        if isinstance(given.get("custom_filter"), str):
            given["custom_filter"] = _load(given["custom_filter"])
        self.plugin = ContextFilterPlugin(**given)
        self.model = _recorder_class()(model="ctxkit-recorder")
        self._instruction = ""
        self.agent = LlmAgent(name=AGENT, model=self.model, instruction=self._instruct)
        self.sessions = InMemorySessionService()
        self.runner = Runner(
            app=App(name=APP, root_agent=self.agent, plugins=[self.plugin]),
            session_service=self.sessions,
        )
        self._history: list[dict[str, Any]] = []
        self._lock = asyncio.Lock()

    def _instruct(self, context: Any) -> str:
        """The agent's instruction (a function, so ADK injects no session state into it)."""
        return self._instruction

    async def add_message(self, message: dict[str, Any]) -> None:
        check_content(message)
        self._history.append(copy_message(message))

    async def get_messages(self) -> list[dict[str, Any]]:
        return copy_message(self._history)

    async def set_messages(self, messages: Sequence[dict[str, Any]]) -> None:
        messages = list(messages)
        validate_history(messages)
        for index, message in enumerate(messages):
            check_content(message, index)
        self._history = [copy_message(m) for m in messages]

    async def clear(self) -> None:
        self._history = []

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict[str, Any]]:
        history = copy_message(self._history)
        async with self._lock:  # one model, one request at a time
            request, converted = await self._sent(history)
        return from_adk(request.contents, request.config.system_instruction, converted, history)

    async def _sent(self, history: list[dict[str, Any]]) -> tuple[Any, Converted]:
        """The request the agent's model is sent for ``history``, and the conversion."""
        from google.genai import types

        converted = to_adk(history)
        self._instruction = converted.instruction
        session = await self.sessions.create_session(app_name=APP, user_id=USER)
        try:
            for event in converted.events:
                await self.sessions.append_event(session, event)
            del self.model.received[:]
            nothing = types.Content(role="user", parts=[types.Part(text="")])
            async for _ in self.runner.run_async(
                user_id=USER, session_id=session.id, new_message=nothing
            ):
                pass
        finally:
            await self.sessions.delete_session(app_name=APP, user_id=USER, session_id=session.id)
        if not self.model.received:
            raise RuntimeError("ADK's runner did not call the model")
        return self.model.received[0], converted

    async def close(self) -> None:
        await self.runner.close()
