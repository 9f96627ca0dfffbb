"""Hypothesis strategies for agent conversations in every shape, and for budgets.

Tool-call ids are not drawn: a round is a *template* (shape, outputs) and the state machine
numbers its calls, so ids are unique in a history however Hypothesis shrinks it. Every
template's repr is valid Python, so a printed failing run pastes into a test as is.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from hypothesis import strategies as st

from ctxkit.shapes.rules import system_in_messages
from ctxkit.shapes.spoken import CHAT_FAMILY

__all__ = [
    "BAD_MESSAGES",
    "CHAT_FAMILY",
    "GROWTH_LINE",
    "SHAPES",
    "BadMessage",
    "Budget",
    "Conversation",
    "RoundTemplate",
    "bad_messages_of",
    "budgets",
    "conversation_plans",
    "conversations",
    "example_shapes",
    "holds_system",
    "in_shape",
    "plain_messages",
    "round_templates",
    "texts",
]

Shape = Literal["openai", "anthropic", "responses", "gemini", "bedrock", "genai"]

_SENTENCES = (
    "read the file",
    "fix the failing test in config.py",
    "ok",
    "Traceback (most recent call last): KeyError: 'x'",
    "値を確認してください",
    "测试失败了，请修复",  # noqa: RUF001 - a real CJK comma
    "ファイルを読んでください 🙂",
    "naïve café résumé",
    "def f(x):\n    return {'a': [1, 2]}",
    '{"json": true, "n": 3}',
    "x" * 200,
    "line one\nline two\n\nline four",
)


# Strategies are built once (functools.cache, module constants): building one costs more than
# drawing from it, and the search draws thousands of texts and rounds.


@cache
def texts(max_words: int = 24) -> st.SearchStrategy[str]:
    """Short prose with unicode, CJK, emoji and code: one choice, so it shrinks at once."""
    return st.sampled_from(_SENTENCES[: max(1, max_words)])


@cache
def outputs() -> st.SearchStrategy[str]:
    """Tool outputs: mostly short, sometimes hundreds of lines, rarely tens of kilobytes."""
    short = st.sampled_from(["", "ok", "0 files", "Error: permission denied"])
    lines = st.integers(20, 400).map(lambda n: "\n".join(f"{i}: ok {i * 7 % 13}" for i in range(n)))
    huge = st.integers(2_000, 24_000).map(lambda n: "y" * n)
    # one_of picks a branch uniformly, so repeating one is how to weight it
    return st.one_of(short, texts(), short, texts(), lines, short, texts(), huge)


GROWTH_LINE = "2026-11-29 04:48:38 INFO worker 3: GET /api/items?page=7 handled in 12 ms\n"
"""A line of the log an agent reads when a history is grown toward the size where the target
compacts (:meth:`~ctxkit.conformance.search.machine.ConformanceMachine.grow_turn`): varied
enough to count like real text, repeated so a script writes it as ``line * n``."""


SHAPES: tuple[Shape, ...] = ("openai", "anthropic", "responses", "gemini", "bedrock", "genai")
# CHAT_FAMILY (ctxkit.shapes.spoken): the shapes that share their text messages, and so may
# mix in one history as they always have in the suite (a history of another shape stays in it:
# no provider takes mixed requests).


def example_shapes(drawn: Shape, allowed: tuple[Shape, ...]) -> tuple[Shape, ...]:
    """The shapes one example's history is written in: the drawn shape where the run allows
    it (else the run's first), with the rest of its family where it has one."""
    shape = drawn if drawn in allowed else allowed[0]
    if shape in CHAT_FAMILY:
        return tuple(s for s in allowed if s in CHAT_FAMILY)
    return (shape,)


def holds_system(shapes: tuple[Shape, ...]) -> bool:
    """Whether an example written in ``shapes`` carries system messages: only where a message
    of the first shape's list may hold the system prompt (Chat Completions, Responses, GenAI;
    the chat family's texts are written as Chat Completions). Anthropic alone, Gemini and
    Bedrock keep it in a field beside the list, so their histories get none: a manager written
    for them may rightly refuse one."""
    return system_in_messages(shapes[0])


def in_shape(message: dict[str, Any], shape: Shape) -> dict[str, Any]:
    """A text message (string content, or text blocks) written the way ``shape`` writes text.
    System messages keep the Chat Completions form where a shape has no system role in its
    message list (Gemini, Bedrock: the system prompt travels beside it)."""
    role, content = message["role"], message.get("content")
    text = content if isinstance(content, str) else "".join(b["text"] for b in content)
    if shape == "gemini" and role != "system":
        return {"role": "model" if role == "assistant" else "user", "parts": [{"text": text}]}
    if shape == "bedrock" and role != "system":
        return {"role": role, "content": [{"text": text}]}
    if shape == "genai":
        return {"role": role, "parts": [{"type": "text", "content": text}]}
    if shape == "responses" and isinstance(content, list) and role != "assistant":
        part = "output_text" if role == "assistant" else "input_text"
        return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}
    return message


