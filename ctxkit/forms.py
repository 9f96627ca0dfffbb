"""Turning a function or a session into a context manager: the forms a TARGET may take.

Most frameworks do not keep context in an object with the contract's five methods:

* a **function** over the message list decides the view before every model call: pydantic-ai's
  ``history_processors``, LangGraph's ``pre_model_hook``, a hand-written ``trim(history)``.
  :class:`FunctionManager` keeps the history itself and calls the function before every
  request, as those frameworks do;
* a **session** store is read with a limit: the OpenAI Agents SDK's ``Session`` protocol
  (``add_items``, ``get_items(limit)``, ``pop_item``, ``clear_session``).
  :class:`SessionManager` reads it exactly as the SDK's ``Runner`` does;
* a **compacting** manager follows Amplifier's first context contract: ``add_message``,
  ``get_messages``, ``should_compact()``, ``compact()``, ``clear``, where ``compact()``
  rewrites the stored history and ``get_messages()`` is what a request sends.
  :class:`CompactingManager` asks it as that contract's orchestrator did.

Both give the contract's async methods (``add_message``, ``get_messages_for_request``,
``get_messages``, ``set_messages``, ``clear``), so anything that checks or instruments a context
manager takes them. :func:`detect_form` tells the three forms apart; :func:`as_manager` wraps.

Nothing here imports the frameworks it describes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal

from ctxkit.messages import copy_message

__all__ = [
    "COMPACTING_METHODS",
    "CONTRACT_METHODS",
    "FORMS",
    "SESSION_METHODS",
    "CompactingManager",
    "Form",
    "FunctionManager",
    "SessionManager",
    "as_manager",
    "detect_form",
    "session_limit",
]

Form = Literal["contract", "function", "session", "compacting"]
FORMS: tuple[Form, ...] = ("contract", "function", "session", "compacting")

CONTRACT_METHODS = (
    "add_message",
    "get_messages_for_request",
    "get_messages",
    "set_messages",
    "clear",
)
SESSION_METHODS = ("add_items", "get_items", "pop_item", "clear_session")
"""The OpenAI Agents SDK's ``Session`` protocol (``agents.memory.session.Session``)."""
COMPACTING_METHODS = ("add_message", "get_messages", "should_compact", "compact", "clear")
"""Amplifier's first context contract (``amplifier_core`` before ``get_messages_for_request``)."""

MESSAGE_LIST_NAMES = frozenset(
    {
        "messages",
        "message_history",
        "history",
        "msgs",
        "chat_history",
        "conversation",
        "items",
    }
)
"""First-parameter names that say "this function takes the message list"."""

EVERYTHING = 2**63 - 1
"""The ``limit`` that asks a session with a configured limit for every item it holds: the
Agents SDK resolves ``get_items(None)`` to the session's own limit, so no limit cannot be
asked for as ``None``; this is SQLite's largest integer (a ``LIMIT`` it accepts)."""


# -- telling the forms apart ---------------------------------------------------------------------


def _has(obj: Any, names: Collection[str]) -> bool:
    return all(callable(getattr(obj, name, None)) for name in names)


def is_compacting(obj: Any) -> bool:
    """``obj`` (an instance or a class) follows Amplifier's first contract: it compacts on
    request (``should_compact``, ``compact``) and has no ``get_messages_for_request``."""
    return _has(obj, COMPACTING_METHODS) and not callable(
        getattr(obj, "get_messages_for_request", None)
    )


def is_session(obj: Any) -> bool:
    """``obj`` (an instance or a class) has the Session protocol's four methods and not the
    contract's (an object with both is a context manager that also speaks Session)."""
    return _has(obj, SESSION_METHODS) and not _has(obj, CONTRACT_METHODS)


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_BY_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _required_positional(parameters: Collection[inspect.Parameter]) -> list[inspect.Parameter]:
    return [p for p in parameters if p.kind in _POSITIONAL and p.default is p.empty]


def is_history_function(obj: Any, config: Collection[str] = ()) -> bool:
    """A plain callable (not a class, not a mount function) that takes the message list: its
    first parameter is named like one (``messages``, ``history``, ...), or it has exactly one
    required positional parameter. A parameter named in ``config`` is a factory's keyword,
    never the message list, so a factory ``make(max_tokens)`` checked with ``--config
    '{"max_tokens": 8000}'`` stays a factory."""
    if inspect.isclass(obj) or not callable(obj):
        return False
    try:
        parameters = list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return False
    if not parameters or getattr(obj, "__name__", "") == "mount":
        return False
    first = parameters[0]
    if first.name == "coordinator" or first.name in config:
        return False
    if first.kind not in _POSITIONAL:
        return False
    if first.name in MESSAGE_LIST_NAMES:
        return True
    required = [p for p in _required_positional(parameters) if p.name not in config]
    return len(required) == 1 and required[0] is first and first.name not in ("config", "hooks")


