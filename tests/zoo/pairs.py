"""Members that break tool_pair_integrity: a call and its results split, reordered or faked.

- SplitsPairsOpenAI: trims message by message, so a tool result can lead the view.
- SplitsPairsAnthropic: knows only the OpenAI shape, so a tool_result message loses its call.
- SplitsParallelCalls: when compacting, keeps only the first result of parallel calls.
- DropsCallKeepsNothing: when compacting, drops every result but keeps the calls.
- LateSplitter: correct up to 40 messages, then keeps the last 30 messages by count.
- SplitsPastItsWindow: ignores the request's budget; past its own window of 60,000 tokens it
  trims message by message.
- LateSplitterAcceptsGarbage: the same, and stores bad messages without an error.
- ResultBeforeCall: puts each call's results before the call in the view.
- SyntheticWithToolIds: when compacting, adds a notice as a tool message answering nothing.
"""

from __future__ import annotations

import json
from typing import Any

from tests.zoo.base import GoodManager, role_of


class SplitsPairsOpenAI(GoodManager):
    """Fault (tool_pair_integrity): plans the view in messages, not units, keeping the newest
    messages that fit, so the cut can fall between an assistant's tool_calls and its ``tool``
    messages and a ToolMessage leads the view without its call (langchain #33245,
    trim_messages by count). The Anthropic shape splits the same way."""

    def _units(self, history: list[Any]) -> list[tuple[list[int], bool]]:
        return [([index], True) for index in range(len(history))]


class SplitsPairsAnthropic(GoodManager):
    """Fault (tool_pair_integrity): knows only the OpenAI shape (``tool_calls``, ``role:
    tool``), so Anthropic ``tool_use`` and ``tool_result`` messages are units alone and the
    cut keeps the user tool_result message while dropping the assistant tool_use message
    before it (claude-code #14416, litellm #4931: orphan tool_result)."""

    def _calls(self, message: Any) -> list[Any]:
        calls = message.get("tool_calls") if role_of(message) == "assistant" else None
        return [c.get("id") for c in calls or () if isinstance(c, dict)]

    def _results(self, message: Any) -> list[Any]:
        return [message.get("tool_call_id")] if role_of(message) == "tool" else []


class SplitsParallelCalls(GoodManager):
    """Fault (tool_pair_integrity): when the view drops anything, an assistant message with
    parallel calls keeps only its first result (OpenAI: the later ``tool`` messages go;
    Anthropic: the later ``tool_result`` blocks go), leaving calls unanswered (langmem #126,
    summarization splits parallel tool calls)."""

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)
        if len(kept) == len(history):
            return view
        out: list[dict] = []
        for message in view:
            if role_of(message) == "tool" and out and role_of(out[-1]) == "tool":
                continue  # a second result in a row: "summarized"
            if role_of(message) == "user" and isinstance(message.get("content"), list):
                results = [b for b in message["content"] if b.get("type") == "tool_result"]
                message["content"] = [b for b in message["content"] if b not in results[1:]]
            out.append(message)
        return out


class DropsCallKeepsNothing(GoodManager):
    """Fault (tool_pair_integrity): when the view must drop anything, it drops every tool
    result ("results are big") but keeps the assistant messages that called them, so each
    kept call goes unanswered (adk-python #7236: an orphaned call)."""

    def _plan(self, history: list[Any], limit: int) -> list[int]:
        kept = super()._plan(history, limit)
        if len(kept) == len(history):
            return kept
        return [i for i in kept if not self._results(history[i])]


class LateSplitter(GoodManager):
    """Fault (tool_pair_integrity, needs 40+ messages): correct while the history holds at
    most 40 messages; beyond that it keeps the system messages and the last 30 messages by
    count, so a pair whose call falls before the cut loses it (codex #5385)."""

    def _plan(self, history: list[Any], limit: int) -> list[int]:
        if len(history) <= 40:
            return super()._plan(history, limit)
        start = len(history) - 30
        return [i for i, m in enumerate(history) if i >= start or role_of(m) == "system"]


class SplitsPastItsWindow(SplitsPairsOpenAI):
    """Fault (tool_pair_integrity, only where it compacts): ignores the request's budget and
    keeps the whole history until it passes its own ``window`` (60,000 tokens, at four
    characters of JSON a token), then trims message by message within half of it, as
    SplitsPairsOpenAI does, so a tool result can lead the view without its call
    (praisonaiagents splits a pair past about 96k tokens). A search rarely reaches such a
    history on its own: the run grows one there. With a window no history reaches
    (``{"window": 10**9}``) it never compacts: inconclusive, never a pass."""

    def __init__(self, *, window: int = 60_000, **options: Any) -> None:
        super().__init__(**options)
        self.window = window

    def _budget(self, token_budget: int | None, provider: Any) -> int:
        return self.window

    def _plan(self, history: list[Any], limit: int) -> list[int]:
        # its window counted as many libraries count: four characters of JSON a token
        if sum(len(json.dumps(m)) for m in history) // 4 <= self.window:
            return list(range(len(history)))
        return super()._plan(history, limit // 2)


class LateSplitterAcceptsGarbage(LateSplitter):
    """Faults (tool_pair_integrity, needs 40+ messages; robustness): LateSplitter that also
    stores bad messages without an error, so most examples meet the robustness failure early.
    The pair fault must still be found: once robustness has failed, the search must go on to
    long histories instead of ending each example where the same failure repeats."""

    def _validate(self, message: Any) -> None:
        pass


class ResultBeforeCall(GoodManager):
    """Fault (tool_pair_integrity, and ordering): in the view each assistant call comes
    after its own results instead of before them."""

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)
        index = 0
        while index < len(view):
            stop = index + 1
            if self._calls(view[index]):
                while stop < len(view) and self._results(view[stop]):
                    stop += 1
                view[index:stop] = [*view[index + 1 : stop], view[index]]
            index = stop
        return view


class SyntheticWithToolIds(GoodManager):
    """Fault (ordering, and tool_pair_integrity): when the view drops anything, it puts a
    notice after the system messages as a ``role: tool`` message with a made-up
    ``tool_call_id`` that answers no call (the checker reports ordering: a synthetic message
    carrying tool ids; it is also a stray tool result)."""

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)
        if len(kept) < len(history):
            notice = {
                "role": "tool",
                "tool_call_id": "ctx_notice",
                "content": f"[{len(history) - len(kept)} earlier messages trimmed]",
            }
            at = next((i for i, m in enumerate(view) if role_of(m) != "system"), len(view))
            view.insert(at, notice)
        return view
