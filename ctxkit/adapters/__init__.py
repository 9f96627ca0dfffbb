"""Adapters: popular libraries' own trimming code behind the context contract, so that
``ctxkit conformance langchain:trim_messages`` checks the library with no glue of the user's.

Each adapter stores the history itself, correctly, and on every request converts it to the
library's message types, calls the library's code with the budget, and converts the result
back, repairing nothing: what the suite finds is the library's behaviour. A library is
imported only when its adapter is used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ctxkit.adapters.finding import Finding
from ctxkit.extras import install_line

__all__ = [
    "ADAPTERS",
    "JS_ADAPTERS",
    "Adapter",
    "JavaScriptAdapter",
    "any_named",
    "by_name",
    "installed_version",
    "npm_version",
]


@dataclass(frozen=True)
class Adapter:
    """A short name for a library's trimmer, and what the survey knows of its findings."""

    name: str
    factory: str
    """``module:attr`` of the contract class."""
    distribution: str
    extra: str
    description: str
    findings: Mapping[str, Finding] = field(default_factory=dict)
    """Known failures by property id: a real bug, a design choice, an adapter limitation."""
    bug_report: str | None = None
    """``module:attr`` of a function (property id, cell) -> upstream report text."""
    apart: bool = False
    """The library conflicts with ctxkit's other extras: it goes in an environment of its own."""

    @property
    def install(self) -> str:
        command = install_line(self.extra)
        if not self.apart:
            return command
        return (
            f"{command} in an environment of its own (it conflicts with other extras), then "
            "--command 'ENV/bin/python -m ctxkit.conformance.worker'"
        )


_SPLITS = Finding(
    "bug",
    "trims message by message: a view can keep a tool call without its results, or results "
    "without their call, which providers reject",
)
_OLDEST = Finding(
    "design",
    "keeps the oldest messages, so the newest user message is dropped when the budget is "
    "tight: the strategy's purpose, not an accident",
)
_STARTS_ON_HUMAN = Finding(
    "design",
    "start_on='human' makes a view start at a user message: when the newest user message and "
    "what follows it do not fit, the view keeps only what follows, without the question",
)
_UNDEFINED = Finding(
    "bug", "with a history of only system messages, trimMessages returns [undefined]"
)

_IN_PLACE = Finding(
    "design",
    "Strands' conversation managers edit Agent.messages in place: what a view trims, "
    "truncates or summarizes is gone from the history, by design",
)
_STARTS_WITH_USER = Finding(
    "design",
    "a Strands view must start with a user message (Bedrock's rule): when no user message is "
    "left to start from, the manager refuses the request instead of cutting elsewhere",
)
_TRIMS_TO_A_USER_TURN = Finding(
    "design",
    "trims the oldest messages up to a user turn it can start from, even when that drops the "
    "question the agent is still working on",
)
_KEEPS_RECENT = Finding(
    "design",
    "never summarizes the newest preserve_recent_messages (10), and re-summarizing only its "
    "previous summary makes the request no smaller: then it refuses (the agent loop would "
    "retry without end); lower preserve_recent_messages with --config",
)
_REMINDERS = Finding(
    "adapter",
    "Strands has no system role inside a conversation: the adapter passes a mid-conversation "
    "system message as a user message, which the manager may summarize away",
    allow="dropped-system",
)

_NEWEST_ALONE = Finding(
    "design",
    "when not even the newest message fits, get() returns that message alone, on purpose "
    "(so that the model raises); when it is a tool result, it comes without its call",
)
_COUNTS_TEXT = Finding(
    "design",
    "counts only the messages' text (not tool calls, not per-message framing), so a view can "
    "exceed a budget counted in full",
)
_DROPS_OLDEST = Finding(
    "design",
    "drops the oldest messages first, and a view may not start at an assistant or tool message, "
    "so the question of a tool-heavy turn goes before its tool rounds do",
)

_BY_POSITION = Finding(
    "design",
    "prunes by position (tool calls before the newest messages), not by tokens: the budget "
    "plays no part",
)
_NEWEST_ONLY = Finding(
    "design",
    "keeps the newest buffer_size messages and nothing else: the system prompt goes with the rest",
)
_HEAD_AND_TAIL = Finding(
    "design",
    "keeps the oldest head_size and newest tail_size messages: a system message in between "
    "is skipped with the rest",
)
_FROM_THE_MIDDLE = Finding(
    "bug",
    "removes messages one at a time from the middle, with no regard for tool calls: a call "
    "loses its results (or results their call), which providers reject",
)
_MIDDLE_QUESTION = Finding(
    "design",
    "removes messages from the middle, where the question of the current turn often is",
)
_REDUCES_IN_PLACE = Finding(
    "design",
    "the reducer is the ChatHistory itself: reduce() cuts the stored messages, by design",
)
_COUNTS_MESSAGES = Finding(
    "design",
    "counts messages, not tokens: the request's budget plays no part",
)
_FIRST_SYSTEM_ONLY = Finding(
    "design",
    "keeps the first system message only; later ones are cut like any other message",
    allow="dropped-system",
)