def detect_form(obj: Any, *, config: Collection[str] = ()) -> Form:
    """``"session"`` for an object or class with the Session protocol's methods (and not the
    contract's), ``"function"`` for a callable over the message list (see
    :func:`is_history_function`; ``config`` names the keywords a factory would be given),
    ``"contract"`` for everything else: a manager, its class, a factory or a mount function."""
    if is_session(obj):
        return "session"
    if is_compacting(obj):
        return "compacting"
    if _has(obj, CONTRACT_METHODS):
        return "contract"
    if is_history_function(obj, config):
        return "function"
    return "contract"


def as_manager(obj: Any, form: Form | None = None, **kwargs: Any) -> Any:
    """``obj`` as an object with the contract's methods: a function wrapped in a
    :class:`FunctionManager`, a session in a :class:`SessionManager` (``kwargs`` go to the
    wrapper), a context manager as it is. ``form`` overrides :func:`detect_form`."""
    form = form or detect_form(obj)
    if form == "function":
        return FunctionManager(obj, **kwargs)
    if form == "session":
        return SessionManager(obj, **kwargs)
    if form == "compacting":
        return CompactingManager(obj, **kwargs)
    if form != "contract":
        raise ValueError(f"form must be one of {', '.join(FORMS)}, not {form!r}")
    if kwargs:
        raise TypeError(f"a context manager takes no wrapper options, got {sorted(kwargs)}")
    return obj


def describe(obj: Any) -> str:
    """What ``obj`` looks like, for a sentence that says why a form does not fit it."""
    if is_session(obj):
        return "a session (add_items, get_items, pop_item, clear_session)"
    if is_compacting(obj) and not inspect.isclass(obj):
        return f"a compacting manager ({type(obj).__name__}: should_compact, compact)"
    if inspect.isclass(obj):
        return f"the class {obj.__name__}"
    if _has(obj, CONTRACT_METHODS):
        return f"a context manager ({type(obj).__name__})"
    if callable(obj):
        try:
            signature = str(inspect.signature(obj))
        except (TypeError, ValueError):
            signature = "(...)"
        name = getattr(obj, "__name__", type(obj).__name__)
        return f"a function {name}{signature}"
    return f"a {type(obj).__name__} object"


# -- a function over the message list ------------------------------------------------------------


