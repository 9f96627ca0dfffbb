"""Correct but unusual members: each must pass every required property.

- InsertsSummary: when the view drops messages, one plain user summary follows the system
  messages.
- TruncatesToolOutputs: in the view only, long tool outputs become head + marker + tail.
- StampsMetadata: stored messages carry ``metadata: {"added_at": n}`` (an annotation key).

Rewriting members (issue 12): each view message is rewritten into a shape a provider reads
the same; stored history is untouched, and every property passes, preservation too.

- FlipsTextShape: a string content becomes one text block, one text block a string.
- NullsEmptyContent: ``content: ""`` becomes ``None``, and ``None`` no content key.
- ReserializesArguments: tool call arguments re-serialized (indent, sorted keys), no ``type``.
- RebuildsMessages: only the keys it models, rebuilt, plus its own message ``id``.
- ClearsOldToolOutputs: tool outputs before the newest call become a line-count marker,
  longer than a short output.
- MergesSystem: all system messages merged into one (fails preservation as "merged" unless
  ``merged-system`` or ``dropped-system`` is allowed).
- SlidesEveryTurn: a window of the newest 12 messages: its start moves every request, so
  the advisory cache_stability is far below its bar while every required property holds.
- SortsResultsById: in the view, the results of parallel calls sorted by call id, which every
  API takes (issue 45): no property may fail.
"""

from __future__ import annotations

import json
from typing import Any

from tests.zoo.base import (
    GoodManager,
    blocks,
    clone,
    estimate,
    outputs,
    results_by_id,
    role_of,
    total,
)

LONG = 500
KEEP = 200
MARKER = "\n[... omitted ...]\n"


class InsertsSummary(GoodManager):
    """Correct: when the view drops messages, it plans for a little less and puts one
    synthetic summary, a plain-text user message with no tool ids, right after the leading
    system messages; only when the summary costs less than what it stands for."""

    @staticmethod
    def _summary(dropped: int) -> dict:
        return {"role": "user", "content": f"[Summary: {dropped} earlier messages left out.]"}

    def _plan(self, history: list[Any], limit: int) -> list[int]:
        return super()._plan(history, limit - estimate(self._summary(len(history))))

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)
        summary = self._summary(len(history) - len(kept))
        if len(kept) < len(history) and estimate(summary) < total(history) - total(view):
            at = next((i for i, m in enumerate(view) if role_of(m) != "system"), len(view))
            view.insert(at, summary)
        return view


class TruncatesToolOutputs(GoodManager):
    """Correct: in the view, a tool output longer than 500 characters (OpenAI ``tool``
    content, Anthropic ``tool_result`` block content, when a string) becomes its first and
    last 200 characters around an omission marker; roles and ids stay, stored history is
    untouched."""

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)  # deep copies: safe to edit
        for owner in (o for m in view for o in outputs(m)):
            text = owner["content"]
            if len(text) > LONG:
                owner["content"] = text[:KEEP] + MARKER + text[-KEEP:]
        return view


class StampsMetadata(GoodManager):
    """Correct: each stored copy gets ``metadata: {"added_at": n}`` from a running counter
    (merged into metadata the caller gave); get_messages() and views carry the stamp. Equal
    to what was added once the annotation key ``metadata`` is ignored."""

    _added = 0

    def _stored(self, message: dict) -> Any:
        stored = clone(message)
        if isinstance(stored, dict):
            self._added += 1
            given = stored.get("metadata")
            stored["metadata"] = {
                **(given if isinstance(given, dict) else {}),
                "added_at": self._added,
            }
        return stored


class _RewritesView(GoodManager):
    """Passes each message (a deep copy) to ``_rewrite`` before planning, so the view and the
    compaction events are planned and counted as the view shows them."""

    def _prepared(self, history: list[Any]) -> list[Any]:
        return [self._rewrite(clone(m)) for m in history]

    def _rewrite(self, message: dict) -> dict:
        return message


def _flip(content: Any) -> Any:
    if isinstance(content, str) and content:
        return [{"type": "text", "text": content}]
    if isinstance(content, list) and len(content) == 1 and content[0].get("type") == "text":
        return content[0]["text"]
    return content


class FlipsTextShape(_RewritesView):
    """Correct: in the view, string content becomes one text block and a single text block
    becomes a string, in messages and in ``tool_result`` blocks (libraries that convert
    between the OpenAI and Anthropic content forms do this)."""

    def _rewrite(self, message: dict) -> dict:
        for result in (b for b in blocks(message) if b.get("type") == "tool_result"):
            result["content"] = _flip(result.get("content"))
        if "content" in message:
            message["content"] = _flip(message["content"])
        return message


