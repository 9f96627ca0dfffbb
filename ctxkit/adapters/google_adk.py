"""Google ADK's context filtering and compaction behind the context contract, run by a real
``Runner``.

ctxkit keeps the history. Before every request the adapter writes it into a fresh ADK session
as events (:func:`to_adk`), runs a real ``Runner`` over a real ``App`` once, with an
``LlmAgent`` whose model (a ``BaseLlm`` of the adapter's) records the ``LlmRequest`` it is given
and answers ``"ok"``, and returns what that model received, converted back (:func:`from_adk`).
So the view is the library's output *and* everything ADK's request pipeline does around it,
exactly as a model class gets it (a provider's own class may still add a content of its own,
e.g. Gemini's "Continue processing previous requests" when the last content is not a user's:
that is the model's, not the framework's). The history's last content, when it is a user's
message or tool results, is the runner's ``new_message``, as in an agent; after an answer (or
with no history) the next turn's message is not known, and the adapter sends a user message
with one empty text part, which ADK stores and leaves out of the contents (no visible part).

:class:`ContextFilter`: ``App(plugins=[ContextFilterPlugin(...)])``. Verified against
google-adk 2.13's source (``plugins/context_filter_plugin.py``):

* The plugin is a ``before_model_callback``. With ``num_invocations_to_keep`` N (``None`` or
  0: no trimming), it counts *invocation starts* in the request's contents (a run of ``user``
  contents with no ``function_response`` part) and, when there are at least N +
  ``remove_amount`` of them, keeps the contents from the N-th newest start, moved left while a
  kept ``function_response`` with an id would lose its call. Then ``custom_filter(contents)``,
  if given, replaces the contents. Any exception inside is logged and the request goes on with
  what was built so far: a filter that fails sends the model more, never an error.
* The token budget plays no part: the plugin counts invocations.

:class:`Compaction`: ``App(events_compaction_config=EventsCompactionConfig(...))``
(``apps/compaction.py``, ``flows/llm_flows/context/_compaction.py``, ``runners.py``):

* After every invocation ``Runner`` runs ``_run_post_invocation_compaction``: with
  ``compaction_interval`` and ``overlap_size``, once that many new invocations have finished it
  summarizes them (and ``overlap_size`` before them) into a compaction event; with
  ``token_threshold`` and ``event_retention_size``, once ADK's estimate of the prompt (its
  characters / 4, or the last response's ``prompt_token_count``) reaches the threshold, it
  summarizes all but the newest ``event_retention_size`` events, the split moved left to keep a
  retained response's call when they carry ids. The token kind also runs before every model
  call (``CompactionRequestProcessor``). A request's contents show each summary in place of the
  events it covers. The adapter replays the history invocation by invocation and runs the
  runner's own post-invocation step between them, as a session that lived through them got.
* Summaries come from ADK's ``LlmEventSummarizer`` over a local model that answers "Recap of N
  lines of conversation.", so what is judged is what ADK chose to summarize.
* The token budget plays no part: triggers are invocations or ADK's own estimate.

Both: before the library, ADK builds the contents from the session (``_get_contents``):
events with no visible part (empty text, thought-only text) are left out, ``function_response``
parts whose call is gone and id-carrying calls without a response are dropped, async responses
are moved after their call, and ``adk-`` call ids are stripped. A valid history's contents pass
unchanged, except an empty text content.

Conversion. Gemini contents (ctxkit's ``gemini`` shape, camelCase or snake_case) become
``google.genai.types.Content`` events: ``user`` contents without function responses are the
user's (``author="user"``, each run of them starting a new ``invocation_id``), model contents
and function responses are the agent's, as ADK writes them; a content without a role is a
user's (the Gemini API's default, and what ``Runner`` makes of a new message). Leading system
messages (the shape's system prompt, written ``{"role": "system", "content": str}``) become
the agent's instruction, given as a function so that ADK injects no session state into it;
they come back at the head of the view when the model's ``system_instruction`` holds them. A
later system message has no place in Gemini contents: it becomes a user text content, a user's
turn to ADK (the adapter's limit). A plain text message (``{"role": "user" | "assistant",
"content": str}``) is a text content of that role (``user``, ``model``). A content the model
receives equal to the one made for a history message comes back as that message, exactly; any
other (a summary) comes back as genai writes it (camelCase).

Options, passed exactly as written (``None`` included). ``ContextFilter``: the plugin's
``num_invocations_to_keep``, ``custom_filter`` (a function of ``list[Content]``, or
``"module:attr"`` naming one), ``name``, ``remove_amount``; not written:
``num_invocations_to_keep=3`` (the plugin's own default, ``None``, trims nothing).
``Compaction``: ``EventsCompactionConfig``'s ``compaction_interval``, ``overlap_size``,
``token_threshold``, ``event_retention_size`` and ``summarizer`` (``"module:attr"`` naming a
``BaseEventsSummarizer``; ``None``: ADK's default, the agent's own model, here the recording
one, whose summaries read "ok"); with no trigger written, the sliding window of ADK's
compaction docs, ``compaction_interval=3, overlap_size=1``; no summarizer written, the recap.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.adapters.base import (
    DEFAULT_MAX_TOKENS,
    StoredHistory,
    import_named,
    library_options,
)
from ctxkit.messages import InvalidMessage, copy_message, inspect_message

__all__ = ["Compaction", "ContextFilter", "Converted", "check_content", "from_adk", "to_adk"]

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


# -- the models ------------------------------------------------------------------------------


@functools.cache
def _recorder_class() -> type:
    """The agent's model: an ADK ``BaseLlm`` that keeps every request it is given and answers
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