async def _call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    result = function(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


def _takes(function: Callable[..., Any], name: str, *, var_keyword: bool = True) -> bool:
    """``function`` has a parameter ``name`` it can get by keyword (or, with ``var_keyword``,
    a ``**kwargs``)."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    found = parameters.get(name)
    if found is not None:
        return found.kind in _BY_KEYWORD
    return var_keyword and any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def refused_options(function: Callable[..., Any], options: Collection[str]) -> list[str]:
    """The names in ``options`` that ``function`` cannot take as keywords, plus the ones the
    wrapper gives itself (``token_budget``, per request) or that name the message list."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return []
    first = parameters[0].name if parameters else None
    return sorted(
        name for name in options if name in ("token_budget", first) or not _takes(function, name)
    )


class FunctionManager:
    """The contract around a function that turns the history into the view.

    ctxkit keeps the history: :meth:`add_message` appends a deep copy, :meth:`get_messages`
    returns copies, :meth:`set_messages` and :meth:`clear` replace it. Before every request,
    :meth:`get_messages_for_request` calls ``function(history)`` on a *copy* of the history (as
    pydantic-ai's history processors and LangGraph's ``pre_model_hook`` are called before
    every model call), so a function that edits its argument in place cannot change what is
    stored. The function may be sync or async.

    The budget reaches a function that has a ``token_budget`` parameter (or ``**kwargs``):
    the request's ``token_budget``, or, with a provider and no budget, ``context_window -
    max_output_tokens - safety_margin`` from ``provider.get_info().defaults`` (the reference
    manager's :func:`~ctxkit.reference.manager.provider_budget`). With neither, it is not
    passed, so the function's own default holds. ``options`` are passed as keywords on every
    call (a target's ``--config``); ``hooks`` reaches a function with a ``hooks`` parameter.

    Messages are stored as given, copied (dicts and lists by
    :func:`~ctxkit.messages.copy_message`, several times faster than ``copy.deepcopy``, which
    copies anything else: a framework's own message objects); ``validate``, if given, is
    called on each message before it is stored and refuses a bad one by raising
    (``set_messages`` checks them all first, so a bad list changes nothing).

    The function returns the view, a list; anything else raises ``TypeError``.
    """

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        hooks: Any = None,
        options: Mapping[str, Any] | None = None,
        validate: Callable[[Any], Any] | None = None,
    ) -> None:
        if not callable(function):
            raise TypeError(f"FunctionManager needs a function, got {describe(function)}")
        self.function = function
        self.hooks = hooks
        self.options = dict(options or {})
        self.validate = validate
        refused = refused_options(function, self.options)
        if refused:
            raise TypeError(
                f"{_name(function)} takes no keyword {', '.join(map(repr, refused))}; "
                f"options are passed to it as keywords on every call: {describe(function)}"
            )
        self._budget = _takes(function, "token_budget")
        self._hooks = hooks is not None and _takes(function, "hooks", var_keyword=False)
        self._messages: list[Any] = []

    async def add_message(self, message: Any) -> None:
        if self.validate is not None:
            self.validate(message)
        self._messages.append(copy_message(message))

    async def get_messages(self) -> list[Any]:
        return copy_message(self._messages)

    async def set_messages(self, messages: Any) -> None:
        messages = list(messages)
        if self.validate is not None:
            for message in messages:
                self.validate(message)
        self._messages = [copy_message(m) for m in messages]

    async def clear(self) -> None:
        self._messages = []

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[Any]:
        history = copy_message(self._messages)  # the function's own, whatever it does to it
        kwargs = dict(self.options)
        if self._budget:
            if token_budget is None and provider is not None:
                from ctxkit.reference.manager import provider_budget

                token_budget = await provider_budget(provider, 0)
            if token_budget is not None:
                kwargs["token_budget"] = token_budget
        if self._hooks:
            kwargs["hooks"] = self.hooks
        view = await _call(self.function, history, **kwargs)
        if not isinstance(view, list):
            raise TypeError(
                f"{_name(self.function)} returned {type(view).__name__}, not a list: a history "
                "function returns the view, the list of messages to send"
            )
        return view

    def __repr__(self) -> str:
        return f"FunctionManager({_name(self.function)})"


def _name(function: Any) -> str:
    return getattr(function, "__qualname__", None) or getattr(
        function, "__name__", type(function).__name__
    )


# -- a session store -----------------------------------------------------------------------------


def _limit_of(settings: Any) -> int | None:
    if settings is None:
        return None
    if isinstance(settings, Mapping):
        limit = settings.get("limit")
    else:
        limit = getattr(settings, "limit", None)
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


def session_limit(session: Any, run_settings: Any = None) -> int | None:
    """The limit the Agents SDK's ``Runner`` reads the session with: ``RunConfig
    .session_settings.limit`` if set (``run_settings``), else the session's own
    ``session_settings.limit``, else none (every item)."""
    override = _limit_of(run_settings)
    if override is not None:
        return override
    return _limit_of(getattr(session, "session_settings", None))


