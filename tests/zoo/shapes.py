"""Members in the newer shapes (Responses items, Anthropic thinking and server tools, Gemini
parts, Bedrock Converse, OpenTelemetry GenAI parts): one manager correct in all six, members
that each break one provider rule, and correct-but-unusual ones.

Stdlib only, and nothing of ctxkit: each shape is read here a third time, in this file's own
words, so a member never shares a reading with the checker that judges it.
"""

from __future__ import annotations

from typing import Any

from tests.zoo.base import GoodManager, clone, role_of

CALL_ITEMS = {
    "function_call",
    "custom_tool_call",
    "computer_call",
    "shell_call",
    "apply_patch_call",
}
NEXT_MESSAGE = ("anthropic", "bedrock", "gemini")


def _parts(message: dict) -> list[dict]:
    parts = message.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _content(message: dict) -> list[dict]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def kind_of(message: Any) -> str:
    """Which provider's tool traffic a message carries (``plain`` for none)."""
    if not isinstance(message, dict):
        return "plain"
    if message.get("type") in CALL_ITEMS or str(message.get("type", "")).endswith("_output"):
        return "responses"
    if message.get("type") == "reasoning":
        return "reasoning"
    if any("functionCall" in p or "functionResponse" in p for p in _parts(message)):
        return "gemini"
    if any(p.get("type") in ("tool_call", "tool_call_response") for p in _parts(message)):
        return "genai"
    if any("toolUse" in b or "toolResult" in b for b in _content(message)):
        return "bedrock"
    if any(b.get("type") in ("tool_use", "tool_result") for b in _content(message)):
        return "anthropic"
    if message.get("tool_calls") or role_of(message) == "tool":
        return "openai"
    return "plain"


def calls(message: Any) -> list[str]:
    if not isinstance(message, dict):
        return []
    if message.get("type") in CALL_ITEMS:
        return [message.get("call_id")]
    found = [c.get("id") for c in message.get("tool_calls") or () if isinstance(c, dict)]
    found += [b.get("id") for b in _content(message) if b.get("type") == "tool_use"]
    found += [b["toolUse"].get("toolUseId") for b in _content(message) if "toolUse" in b]
    found += [
        p.get("id") or f"{p.get('name')}@{k}"
        for k, p in enumerate(p for p in _parts(message) if p.get("type") == "tool_call")
    ]
    found += [
        c.get("id") or f"{c.get('name')}@{k}"
        for k, c in enumerate(p["functionCall"] for p in _parts(message) if "functionCall" in p)
    ]
    return found


def answers(message: Any) -> list[str]:
    if not isinstance(message, dict):
        return []
    if str(message.get("type", "")).endswith("_output"):
        return [message.get("call_id")]
    if role_of(message) == "tool" and "parts" not in message:
        return [message.get("tool_call_id")]
    found = [b.get("tool_use_id") for b in _content(message) if b.get("type") == "tool_result"]
    found += [b["toolResult"].get("toolUseId") for b in _content(message) if "toolResult" in b]
    found += [
        p.get("id") or f"{p.get('name')}@{k}"
        for k, p in enumerate(p for p in _parts(message) if p.get("type") == "tool_call_response")
    ]
    found += [
        r.get("id") or f"{r.get('name')}@{k}"
        for k, r in enumerate(
            p["functionResponse"] for p in _parts(message) if "functionResponse" in p
        )
    ]
    return found


class ShapesManager(GoodManager):
    """Correct in all six shapes: plans whole units (a Responses reasoning item with the item
    it preceded, parallel call items with their outputs, next-message answers as one)."""

    ctxkit_shapes = "all"

    def _validate(self, message: Any) -> None:
        if not isinstance(message, dict):
            raise ValueError(f"a message must be a dict, not {type(message).__name__}")
        if "role" not in message and "type" not in message:
            raise ValueError("a message needs a role (or, for a Responses item, a type)")
        if (
            role_of(message) == "tool"
            and "parts" not in message
            and not message.get("tool_call_id")
        ):
            raise ValueError("a tool message needs the tool_call_id it answers")
        for call in message.get("tool_calls") or ():
            if not isinstance(call, dict) or not call.get("id"):
                raise ValueError("every tool call needs an id")

    def _units(self, history: list[Any]) -> list[tuple[list[int], bool]]:
        units, index = [], 0
        while index < len(history):
            stop = index
            while stop < len(history) and kind_of(history[stop]) == "reasoning":
                stop += 1  # reasoning travels with the item after it
            if stop == len(history):
                units.append((list(range(index, stop)), False))
                break
            waiting = set(calls(history[stop]))
            kind = kind_of(history[stop])
            stop += 1
            while (
                kind == "responses"
                and waiting
                and stop < len(history)
                and (history[stop].get("type") in CALL_ITEMS)
            ):
                waiting.update(calls(history[stop]))
                stop += 1
            if waiting and kind in NEXT_MESSAGE:
                after = history[stop] if stop < len(history) else None
                if kind_of(after) == kind and set(answers(after)) == waiting:
                    waiting, stop = set(), stop + 1
            elif waiting:
                while (
                    stop < len(history)
                    and kind_of(history[stop]) == kind
                    and (
                        not calls(history[stop])
                        and set(answers(history[stop])) <= waiting
                        and answers(history[stop])
                    )
                ):
                    waiting -= set(answers(history[stop]))
                    stop += 1
            members = history[index:stop]
            stray = not any(calls(m) for m in members) and any(answers(m) for m in members)
            units.append((list(range(index, stop)), not waiting and not stray))
            index = stop
        return units

    def _pinned(self, history: list[Any], units: list[tuple[list[int], bool]]) -> set[int]:
        heads = [history[ids[0]] for ids, _ in units]
        users = [
            k
            for k, m in enumerate(heads)
            if role_of(m) == "user" and not answers(m) and m.get("type") in (None, "message")
        ]
        return {k for k, m in enumerate(heads) if role_of(m) == "system"} | set(users[-1:])