@functools.cache
def _recap_class() -> type:
    """The summarizing model: an ADK ``BaseLlm`` that answers a summary request with a
    one-line recap of how many lines of conversation it was given, so that what is judged is
    which events ADK chose to summarize, not a summary's wording."""
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types

    class Recap(BaseLlm):  # type: ignore[misc]
        """Answers ``"Recap of N lines of conversation."``."""

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            prompt = "".join(p.text or "" for c in llm_request.contents for p in c.parts or [])
            lines = prompt.split("\n\n", 1)[-1].count("\n") + 1
            yield LlmResponse(
                content=types.Content(
                    role="model",
                    parts=[types.Part(text=f"Recap of {lines} lines of conversation.")],
                )
            )

    return Recap


# -- the adapters ----------------------------------------------------------------------------


class _AdkAdapter(StoredHistory):
    """A real ADK ``App`` (made by :meth:`_app`) run by a real ``Runner`` over a fresh
    in-memory session of the history for each request (see the module)."""

    name = "google_adk"
    ctxkit_shapes = ("gemini",)

    def __init__(self, max_tokens: int = DEFAULT_MAX_TOKENS, hooks: Any = None) -> None:
        super().__init__(max_tokens, hooks)
        from google.adk.agents import LlmAgent
        from google.adk.runners import Runner
        from google.adk.sessions import InMemorySessionService

        self.model = _recorder_class()(model="ctxkit-recorder")
        self._instruction = ""
        self.agent = LlmAgent(name=AGENT, model=self.model, instruction=self._instruct)
        self.sessions = InMemorySessionService()
        self.runner = Runner(app=self._app(), session_service=self.sessions)
        self._lock = asyncio.Lock()

    def _app(self) -> Any:
        """The ``App`` around :attr:`agent`."""
        raise NotImplementedError

    async def _invocation_done(self, session: Any) -> None:
        """What ADK does to the session after an invocation completes (nothing, by default)."""

    def _instruct(self, context: Any) -> str:
        """The agent's instruction (a function, so ADK injects no session state into it)."""
        return self._instruction

    def check(self, message: Any, index: int | None = None) -> None:
        check_content(message, index)

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
        events = converted.events
        # A user's message or tool results are what the runner is given, as in an agent; after
        # an answer (or nothing) the next turn's message is not known: an empty text, which
        # ADK leaves out of the contents.
        message = events[-1] if events and events[-1].content.role == "user" else None
        stored = events[:-1] if message is not None else events
        session = await self.sessions.create_session(app_name=APP, user_id=USER)
        try:
            for index, event in enumerate(stored):
                if index and event.invocation_id != stored[index - 1].invocation_id:
                    await self._invocation_done(session)
                await self.sessions.append_event(session, event)
            if message is not None:
                if stored and message.invocation_id != stored[-1].invocation_id:
                    await self._invocation_done(session)
                new = message.content
            else:
                if stored and not stored[-1].get_function_calls():
                    await self._invocation_done(session)  # an answered question
                new = types.Content(role="user", parts=[types.Part(text="")])
            del self.model.received[:]
            async for _ in self.runner.run_async(
                user_id=USER, session_id=session.id, new_message=new
            ):
                pass
        finally:
            await self.sessions.delete_session(app_name=APP, user_id=USER, session_id=session.id)
        # The agent's request carries its instruction; a summary request by the agent's own
        # model (a summarizer left to ADK's default) carries none.
        sent = [r for r in self.model.received if r.config and r.config.system_instruction]
        if not sent:
            raise RuntimeError("ADK's runner did not call the agent's model")
        return sent[0], converted

    async def close(self) -> None:
        await self.runner.close()


