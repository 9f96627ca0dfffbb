"""Tests for the synthetic workload generator.

The pairing check here is written independently of ctxkit's own message code on purpose: the
workload feeds the demo, the benchmarks and the conformance runs, so it must not be validated
by the code it is used to exercise.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.workload import DEFAULT_SYSTEM_PROMPT, Workload, conversation

SHAPES = ("openai", "anthropic", "mixed")
CJK = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
ERROR_MARKERS = ("Error", "Traceback", "FAILED")


def _whole_turns(workload: Workload, at_least: int) -> list[dict[str, Any]]:
    """Whole turns until there are at least `at_least` messages, so no round is cut."""
    out: list[dict[str, Any]] = []
    for turn in workload.turns():
        out += turn
        if len(out) >= at_least:
            return out
    raise AssertionError("unreachable")


def _call_ids(msg: dict[str, Any]) -> list[str]:
    """Ids of the tool calls an assistant message makes, in either shape."""
    if msg["role"] != "assistant":
        return []
    if msg.get("tool_calls"):
        return [call["id"] for call in msg["tool_calls"]]
    if isinstance(msg["content"], list):
        return [b["id"] for b in msg["content"] if b["type"] == "tool_use"]
    return []


def _result_blocks(msg: dict[str, Any]) -> list[dict[str, Any]]:
    if msg["role"] == "user" and isinstance(msg["content"], list):
        return [b for b in msg["content"] if b["type"] == "tool_result"]
    return []


def _pairing_problems(messages: list[dict[str, Any]]) -> list[str]:
    """Every call is answered at once, nothing in between, no result elsewhere, ids unique."""
    problems: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(messages):
        msg, ids = messages[i], _call_ids(messages[i])
        if msg["role"] == "tool" or _result_blocks(msg):
            problems.append(f"orphan result at {i}")
        for call_id in ids:
            if call_id in seen:
                problems.append(f"duplicate id {call_id} at {i}")
            seen.add(call_id)
        if not ids:
            i += 1
        elif msg.get("tool_calls"):  # OpenAI: the next len(ids) messages are its tool results
            answers = messages[i + 1 : i + 1 + len(ids)]
            if [m["role"] for m in answers] != ["tool"] * len(ids):
                problems.append(f"calls at {i} not followed by {len(ids)} tool messages")
            elif sorted(m["tool_call_id"] for m in answers) != sorted(ids):
                problems.append(f"tool results after {i} answer other ids")
            i += 1 + len(ids)
        else:  # Anthropic: the very next message is a user message with exactly those results
            nxt = messages[i + 1] if i + 1 < len(messages) else {"role": "none", "content": ""}
            blocks = _result_blocks(nxt)
            if not blocks or len(blocks) != len(nxt["content"]):
                problems.append(f"tool_use at {i} not followed by a tool_result-only message")
            elif sorted(b["tool_use_id"] for b in blocks) != sorted(ids):
                problems.append(f"tool_result ids after {i} differ from tool_use ids")
            i += 2
    return problems


def _results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every tool result as {"content": str, "is_error": bool}, whatever the shape."""
    out = []
    for msg in messages:
        if msg["role"] == "tool":
            out.append({"content": msg["content"], "is_error": False})
        for block in _result_blocks(msg):
            out.append({"content": block["content"], "is_error": block.get("is_error", False)})
    return out


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    texts = []
    for msg in messages:
        content = msg["content"]
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [b.get("text") or b.get("content") or "" for b in content]
    return texts


@pytest.fixture(scope="module")
def big() -> dict[str, list[dict[str, Any]]]:
    """One 5,000-message conversation (whole turns) per shape, shared by several tests."""
    return {shape: _whole_turns(Workload(seed=7, shape=shape), 5_000) for shape in SHAPES}


def test_same_seed_same_output_different_seed_differs() -> None:
    for shape in SHAPES:
        assert conversation(300, seed=1, shape=shape) == conversation(300, seed=1, shape=shape)
        assert conversation(300, seed=1, shape=shape) != conversation(300, seed=2, shape=shape)
    assert conversation(300, seed=1, shape="openai") != conversation(300, seed=1, shape="anthropic")