# -- broken: each breaks one provider rule ---------------------------------------------------


class DropsReasoning(ShapesManager):
    """Leaves Responses reasoning items out of every view to save tokens: the provider
    refuses a function_call sent without the reasoning item that preceded it."""

    ctxkit_shapes = ("responses",)

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        return [m for m in super()._render(history, kept) if kind_of(m) != "reasoning"]


class DropsThinking(ShapesManager):
    """Strips thinking blocks from every assistant message: with thinking on, the turn
    whose tool calls the request answers must start with its thinking."""

    ctxkit_shapes = ("anthropic",)

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)
        for message in view:
            if role_of(message) == "assistant" and isinstance(message.get("content"), list):
                message["content"] = [
                    b
                    for b in message["content"]
                    if not (
                        isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking")
                    )
                ]
        return view


class FirstResponseOnly(ShapesManager):
    """Keeps only the first functionResponse part of each Gemini response turn ("the number
    of function response parts must equal the number of function call parts")."""

    ctxkit_shapes = ("gemini",)

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)
        for message in view:
            responses = [p for p in _parts(message) if "functionResponse" in p]
            if len(responses) > 1:
                message["parts"] = responses[:1]
        return view


class HoistsServerResults(ShapesManager):
    """Moves server tool result blocks to the start of their message (as a block sorter
    might): each now comes before the server_tool_use it answers."""

    ctxkit_shapes = ("anthropic",)

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)
        for message in view:
            content = message.get("content")
            if role_of(message) != "assistant" or not isinstance(content, list):
                continue
            server = [
                b
                for b in content
                if isinstance(b, dict) and str(b.get("type", "")).endswith("_tool_result")
            ]
            message["content"] = server + [b for b in content if b not in server]
        return view


class LastItems(ShapesManager):
    """The newest ``keep`` items, whatever they are (the Agents SDK's session limit,
    openai-agents-python #4322): an output can lead the view without its call."""

    def __init__(self, *, keep: int = 3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.keep = keep

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        return clone(history[-self.keep :])


# -- correct but unusual ----------------------------------------------------------------------


class ThinkingOnLastTurnOnly(ShapesManager):
    """Strips thinking from every assistant turn but the one the view's last message
    answers: what Anthropic itself does to earlier turns, so it must pass."""

    ctxkit_shapes = ("anthropic",)

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)
        for message in view[:-2]:
            if role_of(message) == "assistant" and isinstance(message.get("content"), list):
                message["content"] = [
                    b
                    for b in message["content"]
                    if not (
                        isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking")
                    )
                ] or [{"type": "text", "text": "(thinking left out)"}]
        return view


class ResponsesById(ShapesManager):
    """Sorts each Gemini response turn's parts by call id: answers by id need no order, so
    it must pass; responses without ids keep their places."""

    ctxkit_shapes = ("gemini",)

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)
        for message in view:
            parts = _parts(message)
            if parts and all(p.get("functionResponse", {}).get("id") for p in parts):
                message["parts"] = sorted(parts, key=lambda p: p["functionResponse"]["id"])[::-1]
        return view


class GeminiOnly(ShapesManager):
    """Takes Gemini contents only (and the system prompt, which Gemini carries beside them),
    refusing every other shape with a sentence, as a Gemini-native store does: it must pass
    every property in its shape, concurrent adds included."""

    ctxkit_shapes = ("gemini",)

    def _validate(self, message: Any) -> None:
        if isinstance(message, dict) and message.get("role") == "system":
            return
        if not (
            isinstance(message, dict)
            and message.get("role") in ("user", "model")
            and isinstance(message.get("parts"), list)
        ):
            raise ValueError("only Gemini contents are taken here: role user or model, parts")
        super()._validate(message)