class ContextFilter(_AdkAdapter):
    """``ContextFilterPlugin`` in a real ADK ``App`` and ``Runner`` (see the module)."""

    name = "google_adk:context_filter"
    OPTIONS = ("num_invocations_to_keep", "custom_filter", "name", "remove_amount")
    DEFAULTS: Mapping[str, Any] = {"num_invocations_to_keep": 3}

    def __init__(
        self, max_tokens: int = DEFAULT_MAX_TOKENS, hooks: Any = None, **options: Any
    ) -> None:
        from google.adk.plugins.context_filter_plugin import ContextFilterPlugin

        self.options = library_options(
            f"{self.name} (ContextFilterPlugin)", options, self.OPTIONS, self.DEFAULTS
        )
        given = dict(self.options)
        if isinstance(given.get("custom_filter"), str):
            given["custom_filter"] = import_named(
                given["custom_filter"], "custom_filter", "a function"
            )
        self.plugin = ContextFilterPlugin(**given)
        super().__init__(max_tokens, hooks)

    def _app(self) -> Any:
        from google.adk.apps import App

        return App(name=APP, root_agent=self.agent, plugins=[self.plugin])


class Compaction(_AdkAdapter):
    """``EventsCompactionConfig`` on a real ADK ``App`` (see the module)."""

    name = "google_adk:compaction"
    OPTIONS = (
        "summarizer",
        "compaction_interval",
        "overlap_size",
        "token_threshold",
        "event_retention_size",
    )
    TRIGGERS = ("compaction_interval", "overlap_size", "token_threshold", "event_retention_size")
    WINDOW: Mapping[str, Any] = {"compaction_interval": 3, "overlap_size": 1}
    """The trigger when none is written: the sliding window of ADK's compaction docs."""

    def __init__(
        self, max_tokens: int = DEFAULT_MAX_TOKENS, hooks: Any = None, **options: Any
    ) -> None:
        from google.adk.apps.app import EventsCompactionConfig
        from google.adk.apps.llm_event_summarizer import LlmEventSummarizer

        written_trigger = any(key in options for key in self.TRIGGERS)
        self.options = library_options(
            f"{self.name} (EventsCompactionConfig)",
            options,
            self.OPTIONS,
            {} if written_trigger else self.WINDOW,
        )
        given = dict(self.options)
        if "summarizer" not in given:
            given["summarizer"] = LlmEventSummarizer(llm=_recap_class()(model="ctxkit-recap"))
        elif isinstance(given["summarizer"], str):
            given["summarizer"] = import_named(given["summarizer"], "summarizer", "a summarizer")
        self.config = EventsCompactionConfig(**given)
        super().__init__(max_tokens, hooks)

    def _app(self) -> Any:
        from google.adk.apps import App

        return App(name=APP, root_agent=self.agent, events_compaction_config=self.config)

    async def _invocation_done(self, session: Any) -> None:
        # What Runner.run_async does after every invocation (sliding-window compaction, or
        # the token-threshold kind when it is configured and triggers).
        await self.runner._run_post_invocation_compaction(session=session)