def test_turns_restarts_the_same_conversation() -> None:
    w = Workload(seed=3)
    first = [turn for turn, _ in zip(w.turns(), range(20), strict=False)]
    again = [turn for turn, _ in zip(w.turns(), range(20), strict=False)]
    assert first == again
    assert first[0][0] == {"role": "system", "content": DEFAULT_SYSTEM_PROMPT}
    assert [m for t in first for m in t][:100] == w.messages(100)


@pytest.mark.parametrize("shape", SHAPES)
def test_every_call_is_answered_at_once_with_unique_ids(big: dict, shape: str) -> None:
    messages = big[shape]
    assert len(messages) >= 5_000
    assert _pairing_problems(messages) == []
    calling = [m for m in messages if _call_ids(m)]
    counts = [len(_call_ids(m)) for m in calling]
    assert set(counts) == {1, 2, 3}  # parallel calls happen, weighted toward one
    assert counts.count(1) > counts.count(2) > counts.count(3)


def test_the_checker_catches_broken_pairing() -> None:
    msgs = conversation(60, seed=5)
    i = next(i for i, m in enumerate(msgs) if _call_ids(m))
    assert _pairing_problems(msgs[:i] + msgs[i + 1 :])  # orphaned result
    swapped = [*msgs[: i + 1], {"role": "user", "content": "hi"}, *msgs[i + 1 :]]
    assert _pairing_problems(swapped)  # something in between
    anth = _whole_turns(Workload(seed=5, shape="anthropic"), 30)
    j = next(j for j, m in enumerate(anth) if _call_ids(m))
    assert _pairing_problems(anth[: j + 1] + anth[j + 2 :])  # tool_use left unanswered


def test_message_shapes(big: dict) -> None:
    for msg in big["openai"]:
        assert msg["role"] in {"system", "user", "assistant", "tool"}
        for call in msg.get("tool_calls", []):
            assert re.fullmatch(r"call_\d{6}", call["id"])
            assert call["type"] == "function"
            assert isinstance(json.loads(call["function"]["arguments"]), dict)
        if msg["role"] == "tool":
            assert isinstance(msg["content"], str)
    for msg in big["anthropic"]:
        assert msg["role"] in {"system", "user", "assistant"}
        if msg["role"] == "assistant":
            assert isinstance(msg["content"], list)
            assert msg["content"]
            for block in msg["content"]:
                assert block["type"] in {"text", "tool_use"}
                if block["type"] == "tool_use":
                    assert re.fullmatch(r"toolu_\d{6}", block["id"])
                    assert isinstance(block["input"], dict)
    mixed = big["mixed"]
    assert any(m["role"] == "tool" for m in mixed)
    assert any(_result_blocks(m) for m in mixed)


@pytest.mark.parametrize("shape", SHAPES)
def test_turn_structure(shape: str) -> None:
    w = Workload(seed=11, shape=shape)
    for index, turn in zip(range(150), w.turns(), strict=False):
        if index == 0:
            assert turn[0] == {"role": "system", "content": DEFAULT_SYSTEM_PROMPT}
        body = turn[1:] if turn[0]["role"] == "system" else turn
        user = body[0]
        assert user["role"] == "user"
        assert not _result_blocks(user)
        last = body[-1]
        assert last["role"] == "assistant"
        assert not _call_ids(last)
        rounds = sum(1 for m in body if _call_ids(m))
        assert 1 <= rounds <= 4
        assert _pairing_problems(turn) == []


def test_sizes_content_kinds_errors_and_system_notes() -> None:
    messages = _whole_turns(Workload(seed=0, shape="mixed"), 8_000)
    results = _results(messages)
    assert len(results) >= 3_000
    sizes = [len(r["content"].encode()) for r in results[:3_000]]
    assert min(sizes) < 200
    assert max(sizes) > 100_000
    assert max(sizes) <= 200_000
    share_small = sum(s < 2_000 for s in sizes) / len(sizes)
    assert 0.65 < share_small < 0.85  # heavy-tailed: mostly small, a few huge
    texts = _texts(messages)
    assert any(CJK.search(t) for t in texts)
    assert any(ord(c) > 0xFFFF for t in texts for c in t)  # emoji (outside the BMP)
    errors = [r for r in results if r["content"].startswith(("Error", "Traceback"))]
    errors += [r for r in results if "FAILED" in r["content"]]
    assert len(errors) > 0.05 * len(results)
    flagged = [r for r in results if r["is_error"]]
    assert flagged
    assert all(any(k in r["content"] for k in ERROR_MARKERS) for r in flagged)
    system_at = [i for i, m in enumerate(messages) if m["role"] == "system"]
    assert system_at[0] == 0
    assert len(system_at) > 1


