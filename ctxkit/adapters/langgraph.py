"""LangGraph's ``pre_model_hook`` behind the context contract: a real ReAct agent
(``langgraph.prebuilt.create_react_agent``) runs offline, and what its model receives is the
view.

LangGraph's docs ("How to manage conversation history in a ReAct Agent") trim the history
with a ``pre_model_hook`` that calls ``trim_messages(state["messages"], strategy="last",
token_counter=..., max_tokens=384, start_on="human", end_on=("human", "tool"))`` and returns
the result in one of two documented forms:

* ``{"llm_input_messages": trimmed}``: the model gets the trimmed list, the graph state keeps
  every message (:class:`PreModelHook`, ``langgraph:pre_model_hook``). ctxkit stores the
  history, as the state would;
* ``{"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *trimmed]}``: the trimmed list
  replaces the state's messages (:class:`RemoveMessages`, ``langgraph:remove_messages``). The
  history is the graph state: after each request it is what the state held when the model was
  called.

A request builds the agent (about 2 ms) with the docs' hook, the request's budget as
``max_tokens`` and ctxkit's exact counter as ``token_counter`` (so "fits the budget" means the
same to the library and to the suite), and invokes it once on the history. The model is
:class:`RecordingModel`, a local chat model that records the messages it is called with and
answers with a final message without tool calls, so the agent stops after exactly one model
call. The agent has one tool, so it is the real ReAct graph (model, tools, the edge between).
Messages cross with the LangChain adapter's conversions (:mod:`ctxkit.adapters.langchain`).

``create_react_agent`` is deprecated since LangGraph 1.0 in favour of ``langchain.agents.
create_agent``, whose context management is middleware and has no ``pre_model_hook``; the
hook and its documented forms exist only on ``create_react_agent``, which LangGraph 1.x still
ships, so the adapter calls it (and silences its deprecation warning).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from ctxkit.adapters.base import DEFAULT_MAX_TOKENS, TrimmingAdapter, library_options
from ctxkit.adapters.langchain import counting, from_langchain, to_langchain
from ctxkit.messages import copy_message
from ctxkit.tokens import TokenCounter

__all__ = [
    "DOCS_OPTIONS",
    "PreModelHook",
    "RemoveMessages",
    "bug_report",
    "recording_model",
    "run_agent",
]

DOCS_OPTIONS: Mapping[str, Any] = {
    "strategy": "last",
    "start_on": "human",
    "end_on": ("human", "tool"),
}
"""The options of LangGraph's documented hook (its ``max_tokens=384`` is the budget here)."""

REPLY_ID = "ctxkit-reply"
"""The id of the recording model's answer, which is no part of the history."""


def recording_model() -> Any:
    """A fresh :class:`RecordingModel` (its class is made when first needed, so that
    langchain-core is imported only when the adapter is used)."""
    return _model_class()()


def _model_class() -> type:
    global _MODEL_CLASS
    if _MODEL_CLASS is None:
        from langchain_core.language_models import BaseChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.outputs import ChatGeneration, ChatResult
        from pydantic import Field

        class RecordingModel(BaseChatModel):
            """Records the messages of every call and answers "Done." with no tool calls."""

            received: list[list[Any]] = Field(default_factory=list)

            @property
            def _llm_type(self) -> str:
                return "ctxkit-recording"

            def _generate(
                self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any
            ) -> Any:
                self.received.append(list(messages))
                reply = AIMessage(content="Done.", id=REPLY_ID)
                return ChatResult(generations=[ChatGeneration(message=reply)])

            def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
                return self  # the model never calls them: binding changes nothing it says

        _MODEL_CLASS = RecordingModel
    return _MODEL_CLASS


_MODEL_CLASS: type | None = None


def _lookup(query: str) -> str:
    """Look something up (the agent's one tool; the recording model never calls it)."""
    return query


def run_agent(messages: list[Any], pre_model_hook: Any) -> tuple[list[Any], list[Any]]:
    """Invoke a fresh ``create_react_agent`` with ``pre_model_hook`` on ``messages`` once:
    (what the model received, the state's messages when it was called). Exactly one model call
    is made; anything else is an error, as it would mean the agent did not stop."""
    from langgraph.prebuilt import create_react_agent

    model = recording_model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        agent = create_react_agent(model, [_lookup], pre_model_hook=pre_model_hook)
    state = agent.invoke({"messages": messages})
    if len(model.received) != 1:
        raise RuntimeError(f"the agent called its model {len(model.received)} times, not once")
    kept = list(state["messages"])
    if not kept or kept[-1].id != REPLY_ID:
        raise RuntimeError("the agent's last message is not its model's answer")
    return model.received[0], kept[:-1]