@dataclass(frozen=True)
class RoundTemplate:
    """An assistant message with parallel calls and their results, ids assigned later.

    ``extras``: what travels with a call in shapes that have it: Anthropic thinking and a
    server tool answered in the same message, a Responses reasoning item before the calls,
    Gemini call ids and a thought signature, Bedrock reasoning content, a GenAI reasoning
    part."""

    shape: Shape
    outputs: tuple[str, ...]
    order: tuple[int, ...]
    """Results may arrive in any order where the shape pairs by id; this is theirs."""
    extras: bool = False

    def in_shapes(self, shapes: tuple[Shape, ...]) -> RoundTemplate:
        """This round, or the same round in the first shape allowed if its own is not."""
        if self.shape in shapes:
            return self
        return RoundTemplate(shapes[0], self.outputs, self.order, self.extras)

    def messages(self, ids: Iterator[int]) -> list[dict[str, Any]]:
        """The messages of this round, numbering calls from ``ids``."""
        return _ROUNDS[self.shape](self, ids)

    def _openai(self, ids: Iterator[int]) -> list[dict[str, Any]]:
        names = [f"call_{next(ids)}" for _ in self.outputs]
        call = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": name,
                    "type": "function",
                    "function": {"name": "bash", "arguments": f'{{"n": {k}}}'},
                }
                for k, name in enumerate(names)
            ],
        }
        results = [
            {"role": "tool", "tool_call_id": names[k], "content": self.outputs[k]}
            for k in self.order
        ]
        return [call, *results]

    def _anthropic(self, ids: Iterator[int]) -> list[dict[str, Any]]:
        names = [f"toolu_{next(ids)}" for _ in self.outputs]
        blocks: list[dict[str, Any]] = []
        if self.extras:
            number = next(ids)
            blocks += [
                {
                    "type": "thinking",
                    "thinking": "The test output first.",
                    "signature": f"sig{number}",
                },
                {
                    "type": "server_tool_use",
                    "id": f"srvtoolu_{number}",
                    "name": "web_search",
                    "input": {"query": "pytest flags"},
                },
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": f"srvtoolu_{number}",
                    "content": [
                        {
                            "type": "web_search_result",
                            "title": "pytest",
                            "url": "https://docs.pytest.org",
                            "encrypted_content": f"enc{number}",
                        }
                    ],
                },
            ]
        blocks.append({"type": "text", "text": "Let me check."})
        blocks += [
            {"type": "tool_use", "id": name, "name": "bash", "input": {"n": k}}
            for k, name in enumerate(names)
        ]
        answer = {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": name,
                    "content": output,
                    **({"is_error": True} if output.startswith("Error") else {}),
                }
                for name, output in zip(names, self.outputs, strict=True)
            ],
        }
        return [{"role": "assistant", "content": blocks}, answer]

    def _responses(self, ids: Iterator[int]) -> list[dict[str, Any]]:
        numbers = [next(ids) for _ in self.outputs]
        items: list[dict[str, Any]] = []
        if self.extras:
            items.append(
                {
                    "type": "reasoning",
                    "id": f"rs_{numbers[0]}",
                    "summary": [{"type": "summary_text", "text": "Run it and look."}],
                    "encrypted_content": f"enc{numbers[0]}",
                }
            )
        items += [
            {
                "type": "function_call",
                **({"id": f"fc_{n}"} if self.extras else {}),
                "call_id": f"call_{n}",
                "name": "bash",
                "arguments": f'{{"n": {k}}}',
            }
            for k, n in enumerate(numbers)
        ]
        items += [
            {
                "type": "function_call_output",
                "call_id": f"call_{numbers[k]}",
                "output": self.outputs[k],
            }
            for k in self.order
        ]
        return items

    def _gemini(self, ids: Iterator[int]) -> list[dict[str, Any]]:
        # Without extras, calls carry no id and are answered by position and name; with them,
        # by id, in the results' own order, and the first call carries a thought signature.
        numbers = [next(ids) for _ in self.outputs]
        parts = []
        for k, n in enumerate(numbers):
            call: dict[str, Any] = {"name": "bash", "args": {"n": k}}
            if self.extras:
                call["id"] = f"call_{n}"
            part: dict[str, Any] = {"functionCall": call}
            if self.extras and k == 0:
                part["thoughtSignature"] = f"c2lnbmF0dXJl{n:08d}"
            parts.append(part)
        order = self.order if self.extras else range(len(numbers))
        responses = []
        for k in order:
            response: dict[str, Any] = {"name": "bash", "response": {"output": self.outputs[k]}}
            if self.extras:
                response["id"] = f"call_{numbers[k]}"
            responses.append({"functionResponse": response})
        return [{"role": "model", "parts": parts}, {"role": "user", "parts": responses}]

    def _bedrock(self, ids: Iterator[int]) -> list[dict[str, Any]]:
        names = [f"tooluse_{next(ids)}" for _ in self.outputs]
        blocks: list[dict[str, Any]] = []
        if self.extras:
            blocks.append(
                {"reasoningContent": {"reasoningText": {"text": "Run it.", "signature": names[0]}}}
            )
        blocks += [
            {"toolUse": {"toolUseId": name, "name": "bash", "input": {"n": k}}}
            for k, name in enumerate(names)
        ]
        results = [
            {
                "toolResult": {
                    "toolUseId": names[k],
                    "content": [{"text": self.outputs[k]}],
                    **({"status": "error"} if self.outputs[k].startswith("Error") else {}),
                }
            }
            for k in self.order
        ]
        return [{"role": "assistant", "content": blocks}, {"role": "user", "content": results}]

    def _genai(self, ids: Iterator[int]) -> list[dict[str, Any]]:
        names = [f"call_{next(ids)}" for _ in self.outputs]
        parts: list[dict[str, Any]] = []
        if self.extras:
            parts.append({"type": "reasoning", "content": "Run it."})
        parts += [
            {"type": "tool_call", "id": name, "name": "bash", "arguments": {"n": k}}
            for k, name in enumerate(names)
        ]
        results = [
            {
                "role": "tool",
                "parts": [
                    {"type": "tool_call_response", "id": names[k], "response": self.outputs[k]}
                ],
            }
            for k in self.order
        ]
        return [{"role": "assistant", "parts": parts}, *results]


