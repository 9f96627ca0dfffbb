"""A zoo of context managers for testing the conformance checker: one correct base, members
that each break one property, correct-but-unusual ones, and targets that hang or cannot load.

The managers are stdlib only and import nothing of ctxkit, so the checker judges code it does
not share. This module names them by target string and never imports them (one cannot load).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ZOO", "Member"]


@dataclass(frozen=True)
class Member:
    """One manager of the zoo and what the checker must say about it.

    target: ``module:attr``, e.g. ``"tests.zoo.pairs:SplitsPairsOpenAI"``.
    expect: for outcome ``"fail"``, the property ids that must be reported failed (others may
        fail too); for ``"pass"``, empty (no required property may fail); for ``"error"`` and
        ``"load_error"``, words the checker's error must contain (case-insensitive).
    outcome: ``"fail"``, ``"pass"``, ``"error"`` (checker reports an error and carries on)
        or ``"load_error"`` (the target cannot be loaded: exit status 2).
    shape: the message shape that shows the fault: ``"openai"``, ``"anthropic"``, ``"both"`` (the
        two mixed), another shape (``"responses"``, ``"gemini"`` ...) or several, comma-separated.
        The member's class declares the shapes it speaks (``ctxkit_shapes``), or declares
        nothing and is judged as Chat Completions: the default run judges it so.
    note: one line on the fault, and what a conversation needs to show it.
    config: the ``--config`` the member is checked with.
    format: the ``--shapes`` it is checked with, for a class checked in several shapes one at a
        time or one that declares nothing; None: the default run.
    also: for outcome ``"fail"``, other required properties the fault may show as too, each
        with why; any other required failure is a false accusation.
    compacts: False for a manager that never returns less than its whole history: every
        required property holds, but untested where it compacts, so its verdict is
        ``inconclusive`` (its failures said beside), never ``pass``. Outcome
        ``"inconclusive"`` is such a member with no failure at all.
    """

    target: str
    expect: frozenset[str]
    outcome: str
    shape: str
    note: str
    config: tuple[tuple[str, object], ...] = ()
    format: str | None = None
    also: tuple[tuple[str, str], ...] = ()
    compacts: bool = True


def _m(
    target: str,
    expect: set[str],
    outcome: str,
    shape: str,
    note: str,
    *,
    format: str | None = None,
    also: dict[str, str] | None = None,
    compacts: bool = True,
    **config: object,
) -> Member:
    return Member(
        f"tests.zoo.{target}",
        frozenset(expect),
        outcome,
        shape,
        note,
        tuple(config.items()),
        format,
        tuple((also or {}).items()),
        compacts and outcome != "inconclusive",
    )


PAIRS = {"tool_pair_integrity"}

ZOO: list[Member] = [
    _m("base:GoodManager", set(), "pass", "both",
       "correct: plans whole units, pins system messages and the newest user message"),
    # tool_pair_integrity (tests/zoo/pairs.py)
    _m("pairs:SplitsPairsOpenAI", PAIRS, "fail", "openai",
       "plans by message, a tool result leads the view (langchain #33245); anthropic splits too"),
    _m("pairs:SplitsPairsAnthropic", PAIRS, "fail", "anthropic",
       "knows only the OpenAI shape: tool_result message kept, its tool_use call dropped"),
    _m("pairs:SplitsParallelCalls", PAIRS, "fail", "both",
       "needs parallel calls and a dropping view: keeps only the first result (langmem #126)"),
    _m("pairs:DropsCallKeepsNothing", PAIRS, "fail", "both",
       "a dropping view drops every tool result but keeps the calls"),
    _m("pairs:LateSplitter", PAIRS, "fail", "both",
       "needs 40+ messages: then keeps the last 30 messages by count, splitting a pair"),
    _m("pairs:LateSplitterAcceptsGarbage", {*PAIRS, "robustness"}, "fail", "both",
       "needs 40+ messages, as LateSplitter; also stores bad messages, a failure met early"),
    _m("pairs:SplitsPastItsWindow", PAIRS, "fail", "both",
       "ignores the request's budget; past its own 60,000 tokens it splits pairs: the run must "
       "grow a history there (praisonaiagents past ~96k tokens)"),
    _m("pairs:SplitsPastItsWindow", set(), "inconclusive", "both",
       "its window no history reaches: it never compacts, so nothing was tested where it does",
       window=10**9),
    _m("pairs:ResultBeforeCall", {*PAIRS, "ordering"}, "fail", "both",
       "each call comes after its results in the view"),
    _m("pairs:SyntheticWithToolIds", {*PAIRS, "ordering"}, "fail", "both",
       "a dropping view gets a role=tool notice with a made-up tool_call_id (also a stray result)"),
    # what is stored (tests/zoo/history.py)
    _m("history:DestructiveCompaction", {"non_destructive"}, "fail", "both",
       "a dropping view deletes the dropped messages from stored history"),
    _m("history:MutatesStoredContent", {"non_destructive"}, "fail", "both",
       "needs tool outputs over 500 chars and an over-budget view: cuts them in storage"),
    _m("history:ClearKeepsHistory", {"lifecycle"}, "fail", "both",
       "clear() resets a view cache, keeps the stored messages"),
    _m("history:SetMessagesAppends", {"lifecycle"}, "fail", "both",
       "set_messages(x) appends x instead of replacing"),
    _m("history:LeaksReferences", {"isolation"}, "fail", "both",
       "stores the caller's dicts; get_messages() returns the internal list"),
    _m("history:DropsThenRefuses", {"non_destructive"}, "fail", "both",
       "needs a refused view: it deletes the oldest message first",
       also={"lifecycle": "it refuses some views a fitting one exists for, a fault of its own"}),
    _m("history:LosesConcurrentAdds", {"concurrency"}, "fail", "both",
       "needs 2+ concurrent add_message calls: snapshot, await, write back"),
    # what the view holds (tests/zoo/views.py)
    _m("views:ReordersView", {"ordering"}, "fail", "both",
       "moves the newest user message to the end of the view"),
    _m("views:AnswerAheadOfTools", {"ordering"}, "fail", "both",
       "needs 2 tool rounds then an answer: it goes ahead of the later; results sorted by id"),
    _m("views:HoistsSystem", {"ordering"}, "fail", "both",
       "needs a mid-conversation system message: moved to the front (relaxation hoisted-system)"),
    _m("views:Nondeterministic", {"determinism"}, "fail", "both",
       "a dropping view gets a notice stamped with the time and a counter"),
    _m("misc:AnthropicLenient", {"robustness"}, "fail", "anthropic",
       "takes a tool_use block without an id: every bad message of the judged shape is tried"),
    _m("misc:AnthropicStrictChatLenient", set(), "pass", "anthropic",
       "takes a Chat call without an id as text: another shape's bad messages are never tried"),
    _m("views:IgnoresBudget", {"budget"}, "fail", "both",
       "ignores token_budget and the provider: every view is the whole history",
       compacts=False),
    _m("views:DropsSystemPrompt", {"preservation"}, "fail", "both",
       "a dropping view drops the system messages"),
    _m("views:DropsNewestUser", {"preservation"}, "fail", "both",
       "needs tool rounds after the newest user message and a tight budget: it goes"),
    # events, bad input, edges (tests/zoo/misc.py)
    _m("misc:BadEvents", {"events"}, "fail", "both",
       "needs hooks and a dropping view: post_compact alone, token_count a string"),
    _m("misc:AcceptsGarbage", {"robustness"}, "fail", "both",
       "add_message stores non-dicts, missing or unknown roles, tool messages without ids"),
    _m("misc:Hangs", {"timed out"}, "error", "both",
       "get_messages_for_request sleeps 3600 s once the history holds 3+ messages"),
    _m("misc:SyncMethods", {"async def"}, "load_error", "both",
       "correct, but the protocol methods are plain def functions: exit status 2"),
    _m("broken_import:Manager", {"does_not_exist_ctxkit_zoo"}, "load_error", "both",
       "the module raises ImportError at import: exit status 2"),
    # correct but unusual (tests/zoo/unusual.py): every required property passes
    _m("unusual:InsertsSummary", set(), "pass", "both",
       "a dropping view gets one plain user summary after the system messages"),
    _m("unusual:TruncatesToolOutputs", set(), "pass", "both",
       "view-only: tool outputs over 500 chars become head + marker + tail, ids kept"),
    _m("unusual:StampsMetadata", set(), "pass", "both",
       "stored copies carry metadata.added_at; equal to what was added ignoring 'metadata'"),
    _m("unusual:FlipsTextShape", set(), "pass", "both",
       "rewrites: string content as one text block and one text block as a string"),
    _m("unusual:NullsEmptyContent", set(), "pass", "both",
       "rewrites: content '' as None, None as no content key, empty tool_result content left out"),
    _m("unusual:ReserializesArguments", set(), "pass", "both",
       "rewrites: tool arguments re-serialized (indent, sorted keys), no call type"),
    _m("unusual:RebuildsMessages", set(), "pass", "both",
       "rewrites: only the keys it models, plus its own message id"),
    _m("unusual:ClearsOldToolOutputs", set(), "pass", "both",
       "outputs before the newest call become a marker, longer than a short output"),
    _m("unusual:MergesSystem", set(), "pass", "both",
       "needs 2+ system messages: merged into one; preservation says merged (merged-system)"),
    _m("unusual:SlidesEveryTurn", set(), "pass", "both",
       "a window of the newest 12 messages: its start moves every request (cache_stability)"),
    _m("unusual:SortsResultsById", set(), "pass", "both",
       "view-only: the results of parallel calls sorted by call id (the APIs take any order)"),
    # coverage: what a run must reach (tests/zoo/history.py, views.py, misc.py)
    _m("history:SetMessagesKeepsList", {"isolation"}, "fail", "both",
       "set_messages keeps the caller's list: a later append or edit changes history"),
    _m("views:WrongFallbackBudget", {"budget"}, "fail", "both",
       "needs a request with no budget and no provider: plans for 4x max_tokens",
       max_tokens=1000),
    _m("misc:NeverEmits", set(), "pass", "both",
       "takes hooks, never emits: events is skipped (nothing observed), not passed"),
    _m("misc:OpenAIOnly", set(), "pass", "openai",
       "refuses Anthropic blocks, declares nothing: the default run must reach no other shape"),
    # Amplifier-style mount() (tests/zoo/amplifier.py): on amplifier-core's coordinator if installed
    _m("amplifier:mount", set(), "pass", "both",
       "context-simple's mount: hooks.register, capabilities, a cleanup; emits context:budget"),
    _m("amplifier:mount_own_event", set(), "pass", "both",
       "a post_compact handler emits the module's own zoo:compacted through the hooks"),
    # other forms (tests/zoo/forms.py): functions over the message list, Agents SDK sessions
    _m("forms:keep_last_units", set(), "pass", "both",
       "function, sync: system, newest user message and the newest 4 whole units"),
    _m("forms:fit_budget", set(), "pass", "both",
       "function, async, takes token_budget: the newest whole units that fit it"),
    _m("forms:edits_in_place", set(), "pass", "both",
       "function that cuts and drops in its argument and returns it: ctxkit passes a copy"),
    _m("forms:UnitSession", set(), "pass", "both",
       "session: its limit counts items, but it returns whole units only"),
    _m("forms:keep_last_messages", PAIRS, "fail", "both",
       "function: the newest 5 messages, a tool result can lead the view"),
    _m("forms:reverses", {*PAIRS, "ordering"}, "fail", "both",
       "function: the history newest first"),
    _m("forms:LimitSession", PAIRS, "fail", "both",
       "session with limit=3: get_items(3) splits pairs (openai-agents-python #4322)"),
    # the newer shapes (tests/zoo/shapes.py): one provider rule broken, or kept unusually
    _m("shapes:ShapesManager", set(), "pass", "responses,gemini,bedrock,genai,anthropic",
       "correct in every shape: whole units, reasoning with its call, answers as one"),
    _m("shapes:DropsReasoning", PAIRS, "fail", "responses",
       "reasoning items left out: a function_call sent without its reasoning item"),
    _m("shapes:DropsThinking", PAIRS, "fail", "anthropic",
       "thinking stripped from the turn the last message answers (needs a thinking round)"),
    _m("shapes:FirstResponseOnly", PAIRS, "fail", "gemini",
       "one functionResponse part kept for several functionCall parts (needs parallel calls)",
       also={"ordering": "the cut turn can equal an earlier one word for word, and parts "
                         "without ids carry no identity: it then reads as that turn, moved"}),
    _m("shapes:HoistsServerResults", PAIRS, "fail", "anthropic",
       "server tool results moved before the server_tool_use they answer"),
    _m("shapes:LastItems", PAIRS, "fail", "responses",
       "the newest 3 items: a function_call_output leads the view (openai-agents-python #4322)",
       format="responses"),
    _m("shapes:LastItems", PAIRS, "fail", "bedrock",
       "the newest 3 messages: a toolResult message leads the view", format="bedrock"),
    _m("shapes:LastItems", PAIRS, "fail", "genai",
       "the newest 3 messages: a tool message with a tool_call_response leads the view",
       format="genai"),
    _m("shapes:LastItems", PAIRS, "fail", "gemini",
       "the newest 3 contents: a functionResponse turn leads the view", format="gemini"),
    _m("shapes:ThinkingOnLastTurnOnly", set(), "pass", "anthropic",
       "thinking stripped from every turn but the one the last message answers"),
    _m("shapes:ResponsesById", set(), "pass", "gemini",
       "function responses answered by id, in another order than the calls"),
    _m("shapes:GeminiOnly", set(), "pass", "gemini",
       "takes Gemini contents only, refusing other shapes: concurrent adds come in its shape"),
    # Amplifier's first contract (tests/zoo/contract_one.py): should_compact() / compact()
    _m("contract_one:CompactsWholeUnits", set(), "pass", "both",
       "compacts in whole units when past 90% of max_tokens; non_destructive is n/a"),
    _m("contract_one:CompactsMessages", PAIRS, "fail", "both",
       "compacts message by message: a tool call can go while its results stay"),
    # permissive (tests/zoo/permissive.py): any dict stored, one shape read, judged by default
    _m("permissive:PermissiveChat", set(), "pass", "openai",
       "stores any dict, reads Chat Completions only, declares nothing: the default shape"),
    _m("permissive:PermissiveAnthropic", set(), "pass", "anthropic",
       "stores any dict, reads Anthropic blocks only, declares anthropic"),
    _m("permissive:PermissiveResponses", set(), "pass", "responses",
       "stores any dict, reads Responses items only, declares responses"),
    _m("permissive:PermissiveGemini", set(), "pass", "gemini",
       "stores any dict, reads Gemini parts only, declares gemini"),
    _m("permissive:PermissiveBedrock", set(), "pass", "bedrock",
       "stores any dict, reads Bedrock blocks only, declares bedrock"),
    _m("permissive:PermissiveGenai", set(), "pass", "genai",
       "stores any dict, reads GenAI parts only, declares genai"),
    _m("permissive:NewestChat", PAIRS, "fail", "openai",
       "PermissiveChat's twin: the newest 4 messages, a tool message can lead the view"),
    _m("permissive:NewestGemini", PAIRS, "fail", "gemini",
       "PermissiveGemini's twin: the newest 4 contents, a functionResponse turn can lead"),
    _m("permissive:NewestResponses", PAIRS, "fail", "responses",
       "PermissiveResponses' twin: the newest 4 items, an output can lead the view"),
    _m("permissive:GeminiContents", set(), "pass", "gemini",
       "Gemini contents only, no system role either (it lives beside them): --shapes gemini",
       format="gemini"),
    _m("permissive:TextPartsAsStrings", set(), "pass", "both",
       "stores a single text part as its string (llama-index Memory): provider equality"),
]  # fmt: skip