class PreModelHook(TrimmingAdapter):
    """The documented hook returning ``llm_input_messages``: the view is what the model
    receives; ctxkit keeps the history. Options reach ``trim_messages`` exactly as written
    (``None`` included); a key not written gets the docs' value (:data:`DOCS_OPTIONS`) or, for
    ``include_system`` and ``allow_partial``, which the docs do not set, the library's."""

    name = "langgraph:pre_model_hook"
    OPTIONS = ("strategy", "start_on", "end_on", "include_system", "allow_partial")

    def __init__(
        self, max_tokens: int = DEFAULT_MAX_TOKENS, hooks: Any = None, **options: Any
    ) -> None:
        super().__init__(max_tokens, hooks)
        from langchain_core.messages import trim_messages  # fails early if not installed
        from langgraph.prebuilt import create_react_agent  # noqa: F401  (the same)

        self.options = library_options(
            f"{self.name} (trim_messages in a pre_model_hook)",
            options,
            self.OPTIONS,
            DOCS_OPTIONS,
            {
                "token_counter": "the adapter counts with ctxkit's exact counter, so 'fits "
                "the budget' means the same to the library and to the suite",
            },
        )
        # trim_messages' own checks (start_on with strategy="first", ...) refuse a bad
        # combination now, while the manager is built, instead of on every request.
        trim_messages([], max_tokens=0, token_counter=len, **self.options)
        self._counter = TokenCounter()

    def _trimmed(self, messages: list[Any], history: list[dict[str, Any]], budget: int) -> Any:
        from langchain_core.messages import trim_messages

        return trim_messages(
            messages,
            max_tokens=budget,
            token_counter=counting(history, self._counter),
            **self.options,
        )

    def hook(self, history: list[dict[str, Any]], budget: int) -> Any:
        """The docs' ``pre_model_hook`` for one request."""

        def pre_model_hook(state: Any) -> dict[str, Any]:
            trimmed = self._trimmed(state["messages"], history, budget)
            return {"llm_input_messages": trimmed}

        return pre_model_hook

    def run(
        self, history: list[dict[str, Any]], budget: int
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(the view, the graph state's messages when the model was called), as JSON."""
        received, state = run_agent(to_langchain(history), self.hook(history, budget))
        return from_langchain(received, history), from_langchain(state, history)

    def trim(self, history: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
        view, _ = self.run(history, budget)
        return view


class RemoveMessages(PreModelHook):
    """The documented hook returning ``{"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES),
    *trimmed]}``: the trimmed list replaces the graph state's messages, so the history is what
    the state holds after the request (the model's answer aside)."""

    name = "langgraph:remove_messages"

    def hook(self, history: list[dict[str, Any]], budget: int) -> Any:
        from langchain_core.messages import RemoveMessage
        from langgraph.graph.message import REMOVE_ALL_MESSAGES

        def pre_model_hook(state: Any) -> dict[str, Any]:
            trimmed = self._trimmed(state["messages"], history, budget)
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *trimmed]}

        return pre_model_hook

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict[str, Any]]:
        budget = self.budget(token_budget, provider)
        view, state = self.run(copy_message(self._history), budget)
        self._history = state
        return copy_message(view)


def _report_budget(messages: list[Any]) -> int | None:
    """The largest message count below the history's at which the docs' trimming (counting
    messages, ``token_counter=len``) returns nothing, if any."""
    from langchain_core.messages import trim_messages

    for budget in range(len(messages) - 1, 0, -1):
        if not trim_messages(messages, max_tokens=budget, token_counter=len, **DOCS_OPTIONS):
            return budget
    return None


def bug_report(property_id: str, cell: Any) -> str:
    """An upstream report, LangGraph and langchain-core only: the counterexample's history in
    LangChain's types, LangGraph's documented trimming hook (counting messages), and a
    ``create_react_agent`` whose model records what it gets: when ``trim_messages`` returns
    nothing, the model gets the whole history (langgraph #8925). Empty when the failure is not
    that."""
    from ctxkit.adapters.langchain import _constructor
    from ctxkit.adapters.reports import history_before_view

    if property_id != "budget" or not cell.trace:
        return ""
    history, _ = history_before_view(cell.trace)
    messages = to_langchain(history)
    budget = _report_budget(messages)
    if budget is None:
        return ""
    listed = "\n".join(f"    {_constructor(m)}," for m in messages)
    return f"""### The documented trimming `pre_model_hook` sends the model the whole history

LangGraph's guide "How to manage conversation history in a ReAct Agent" trims with a
`pre_model_hook` that returns `{{"llm_input_messages": trim_messages(...)}}`. When nothing fits
(`start_on="human"` finds no user message to start a view that fits the budget),
`trim_messages` returns `[]`, and `create_react_agent` reads the empty list as absent
(`llm_input_messages or messages`) and sends the model every message in the state: the
longer the conversation, the surer it overflows the context window it was trimmed for. This is
langgraph #8925, reached through the documented hook. Found by ctxkit's conformance suite;
this reproducer uses langgraph and langchain-core only (messages counted with `len`).

```python
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages import trim_messages
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.prebuilt import create_react_agent

received = []


class RecordingModel(BaseChatModel):
    @property
    def _llm_type(self):
        return "recording"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        received.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage("Done."))])


def pre_model_hook(state):
    trimmed = trim_messages(
        state["messages"],
        strategy="last",
        token_counter=len,
        max_tokens={budget},
        start_on="human",
        end_on=("human", "tool"),
    )
    return {{"llm_input_messages": trimmed}}


messages = [
{listed}
]
create_react_agent(RecordingModel(), [], pre_model_hook=pre_model_hook).invoke(
    {{"messages": messages}}
)
sent = len(received[0])
assert sent <= {budget}, f"the model got {{sent}} messages, over max_tokens={budget}"
```

Expected: the model gets what the hook returned, here no message (or the agent refuses to
call the model), never more than `max_tokens` allows.
"""