_ROUNDS = {
    "openai": RoundTemplate._openai,
    "anthropic": RoundTemplate._anthropic,
    "responses": RoundTemplate._responses,
    "gemini": RoundTemplate._gemini,
    "bedrock": RoundTemplate._bedrock,
    "genai": RoundTemplate._genai,
}


_COUNTS = [1, 1, 1, 2, 3]
_CALL_COUNTS = st.sampled_from(_COUNTS)
_ORDERS = {count: st.permutations(range(count)) for count in set(_COUNTS)}
_EXTRAS = st.sampled_from([False, False, True])


@cache
def round_templates(shapes: tuple[Shape, ...] = CHAT_FAMILY) -> st.SearchStrategy[RoundTemplate]:
    """A round of 1-3 parallel calls (weighted to one), with extras one time in three. The
    state machine draws from the chat family and then keeps to the example's shapes
    (:meth:`RoundTemplate.in_shapes`), so what it draws never depends on the run's options."""
    return _round_templates(st.sampled_from(shapes))


@st.composite
def _round_templates(draw: st.DrawFn, shapes: st.SearchStrategy[Shape]) -> RoundTemplate:
    shape = draw(shapes)
    count = draw(_CALL_COUNTS)
    results = tuple(draw(outputs()) for _ in range(count))
    order = tuple(draw(_ORDERS[count]))
    extras = draw(_EXTRAS)
    return RoundTemplate(shape, results, order, extras)