_EMPTY_IS_ABSENT = Finding(
    "bug",
    "when trim_messages returns nothing (no user message starts a view that fits), "
    "create_react_agent reads the empty llm_input_messages as absent and sends the model the "
    "whole history (langgraph #8925)",
)
_DOCS_HOOK = Finding(
    "design",
    "the documented hook trims with start_on='human' and no include_system: the system message "
    "is trimmed like any other, and when the newest user message and what follows do not fit, "
    "the view keeps only what follows, or nothing",
)
_STATE_REWRITTEN = Finding(
    "design",
    "the documented 'messages' form replaces the graph state with the trimmed list "
    "(RemoveMessage(id=REMOVE_ALL_MESSAGES)): what a view trims is gone from the history, and "
    "when nothing fits the history is emptied",
)

_REPAIRED_BY_PYDANTIC_AI = Finding(
    "design",
    "pydantic-ai repairs the processed history before every model request: a result whose call "
    "was cut is dropped, and a call left without results gets a synthesized 'interrupted' "
    "result, which comes from no history message (its putting a request's tool results in the "
    "order of their calls is no reorder: the APIs take them in any order)",
)
_KEEPS_LAST_N = Finding(
    "design",
    "the documented processor keeps the newest 5 pydantic-ai messages (adjacent requests "
    "merged), whatever their size: the question of a tool-heavy turn goes first",
)
_COUNTS_ITEMS = Finding(
    "design",
    "counts session items (limit), not tokens: the request's budget plays no part, and with no "
    "limit (the SDK's default) every item is read",
)
_LIMIT_CUTS_QUESTION = Finding(
    "design",
    "a limit keeps the newest items only, so the user message that started a tool-heavy turn "
    "is cut first",
)
_REASONING_CUT = Finding(
    "bug",
    "a limit that cuts a reasoning item keeps the function_call it preceded: Runner prunes "
    "orphaned calls and outputs, not a call without its reasoning item, which the Responses "
    "API rejects",
)

_TOOL_CALLS_DISCOUNTED = Finding(
    "bug",
    "counts each tool call's object input 12 tokens below its own text (an assistant message of "
    "tool calls can count below zero), on top of an estimate of the text: a view can exceed the "
    "budget, and the limiter its own limit",
)
_TRIPWIRE = Finding(
    "design",
    "refuses a request with a TripWire rather than send an empty prompt: when the history is "
    "empty, when the system messages and its 24-token conversation overhead reach the limit, or "
    "when no other message fits",
)
_BEST_FIT = Finding(
    "design",
    "trimMode 'best-fit' (the default) skips a message that does not fit, counted with 24 tokens "
    "a conversation and 3.8 a message, and keeps older ones that do: the newest user message "
    "can go while older messages stay ('contiguous' stops at the first that does not fit)",
)

_COUNTS_INVOCATIONS = Finding(
    "design",
    "counts invocations (a run of user messages and the turns after it), not tokens: the "
    "request's budget plays no part, and without num_invocations_to_keep (the plugin's default) "
    "nothing is trimmed",
)
_COMPACTS_BY_ITS_TRIGGERS = Finding(
    "design",
    "compacts when compaction_interval invocations have finished, or when ADK's own estimate "
    "of the prompt (characters / 4) reaches token_threshold: the request's budget plays no part",
)
_SUMMARIZES_THE_QUESTION = Finding(
    "design",
    "summarizes finished invocations whole, so once a question is answered it is summarized "
    "with its answer; with token_threshold it keeps only the newest event_retention_size events, "
    "which can be a tool round without the question that asked for it",
)