def test_text_is_not_trivially_repetitive() -> None:
    results = [r["content"] for r in _results(conversation(3_000, seed=4))]
    big_ones = [c for c in results if len(c) > 1_000]
    assert len(set(big_ones)) == len(big_ones)
    longest = max(results, key=len)
    lines = longest.splitlines()
    assert len(lines) > 100
    assert len(set(lines)) > 0.9 * len(lines)


def test_max_output_bytes_caps_every_result() -> None:
    msgs = Workload(seed=2, shape="mixed", max_output_bytes=500).messages(2_000)
    sizes = [len(r["content"].encode()) for r in _results(msgs)]
    assert max(sizes) <= 500
    assert max(sizes) > 400


@pytest.mark.parametrize("n", [0, 1, 2, 7, 333, 1_001])
def test_messages_is_exact_and_a_prefix(n: int) -> None:
    w = Workload(seed=9, shape="mixed")
    first = w.messages(n)
    assert len(first) == n
    assert w.messages(n + 50)[:n] == first


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(0, 120), shape=st.sampled_from(SHAPES))
def test_prefix_property(seed: int, n: int, shape: str) -> None:
    assert conversation(n + 30, seed=seed, shape=shape)[:n] == conversation(
        n, seed=seed, shape=shape
    )


@pytest.mark.parametrize("shape", SHAPES)
def test_json_round_trip(shape: str) -> None:
    msgs = conversation(1_500, seed=6, shape=shape)
    assert json.loads(json.dumps(msgs)) == msgs
    assert json.loads(json.dumps(msgs, ensure_ascii=False)) == msgs


def test_returned_messages_are_fresh() -> None:
    w = Workload(seed=12, shape="anthropic")
    expected = Workload(seed=12, shape="anthropic").messages(400)
    got = w.messages(400)
    nested = [id(b) for m in got if isinstance(m["content"], list) for b in m["content"]]
    assert len(nested) == len(set(nested))
    for msg in got:
        if isinstance(msg["content"], list):
            for block in msg["content"]:
                block.clear()
        msg.clear()
    assert w.messages(400) == expected


@pytest.mark.parametrize("shape", SHAPES)
def test_tool_round_is_a_valid_unit(shape: str) -> None:
    w = Workload(seed=13, shape=shape)
    rounds = [w.tool_round() for _ in range(200)]
    for unit in rounds:
        ids = _call_ids(unit[0])
        assert 1 <= len(ids) <= 3
        assert _pairing_problems(unit) == []
        assert len(unit) == (1 + len(ids) if unit[0].get("tool_calls") else 2)
    history = _whole_turns(w, 500) + [m for unit in rounds for m in unit]
    assert _pairing_problems(history) == []  # rounds append cleanly, ids never collide
    again = Workload(seed=13, shape=shape)
    assert [again.tool_round() for _ in range(200)] == rounds


def test_tool_round_output_is_unaffected_by_mutation() -> None:
    a, b = Workload(seed=14), Workload(seed=14)
    for _ in range(20):
        unit = a.tool_round()
        assert unit == b.tool_round()
        for msg in unit:
            msg.clear()


def test_options_and_validation() -> None:
    custom = Workload(seed=1, system_prompt="Be brief.").messages(1)
    assert custom == [{"role": "system", "content": "Be brief."}]
    with pytest.raises(ValueError, match="unknown shape"):
        Workload(shape="bogus")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_output_bytes"):
        Workload(max_output_bytes=0)
    with pytest.raises(ValueError, match="n must be"):
        Workload().messages(-1)