@cache
def plain_messages() -> st.SearchStrategy[dict[str, Any]]:
    """Messages with no tool traffic: user prose (both forms), assistant prose, system notes."""
    return st.one_of(
        texts().map(lambda t: {"role": "user", "content": t}),
        texts().map(lambda t: {"role": "user", "content": [{"type": "text", "text": t}]}),
        texts().map(lambda t: {"role": "assistant", "content": t}),
        texts(8).map(lambda t: {"role": "system", "content": "Reminder: " + t}),
    )


@dataclass(frozen=True)
class Conversation:
    """A well-formed conversation before its shape is chosen: texts by role, and tool rounds
    as templates. Its repr is valid Python."""

    parts: tuple[tuple[str, str] | RoundTemplate, ...]

    def messages(self, shapes: tuple[Shape, ...] = CHAT_FAMILY) -> list[dict[str, Any]]:
        """The messages, each round in its own shape where ``shapes`` allows it, else in the
        first shape allowed; texts as the first shape writes them, system messages only where
        it holds them (:func:`holds_system`)."""
        ids = itertools.count(10_000)
        found: list[dict[str, Any]] = []
        for part in self.parts:
            if isinstance(part, RoundTemplate):
                found.extend(part.in_shapes(shapes).messages(ids))
            elif part[0] != "system" or holds_system(shapes):
                found.append(in_shape({"role": part[0], "content": part[1]}, shapes[0]))
        return found


_EVERY = [0, 10, 3]
_REMINDERS = st.sampled_from(_EVERY)
_REMINDED = {every: st.integers(0, every - 1) for every in _EVERY if every}
_ROUNDS_PER_TURN = st.integers(0, 2)


@cache
def conversation_plans(max_turns: int = 6) -> st.SearchStrategy[Conversation]:
    """A system prompt, then turns with tool rounds. Some conversations have no
    mid-conversation system reminders, some one turn in ten, some one in three (agents that
    inject them often): a run meets few and many system messages alike."""
    return _conversation_plans(st.integers(0, max_turns))


@st.composite
def _conversation_plans(draw: st.DrawFn, turns: st.SearchStrategy[int]) -> Conversation:
    parts: list[tuple[str, str] | RoundTemplate] = [("system", "You are a careful agent.")]
    every = draw(_REMINDERS)
    for _ in range(draw(turns)):
        if every and draw(_REMINDED[every]) == 0:
            parts.append(("system", "Reminder: " + draw(texts())))
        parts.append(("user", draw(texts())))
        parts.extend(draw(round_templates()) for _ in range(draw(_ROUNDS_PER_TURN)))
        parts.append(("assistant", draw(texts())))
    return Conversation(tuple(parts))