ADAPTERS: tuple[Adapter, ...] = (
    Adapter(
        "langchain:trim_messages",
        "ctxkit.adapters.langchain:TrimMessagesLast",
        "langchain-core",
        "langchain",
        "langchain_core.messages.trim_messages, strategy 'last' (keep the newest), "
        "include_system, start_on 'human'",
        findings={"preservation": _STARTS_ON_HUMAN},
        bug_report="ctxkit.adapters.langchain:bug_report_last",
    ),
    Adapter(
        "langchain:trim_messages:first",
        "ctxkit.adapters.langchain:TrimMessagesFirst",
        "langchain-core",
        "langchain",
        "langchain_core.messages.trim_messages, strategy 'first' (keep the oldest)",
        findings={"tool_pair_integrity": _SPLITS, "preservation": _OLDEST},
        bug_report="ctxkit.adapters.langchain:bug_report",
    ),
    Adapter(
        "strands:sliding_window",
        "ctxkit.adapters.strands:SlidingWindow",
        "strands-agents",
        "strands",
        "strands SlidingWindowConversationManager (window_size 40), reducing on overflow as "
        "the agent loop does",
        findings={
            "non_destructive": _IN_PLACE,
            "lifecycle": _STARTS_WITH_USER,
            "preservation": _TRIMS_TO_A_USER_TURN,
        },
    ),
    Adapter(
        "strands:summarizing",
        "ctxkit.adapters.strands:Summarizing",
        "strands-agents",
        "strands",
        "strands SummarizingConversationManager (defaults), summaries by a local recap model",
        findings={
            "non_destructive": _IN_PLACE,
            "lifecycle": _KEEPS_RECENT,
            "preservation": _REMINDERS,
        },
    ),
    Adapter(
        "llama_index:chat_memory_buffer",
        "ctxkit.adapters.llama_index:ChatMemoryBuffer",
        "llama-index-core",
        "llama-index",
        "llama_index.core.memory.ChatMemoryBuffer, token_limit set to the budget, the system "
        "prompt counted in",
        findings={
            "tool_pair_integrity": _NEWEST_ALONE,
            "budget": _COUNTS_TEXT,
            "preservation": _DROPS_OLDEST,
        },
    ),
    Adapter(
        "autogen:buffered",
        "ctxkit.adapters.autogen:Buffered",
        "autogen-core",
        "autogen",
        "autogen_core BufferedChatCompletionContext (buffer_size 20)",
        findings={"budget": _COUNTS_MESSAGES, "preservation": _NEWEST_ONLY},
        apart=True,
    ),
    Adapter(
        "autogen:head_and_tail",
        "ctxkit.adapters.autogen:HeadAndTail",
        "autogen-core",
        "autogen",
        "autogen_core HeadAndTailChatCompletionContext (head_size 3, tail_size 17)",
        findings={"budget": _COUNTS_MESSAGES, "preservation": _HEAD_AND_TAIL},
        apart=True,
    ),
    Adapter(
        "autogen:token_limited",
        "ctxkit.adapters.autogen:TokenLimited",
        "autogen-core",
        "autogen",
        "autogen_core TokenLimitedChatCompletionContext, token_limit set to the budget",
        findings={"tool_pair_integrity": _FROM_THE_MIDDLE, "preservation": _MIDDLE_QUESTION},
        bug_report="ctxkit.adapters.autogen:bug_report",
        apart=True,
    ),
    Adapter(
        "semantic_kernel:truncation_reducer",
        "ctxkit.adapters.semantic_kernel:TruncationReducer",
        "semantic-kernel",
        "semantic-kernel",
        "semantic_kernel ChatHistoryTruncationReducer (target_count 10), reduced before every "
        "request",
        findings={
            "non_destructive": _REDUCES_IN_PLACE,
            "budget": _COUNTS_MESSAGES,
            "preservation": _FIRST_SYSTEM_ONLY,
        },
    ),
    Adapter(
        "langgraph:pre_model_hook",
        "ctxkit.adapters.langgraph:PreModelHook",
        "langgraph",
        "langgraph",
        "langgraph.prebuilt create_react_agent with the docs' pre_model_hook: trim_messages "
        "(strategy 'last', start_on 'human', end_on ('human', 'tool')) returned as "
        "llm_input_messages; the view is what the model receives",
        findings={"budget": _EMPTY_IS_ABSENT, "preservation": _DOCS_HOOK},
        bug_report="ctxkit.adapters.langgraph:bug_report",
    ),
    Adapter(
        "langgraph:remove_messages",
        "ctxkit.adapters.langgraph:RemoveMessages",
        "langgraph",
        "langgraph",
        "langgraph.prebuilt create_react_agent with the docs' pre_model_hook returning "
        "messages=[RemoveMessage(id=REMOVE_ALL_MESSAGES), *trimmed]: the graph state is the "
        "history",
        findings={"non_destructive": _STATE_REWRITTEN, "preservation": _DOCS_HOOK},
    ),
    Adapter(
        "pydantic_ai:history_processor",
        "ctxkit.adapters.pydantic_ai:HistoryProcessor",
        "pydantic-ai-slim",
        "pydantic-ai",
        "a history processor (default: the docs' keep_recent_messages, the newest 5) as "
        "ProcessHistory on a real pydantic_ai.Agent; the view is what its model is sent",
        findings={
            "ordering": _REPAIRED_BY_PYDANTIC_AI,
            "budget": _COUNTS_MESSAGES,
            "preservation": _KEEPS_LAST_N,
        },
    ),
    Adapter(
        "openai_agents:sqlite_session",
        "ctxkit.adapters.openai_agents:SQLiteSessionAdapter",
        "openai-agents",
        "openai-agents",
        "agents.SQLiteSession with SessionSettings(limit=...), read as Runner reads it "
        "(prepare_input_with_session); no limit unless --config sets one",
        findings={
            "tool_pair_integrity": _REASONING_CUT,
            "budget": _COUNTS_ITEMS,
            "preservation": _LIMIT_CUTS_QUESTION,
        },
        bug_report="ctxkit.adapters.openai_agents:bug_report",
    ),
    Adapter(
        "google_adk:context_filter",
        "ctxkit.adapters.google_adk:ContextFilter",
        "google-adk",
        "google-adk",
        "google.adk ContextFilterPlugin (num_invocations_to_keep 3) in a real App and Runner "
        "over an in-memory session of Gemini contents; the view is what the agent's model is sent",
        findings={"budget": _COUNTS_INVOCATIONS},
        apart=True,
    ),
    Adapter(
        "google_adk:compaction",
        "ctxkit.adapters.google_adk:Compaction",
        "google-adk",
        "google-adk",
        "google.adk EventsCompactionConfig (the docs' compaction_interval 3, overlap_size 1) on a "
        "real App, compacting after every invocation as Runner does, summaries by ADK's "
        "LlmEventSummarizer over a local recap model; the view is what the agent's model is sent",
        findings={"budget": _COMPACTS_BY_ITS_TRIGGERS, "preservation": _SUMMARIZES_THE_QUESTION},
        apart=True,
    ),
)


