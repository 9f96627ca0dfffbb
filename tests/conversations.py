"""Hypothesis strategies for agent conversations in both shapes, for the project's own tests."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

WORDS = st.sampled_from(
    ["read", "the", "file", "error", "config", "値", "测试", "ok", "Traceback", "🙂", "x" * 40]
)


@st.composite
def texts(draw: st.DrawFn, max_words: int = 30) -> str:
    words = draw(st.lists(WORDS, max_size=max_words))
    return " ".join(words)


@st.composite
def outputs(draw: st.DrawFn) -> str:
    """Tool outputs from empty to a few hundred lines, the long ones worth shortening."""
    kind = draw(st.sampled_from(["tiny", "short", "lines", "long_line"]))
    if kind == "tiny":
        return draw(st.sampled_from(["", "ok", "0 files"]))
    if kind == "short":
        return draw(texts())
    count = draw(st.integers(50, 400))
    if kind == "lines":
        return "\n".join(f"line {i}: value={i * 7 % 13}" for i in range(count))
    return "y" * (count * 40)


@st.composite
def tool_round(
    draw: st.DrawFn, shape: str, ids: Iterator[int] | None = None
) -> list[dict[str, Any]]:
    """An assistant message with 1-3 parallel calls and all their results."""
    numbers = ids if ids is not None else itertools.count()

    def _new_id(prefix: str) -> str:
        return f"{prefix}_{next(numbers)}"

    count = draw(st.integers(1, 3))
    results = [draw(outputs()) for _ in range(count)]
    if shape == "openai":
        ids = [_new_id("call") for _ in range(count)]
        call = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "bash", "arguments": "{}"}}
                for i in ids
            ],
        }
        order = draw(st.permutations(range(count)))
        answers = [{"role": "tool", "tool_call_id": ids[k], "content": results[k]} for k in order]
        return [call, *answers]
    ids = [_new_id("toolu") for _ in range(count)]
    call = {
        "role": "assistant",
        "content": [{"type": "text", "text": "checking"}]
        + [
            {"type": "tool_use", "id": i, "name": "bash", "input": {"n": k}}
            for k, i in enumerate(ids)
        ],
    }
    answer = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": i, "content": r, "is_error": "error" in r}
            for i, r in zip(ids, results, strict=True)
        ],
    }
    return [call, answer]


@st.composite
def turn(draw: st.DrawFn, ids: Iterator[int]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if draw(st.integers(0, 9)) == 0:
        messages.append({"role": "system", "content": "Reminder: " + draw(texts(8))})
    messages.append({"role": "user", "content": draw(texts()) or "go on"})
    for _ in range(draw(st.integers(0, 3))):
        messages.extend(draw(tool_round(draw(st.sampled_from(["openai", "anthropic"])), ids)))
    messages.append({"role": "assistant", "content": draw(texts()) or "done"})
    return messages


@st.composite
def conversations(draw: st.DrawFn, max_turns: int = 8) -> list[dict[str, Any]]:
    """A well-formed conversation: a system prompt, then turns of both shapes."""
    messages = [{"role": "system", "content": "You are a careful coding agent."}]
    ids = itertools.count()
    for _ in range(draw(st.integers(1, max_turns))):
        messages.extend(draw(turn(ids)))
    return messages