class SessionManager:
    """The contract around a store with the OpenAI Agents SDK's ``Session`` protocol.

    ======================================  =================================================
    contract                                session
    ======================================  =================================================
    ``add_message(m)``                      ``add_items([m])``
    ``get_messages_for_request(...)``       ``get_items(limit)``, exactly what ``Runner`` reads
    ``get_messages()``                      ``get_items()``: every item
    ``set_messages(ms)``                    ``clear_session()``, then ``add_items(ms)``
    ``clear()``                             ``clear_session()``
    ======================================  =================================================

    Verified against openai-agents 0.24's source:

    * ``Runner`` prepares a turn's input in ``run_internal/session_persistence.py``
      (``prepare_input_with_session``): ``settings = session.session_settings or
      SessionSettings()``, overlaid with ``RunConfig.session_settings``; if ``settings.limit``
      is not ``None`` it calls ``session.get_items(limit=settings.limit)``, else
      ``session.get_items()``; that history goes to the model ahead of the new input. The view
      here is that call; the budget of the request is not used, because ``Runner`` has none to
      give (``run_settings`` plays ``RunConfig.session_settings``).
    * ``SQLiteSession.get_items(limit=None)`` (``memory/sqlite_session.py``) resolves ``None``
      to ``session_settings.limit`` (``resolve_session_limit``): with a configured limit, "no
      limit" cannot be asked for as ``None``. :meth:`get_messages` therefore asks for
      :data:`EVERYTHING` when the session has a limit of its own, and ``get_items()`` when it
      has none.
    * A limit counts items, newest last: a limit can begin what the session returns with a
      tool result whose call was left out (openai-agents-python #4322); the suite reports that
      as ``tool_pair_integrity``. This wrapper checks the *session*: what it hands ``Runner``.
      ``Runner`` 0.24 then, in the same function, drops Responses-API items left orphaned
      (``drop_orphan_function_calls``: a ``function_call`` without its output, and an output
      whose call the limit cut); it does not recognise Chat Completions ``tool`` messages. For
      the exact input ``Runner`` sends a model, check the Agents SDK through its adapter.

    Messages go to the session as they are (it stores them as it does for ``Runner``), so a
    session that keeps the caller's objects is seen to. The session's ``close()``, if it has
    one, is this wrapper's ``close()``.
    """

    def __init__(self, session: Any, *, run_settings: Any = None) -> None:
        if not _has(session, SESSION_METHODS):
            missing = [m for m in SESSION_METHODS if not callable(getattr(session, m, None))]
            raise TypeError(
                f"SessionManager needs the Session protocol ({', '.join(SESSION_METHODS)}); "
                f"{type(session).__name__} lacks {', '.join(missing)}"
            )
        self.session = session
        self.run_settings = run_settings

    @property
    def limit(self) -> int | None:
        """The limit a request reads the session with (see :func:`session_limit`)."""
        return session_limit(self.session, self.run_settings)

    async def add_message(self, message: Any) -> None:
        await _call(self.session.add_items, [message])

    async def get_messages(self) -> list[Any]:
        if _limit_of(getattr(self.session, "session_settings", None)) is None:
            return list(await _call(self.session.get_items))
        return list(await _call(self.session.get_items, limit=EVERYTHING))

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[Any]:
        limit = self.limit
        if limit is None:
            return list(await _call(self.session.get_items))
        return list(await _call(self.session.get_items, limit=limit))

    async def set_messages(self, messages: Any) -> None:
        messages = list(messages)
        await _call(self.session.clear_session)
        if messages:
            await _call(self.session.add_items, messages)

    async def clear(self) -> None:
        await _call(self.session.clear_session)

    async def close(self) -> None:
        close = getattr(self.session, "close", None)
        if callable(close):
            await _call(close)

    def __repr__(self) -> str:
        return f"SessionManager({type(self.session).__name__}, limit={self.limit})"


# -- Amplifier's first contract: a manager that compacts its history on request --------------


class CompactingManager:
    """The contract around a manager of Amplifier's first context contract.

    ======================================  =================================================
    contract                                the first contract
    ======================================  =================================================
    ``add_message(m)``                      ``add_message(m)``
    ``get_messages_for_request(...)``       ``compact()`` if ``should_compact()``, then
                                            ``get_messages()``: what that contract's
                                            orchestrator sent before each model call
    ``get_messages()``                      every message added, kept here (the manager's own
                                            ``get_messages()`` is the compacted list)
    ``set_messages(ms)``                    ``clear()``, then ``add_message`` of each
    ``clear()``                             ``clear()``
    ======================================  =================================================

    The first contract had no budget per request: the manager compacts against limits of its
    own, so a request's ``token_budget`` and provider do not reach it. ``compact()`` rewrites
    the stored history by design, which is why the history is kept here beside it.
    """

    def __init__(self, manager: Any) -> None:
        if not is_compacting(manager):
            raise TypeError(
                f"CompactingManager needs {', '.join(COMPACTING_METHODS)}, got {describe(manager)}"
            )
        self.manager = manager
        self._added: list[Any] = []

    async def add_message(self, message: Any) -> None:
        await _call(self.manager.add_message, message)  # it may refuse: nothing is kept then
        self._added.append(copy_message(message))

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> Any:
        if await _call(self.manager.should_compact):
            await _call(self.manager.compact)
        return await _call(self.manager.get_messages)

    async def get_messages(self) -> list[Any]:
        return copy_message(self._added)

    async def set_messages(self, messages: Any) -> None:
        await _call(self.manager.clear)
        self._added = []
        for message in list(messages):
            await self.add_message(message)

    async def clear(self) -> None:
        await _call(self.manager.clear)
        self._added = []