class NullsEmptyContent(_RewritesView):
    """Correct: in the view, ``content: ""`` becomes ``None`` and ``content: None`` is left
    out (a calling assistant message without content), and an empty ``tool_result`` content
    is left out."""

    def _rewrite(self, message: dict) -> dict:
        for result in blocks(message):
            if result.get("type") == "tool_result" and result.get("content") == "":
                del result["content"]
        if message.get("content") == "":
            message["content"] = None
        elif "content" in message and message["content"] is None:
            del message["content"]
        return message


class ReserializesArguments(_RewritesView):
    """Correct: in the view, tool call arguments are parsed and dumped again (indented, keys
    sorted), ``type`` is left out (it defaults to "function"), and ``tool_use`` input keys
    come in reverse order."""

    def _rewrite(self, message: dict) -> dict:
        for call in message.get("tool_calls") or ():
            call.pop("type", None)
            function = call["function"]
            function["arguments"] = json.dumps(
                json.loads(function["arguments"]), indent=2, sort_keys=True
            )
        for use in (b for b in blocks(message) if b.get("type") == "tool_use"):
            use["input"] = dict(reversed(list(use["input"].items())))
        return message


class RebuildsMessages(GoodManager):
    """Correct: each view message is rebuilt from the keys the manager models (role, content,
    tool_calls with id, type and function, tool_call_id); any other key is dropped, and the
    manager adds its own ``id`` (``msg_<history index>``)."""

    def _prepared(self, history: list[Any]) -> list[Any]:
        return [self._rebuilt(m, i) for i, m in enumerate(history)]

    @staticmethod
    def _rebuilt(message: dict, index: int) -> dict:
        out = {"id": f"msg_{index}", "role": message["role"]}
        for key in ("content", "tool_call_id"):
            if key in message:
                out[key] = clone(message[key])
        if message.get("tool_calls"):
            out["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {
                        "name": call["function"]["name"],
                        "arguments": call["function"]["arguments"],
                    },
                }
                for call in message["tool_calls"]
            ]
        return out


class ClearsOldToolOutputs(GoodManager):
    """Correct: in the view, every tool output before the newest calling message becomes
    ``[... N lines omitted ...]``, which is longer than a short output such as ``ok``; ids
    stay, and the view is planned with the markers' sizes."""

    def _prepared(self, history: list[Any]) -> list[Any]:
        newest = max((i for i, m in enumerate(history) if self._calls(m)), default=0)
        marked = list(history)
        for index in range(newest):
            if outputs(history[index]):
                message = marked[index] = clone(history[index])
                for owner in outputs(message):
                    lines = owner["content"].count("\n") + 1
                    owner["content"] = f"[... {lines} lines omitted ...]"
        return marked


class MergesSystem(GoodManager):
    """Correct but not preserving every system message as it was: when a view holds two or
    more system messages, they become one, their texts joined by a blank line, in the place
    of the first (some providers take one system prompt)."""

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)
        systems = [i for i, m in enumerate(view) if role_of(m) == "system"]
        if len(systems) < 2:
            return view
        text = "\n\n".join(view[i]["content"] for i in systems)
        merged = {"role": "system", "content": text}
        return [
            merged if i == systems[0] else m for i, m in enumerate(view) if i not in systems[1:]
        ]


class SlidesEveryTurn(GoodManager):
    """Correct, and a prompt cache's worst case: the view is the pinned units and the newest
    whole units holding at most 12 messages (within the budget), so its start moves on every
    request once the conversation is longer. Every required property holds; cache_stability
    (advisory) is far below its bar."""

    WINDOW = 12

    def _plan(self, history: list[Any], limit: int) -> list[int]:
        kept = super()._plan(history, limit)
        units = self._units(history)
        pinned = {i for k in self._pinned(history, units) for i in units[k][0]}
        newest: list[int] = []
        for ids, _complete in reversed(units):
            if ids[0] in pinned or not set(ids) <= set(kept):
                continue
            if len(newest) + len(ids) > self.WINDOW:
                break
            newest[:0] = ids
        return sorted(pinned | set(newest))


class SortsResultsById(GoodManager):
    """Correct: in the view, the results of each message's parallel calls come sorted by call
    id (the ``tool`` messages after an OpenAI calling message, the ``tool_result`` blocks of an
    Anthropic user message), whatever order they were added in. The APIs take the results of
    parallel calls in any order, so the view keeps the history's order as they read it, and
    asking again gives the same view."""

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        return results_by_id(super()._render(history, kept))