def conversations(
    max_turns: int = 6, shapes: tuple[Shape, ...] = CHAT_FAMILY
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Well-formed conversations as message lists (see :func:`conversation_plans`)."""
    return conversation_plans(max_turns).map(lambda plan: plan.messages(shapes))


Via = Literal["token_budget", "provider", "none"]


@dataclass(frozen=True)
class Budget:
    """How a request states its budget: as a share of the history's tokens, or a fixed number,
    passed as ``token_budget``, through a provider's ``get_info().defaults``, or not at all
    (``none``: the manager's own fallback decides, and size is unused)."""

    share: float | None
    tokens: int | None
    via: Via = "token_budget"

    def resolve(self, history_tokens: int) -> int:
        if self.tokens is not None:
            return self.tokens
        assert self.share is not None
        return max(1, int(history_tokens * self.share))


@cache
def budgets() -> st.SearchStrategy[Budget]:
    """Tight (a share of the history), loose (more than all of it) and infeasible (tiny);
    one request in five names no budget at all."""
    shares = st.integers(5, 400).map(lambda percent: (percent / 100, None))
    fixed = st.sampled_from([8, 40, 200, 1_000, 100_000]).map(lambda t: (None, t))
    via = st.sampled_from(["token_budget", "token_budget", "provider", "provider", "none"])
    return st.builds(lambda size, how: Budget(size[0], size[1], how), st.one_of(shares, fixed), via)


@dataclass(frozen=True)
class BadMessage:
    """Something that is not a valid message, and what is wrong with it."""

    value: Any
    problem: str


_NOT_MESSAGES = (
    BadMessage(["role", "user"], "a list, not a dict"),
    BadMessage("hello", "a string, not a dict"),
    BadMessage(None, "None"),
    BadMessage({"content": "no role"}, "no role"),
    BadMessage({"role": "wizard", "content": "hi"}, "an unknown role"),
)
"""Not a message in any shape."""

BAD_MESSAGES: dict[Shape, tuple[BadMessage, ...]] = {
    "openai": (
        BadMessage({"role": "tool", "content": "orphan"}, "a tool result without an id"),
        BadMessage(
            {"role": "assistant", "content": None, "tool_calls": [{"type": "function"}]},
            "a tool call without an id",
        ),
    ),
    "anthropic": (
        BadMessage(
            {"role": "assistant", "content": [{"type": "tool_use", "name": "bash", "input": {}}]},
            "a tool_use block without an id",
        ),
        BadMessage(
            {"role": "user", "content": [{"type": "tool_result", "content": "done"}]},
            "a tool_result block without a tool_use_id",
        ),
        BadMessage({"role": "user", "content": [{"type": "text"}]}, "a text block without text"),
    ),
    "responses": (
        BadMessage(
            {"type": "function_call", "name": "bash", "arguments": "{}"},
            "a function_call item without a call_id",
        ),
        BadMessage(
            {"type": "function_call_output", "output": "done"},
            "a function_call_output item without a call_id",
        ),
    ),
    "gemini": (
        BadMessage({"role": "model", "parts": "hi"}, "parts that are not a list"),
        BadMessage(
            {"role": "model", "parts": [{"functionCall": {"args": {}}}]},
            "a functionCall without a name",
        ),
        BadMessage(
            {"role": "user", "parts": [{"functionResponse": {"response": {}}}]},
            "a functionResponse without a name",
        ),
    ),
    "bedrock": (
        BadMessage(
            {"role": "assistant", "content": [{"toolUse": {"name": "bash", "input": {}}}]},
            "a toolUse block without a toolUseId",
        ),
        BadMessage(
            {"role": "user", "content": [{"toolResult": {"content": [{"text": "done"}]}}]},
            "a toolResult block without a toolUseId",
        ),
    ),
    "genai": (BadMessage({"role": "user", "parts": "hi"}, "parts that are not a list"),),
}
"""What each API refuses that a manager of its shape must refuse too: every one is tried, in
the shapes a run judges and no other (a manager written for one API may rightly take another
API's message as text)."""


def bad_messages_of(shapes: tuple[Shape, ...]) -> tuple[BadMessage, ...]:
    """Every bad message of ``shapes``, in a fixed order: what is no message in any shape,
    then each shape's own."""
    return _NOT_MESSAGES + tuple(bad for shape in shapes for bad in BAD_MESSAGES[shape])