@dataclass(frozen=True)
class JavaScriptAdapter:
    """An adapter run by the Node harness (conformance/harnesses/node/adapters); its library
    comes from the npm packages of the directory ctxkit runs in."""

    name: str
    package: str
    description: str
    findings: Mapping[str, Finding] = field(default_factory=dict)
    bug_report: str | None = None
    """``module:attr`` of a Python function (property id, cell) -> upstream report text."""

    @property
    def install(self) -> str:
        return f"npm install {self.package} (in the directory you run ctxkit from)"


JS_ADAPTERS: tuple[JavaScriptAdapter, ...] = (
    JavaScriptAdapter(
        "js:@langchain/core:trimMessages",
        "@langchain/core",
        "LangChain.js trimMessages, strategy 'last', includeSystem, startOn 'human'",
        findings={
            "lifecycle": _UNDEFINED,
            "tool_pair_integrity": _UNDEFINED,
            "preservation": _STARTS_ON_HUMAN,
        },
        bug_report="ctxkit.adapters.langchain_js:bug_report_last",
    ),
    JavaScriptAdapter(
        "js:@langchain/core:trimMessages:first",
        "@langchain/core",
        "LangChain.js trimMessages, strategy 'first'",
        findings={"tool_pair_integrity": _SPLITS, "preservation": _OLDEST},
        bug_report="ctxkit.adapters.langchain_js:bug_report_first",
    ),
    JavaScriptAdapter(
        "js:ai:pruneMessages",
        "ai",
        "Vercel AI SDK pruneMessages: reasoning before the last message, tool calls before the "
        "last 2 messages, empty messages removed",
        findings={"budget": _BY_POSITION},
    ),
    JavaScriptAdapter(
        "js:@mastra/core:TokenLimiter",
        "@mastra/core",
        "Mastra TokenLimiter (@mastra/core/processors), limit set to the budget, trimming the "
        "prompt as an agent's request stage does (processLLMRequest, trimMode 'best-fit')",
        findings={
            "budget": _TOOL_CALLS_DISCOUNTED,
            "lifecycle": _TRIPWIRE,
            "preservation": _BEST_FIT,
        },
        bug_report="ctxkit.adapters.mastra:bug_report",
    ),
)


def npm_version(package: str, start: Path | None = None) -> str | None:
    """The version of an npm package installed for the directory ``start`` (default: the
    current one), found as Node finds it: node_modules here or in a parent."""
    folder = (start or Path.cwd()).resolve()
    for place in (folder, *folder.parents):
        manifest = place / "node_modules" / package / "package.json"
        if manifest.is_file():
            try:
                return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])
            except (OSError, ValueError, KeyError):
                return None
    return None


def by_name(name: str | None) -> Adapter | None:
    """The Python adapter registered under ``name``, if any."""
    return next((a for a in ADAPTERS if a.name == name), None)


def any_named(name: str | None) -> Adapter | JavaScriptAdapter | None:
    """The adapter, Python or JavaScript, registered under ``name``, if any."""
    return by_name(name) or next((a for a in JS_ADAPTERS if a.name == name), None)


def installed_version(adapter: Adapter) -> str | None:
    """The installed version of the adapter's library, or None."""
    try:
        return version(adapter.distribution)
    except PackageNotFoundError:
        return None
