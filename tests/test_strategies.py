"""Tests for ctxkit.reference.strategies: shortening outputs, scoring units, summarizing."""

from __future__ import annotations

import asyncio
import copy
import re
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ctxkit.messages import inspect_message
from ctxkit.reference.strategies import (
    SUMMARY_HEADER,
    extractive_summary,
    importance_score,
    shorten_output,
    shorten_text,
)

MARKER = re.compile(r"\[\.\.\. omitted (\d+) of (\d+) (lines|bytes) \.\.\.\]\n")
BIG = 10**9


def numbered_lines(count: int, width: int = 0) -> list[str]:
    return [f"line {i:04d} {'x' * width}\n" for i in range(count)]


def split_on_marker(result: str) -> tuple[str, re.Match[str], str]:
    markers = list(MARKER.finditer(result))
    assert len(markers) == 1, result
    match = markers[0]
    return result[: match.start()], match, result[match.end() :]


# --------------------------------------------------------------------------- shorten_text


@pytest.mark.parametrize(
    ("text", "head", "tail", "max_bytes"),
    [
        ("", 1, 1, 10),
        ("one line", 1, 1, 100),
        ("".join(numbered_lines(10)), 5, 5, BIG),
        ("".join(numbered_lines(10)), 8, 8, BIG),
        ("x" * 100, 1, 0, 100),
        ("x" * 100, 0, 1, 100),
    ],
    ids=["empty", "one-line", "head+tail-lines", "fewer-lines", "bytes-at-limit", "tail-only"],
)
def test_shorten_text_returns_none_within_limits(text, head, tail, max_bytes):
    assert shorten_text(text, head_lines=head, tail_lines=tail, max_bytes=max_bytes) is None


def test_shorten_text_keeps_exactly_head_and_tail_lines_of_a_long_text():
    lines = numbered_lines(1000)
    result = shorten_text("".join(lines), head_lines=128, tail_lines=128, max_bytes=BIG)
    assert result == (
        "".join(lines[:128]) + "[... omitted 744 of 1000 lines ...]\n" + "".join(lines[-128:])
    )


def test_shorten_text_counts_lines_without_a_final_newline():
    text = "".join(numbered_lines(20)).rstrip("\n")
    result = shorten_text(text, head_lines=2, tail_lines=3, max_bytes=BIG)
    assert result is not None
    before, match, after = split_on_marker(result)
    assert match.group(0) == "[... omitted 15 of 20 lines ...]\n"
    assert before == "line 0000 \nline 0001 \n"
    assert after == "line 0017 \nline 0018 \nline 0019 "


def test_shorten_text_applies_the_byte_limit_to_many_lines():
    lines = numbered_lines(1000, width=90)  # 101 bytes a line
    text = "".join(lines)
    result = shorten_text(text, head_lines=128, tail_lines=128, max_bytes=2000)
    assert result is not None
    before, match, after = split_on_marker(result)
    assert match.group(3) == "lines"
    assert len(before.encode()) <= 1000
    assert len(after.encode()) <= 1000
    assert len(result) < len(text) // 10
    assert before.startswith(lines[0])
    assert after.endswith(lines[-1])
    kept = before.count("\n") + after.count("\n")
    assert match.group(0) == f"[... omitted {1000 - kept} of 1000 lines ...]\n"


def test_shorten_text_cuts_one_huge_line_showing_its_head_and_tail():
    text = "BEGIN" + "x" * 100_000 + "END"
    result = shorten_text(text, head_lines=10, tail_lines=10, max_bytes=1000)
    assert result is not None
    before, match, after = split_on_marker(result)
    assert match.group(0) == "[... omitted 99008 of 100008 bytes ...]\n"
    assert before == "BEGIN" + "x" * 495 + "\n"
    assert after == "x" * 497 + "END"


def test_shorten_text_cuts_cjk_at_character_boundaries():
    text = "汉字测试" * 5000  # 3 bytes a character, one line
    result = shorten_text(text, head_lines=5, tail_lines=5, max_bytes=1001)
    assert result is not None
    assert "\ufffd" not in result
    result.encode("utf-8")  # valid str: no lone surrogates
    before, match, after = split_on_marker(result)
    assert match.group(3) == "bytes"
    assert text.startswith(before.rstrip("\n"))
    assert text.endswith(after)
    assert 0 < len(before.rstrip("\n").encode()) <= 500
    assert 0 < len(after.encode()) <= 500


def test_shorten_text_cuts_multiline_cjk_cleanly():
    lines = [f"第{i}行" + "错误信息" * 300 + "\n" for i in range(50)]
    text = "".join(lines)
    result = shorten_text(text, head_lines=3, tail_lines=3, max_bytes=3001)
    assert result is not None
    assert "\ufffd" not in result
    before, _, after = split_on_marker(result)
    assert text.startswith(before.rstrip("\n"))
    assert text.endswith(after)


def test_shorten_text_keeps_the_tail_when_bytes_not_lines_are_over_the_limit():
    lines = numbered_lines(50, width=90)  # 50 lines < head_lines, 5,050 bytes > max_bytes
    result = shorten_text("".join(lines), head_lines=128, tail_lines=128, max_bytes=1000)
    assert result is not None
    assert result.startswith(lines[0])
    assert result.endswith(lines[-1])


def test_shorten_text_keeps_lone_surrogates_in_a_cut_line():
    text = "a\ud800b" * 100
    result = shorten_text(text, head_lines=1, tail_lines=1, max_bytes=20)
    assert result is not None
    before, _, after = split_on_marker(result)
    assert text.startswith(before.rstrip("\n"))
    assert text.endswith(after)


line_texts = st.lists(
    st.one_of(
        st.text(max_size=20),
        st.text(alphabet="汉字测试é🤖", max_size=40),
        st.sampled_from(["\n", "\r\n", "\r", "x" * 300]),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(line_texts, st.integers(0, 6), st.integers(0, 6), st.integers(0, 400))
def test_shorten_text_result_is_head_marker_tail_of_the_input(text, head, tail, max_bytes):
    assume("[... omitted " not in text)
    result = shorten_text(text, head_lines=head, tail_lines=tail, max_bytes=max_bytes)
    if result is None:
        return
    assert len(result) < len(text)
    assert result.count("[... omitted ") == 1
    before, _, after = split_on_marker(result)
    # the head may have gained a newline before the marker
    assert text.startswith(before) or (before.endswith("\n") and text.startswith(before[:-1]))
    assert text.endswith(after)
    half = max(1, max_bytes // 2)
    assert len(before.rstrip("\n").encode()) <= half
    assert len(after.encode()) <= half


# --------------------------------------------------------------------------- shorten_output

LIMITS = {"head_lines": 5, "tail_lines": 5, "max_bytes": 10_000}
LONG = "".join(numbered_lines(200))


def test_shorten_output_shortens_an_openai_tool_message():
    message = {"role": "tool", "tool_call_id": "call_7", "name": "run", "content": LONG}
    snapshot = copy.deepcopy(message)
    short = shorten_output(message, **LIMITS)
    assert short is not None
    assert message == snapshot
    assert short["role"] == "tool"
    assert short["tool_call_id"] == "call_7"
    assert short["name"] == "run"
    assert short["content"] == shorten_text(LONG, **LIMITS)
    assert "[... omitted 190 of 200 lines ...]" in short["content"]
    assert inspect_message(short).result_ids == ("call_7",)


def test_shorten_output_shortens_text_blocks_of_a_tool_message():
    message = {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": LONG}]}
    snapshot = copy.deepcopy(message)
    short = shorten_output(message, **LIMITS)
    assert short is not None
    assert message == snapshot
    assert short["content"] == [{"type": "text", "text": shorten_text(LONG, **LIMITS)}]


def test_shorten_output_shortens_anthropic_tool_results_and_keeps_the_rest():
    message = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": LONG, "is_error": True},
            {"type": "tool_result", "tool_use_id": "t2", "content": "short output"},
            {
                "type": "tool_result",
                "tool_use_id": "t3",
                "content": [{"type": "text", "text": LONG}, {"type": "image", "source": {}}],
            },
            {"type": "text", "text": LONG},
        ],
    }
    snapshot = copy.deepcopy(message)
    short = shorten_output(message, **LIMITS)
    assert short is not None
    assert message == snapshot
    assert short["role"] == "user"
    first, second, third, text = short["content"]
    assert first == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": shorten_text(LONG, **LIMITS),
        "is_error": True,
    }
    assert second == message["content"][1]
    assert third["tool_use_id"] == "t3"
    assert third["content"] == [
        {"type": "text", "text": shorten_text(LONG, **LIMITS)},
        {"type": "image", "source": {}},
    ]
    assert text == {"type": "text", "text": LONG}  # the user's own words are not touched
    assert inspect_message(short).result_ids == ("t1", "t2", "t3")


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": LONG},
        {"role": "assistant", "content": LONG},
        {"role": "system", "content": LONG},
        {"role": "user", "content": [{"type": "text", "text": LONG}]},
        {
            "role": "assistant",
            "content": LONG,
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f"}}],
        },
    ],
    ids=["user", "assistant", "system", "user-blocks", "assistant-call"],
)
def test_shorten_output_ignores_messages_without_results(message):
    assert shorten_output(message, **LIMITS) is None


@pytest.mark.parametrize(
    "message",
    [
        {"role": "tool", "tool_call_id": "c", "content": "short"},
        {"role": "tool", "tool_call_id": "c", "content": None},
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "short"}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": "short"}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
    ],
    ids=["tool", "tool-none", "tool-blocks", "tool_result", "tool_result-empty"],
)
def test_shorten_output_returns_none_for_short_outputs(message):
    assert shorten_output(message, **LIMITS) is None


# --------------------------------------------------------------------------- importance_score


def score(messages: list[dict[str, Any]], recency: float = 0.5) -> float:
    return importance_score(messages, [inspect_message(m) for m in messages], recency)


def oa_unit(output: str = "3 files found") -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": output},
    ]


def an_unit(output: str = "3 files found", error: bool = False) -> list[dict[str, Any]]:
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": "t1", "content": output}
    if error:
        result["is_error"] = True
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}],
        },
        {"role": "user", "content": [result]},
    ]


USER_TURN = [{"role": "user", "content": "Please refactor the parser."}]
PROSE = [{"role": "assistant", "content": "The parser is refactored; tests pass."}]


@pytest.mark.parametrize("recency", [0.0, 0.5, 1.0])
def test_user_turn_outranks_assistant_prose_outranks_tool_unit(recency):
    assert score(USER_TURN, recency) > score(PROSE, recency) > score(oa_unit(), recency)
    assert score(PROSE, recency) > score(an_unit(), recency)


def test_tool_results_only_user_message_is_not_scored_as_a_user_turn():
    assert score(an_unit()) < score(USER_TURN)


@pytest.mark.parametrize(
    "output",
    [
        "Traceback (most recent call last):\n  File 'x.py', line 1\nKeyError: 'a'",
        "collected 5 items\n\n2 FAILED, 3 passed",
        "bash: fatal: not a git repository",
        "ValueError: invalid literal",
    ],
)
def test_error_in_tool_output_raises_the_score(output):
    assert score(oa_unit(output)) > score(oa_unit())
    assert score(an_unit(output)) > score(an_unit())


def test_error_deep_in_a_long_output_is_still_seen_at_its_end():
    output = "ok\n" * 5000 + "Traceback (most recent call last):\nOSError: disk full"
    assert score(oa_unit(output)) > score(oa_unit("ok\n" * 5000))


def test_is_error_flag_raises_the_score():
    assert score(an_unit(error=True)) > score(an_unit())


def test_error_words_in_non_result_messages_do_not_raise_the_score():
    prose = [{"role": "assistant", "content": "There was a Traceback earlier; fixed."}]
    assert score(prose) == score(PROSE)


@settings(max_examples=100, deadline=None)
@given(st.floats(0, 1), st.floats(0, 1))
def test_recency_raises_the_score(older, newer):
    assume(older + 1e-6 < newer)
    for unit in (USER_TURN, PROSE, oa_unit(), an_unit(error=True)):
        assert score(unit, newer) > score(unit, older)


# --------------------------------------------------------------------------- extractive_summary

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Please fix the failing test in parser.py\nIt started yesterday."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "run_tests", "arguments": '{"path": "tests/"}'},
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "collected 3 items\nE   KeyError: 'token'\n1 failed",
    },
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading the parser."},
            {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "parser.py"}},
        ],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "def parse(): ..."}],
    },
    {"role": "assistant", "content": "The bug is a missing key check in parse(); fixed."},
]


def summarize(messages: list[dict[str, Any]], **kwargs: Any) -> str:
    return asyncio.run(extractive_summary(messages, **kwargs))


def test_extractive_summary_mentions_requests_calls_errors_and_conclusions():
    summary = summarize(CONVERSATION)
    lines = summary.splitlines()
    assert lines[0] == SUMMARY_HEADER
    assert "- user asked: Please fix the failing test in parser.py" in lines
    assert any(line.startswith("- called run_tests(") and "tests/" in line for line in lines)
    assert any(line.startswith("- called read_file(") and "parser.py" in line for line in lines)
    assert any(line.startswith("- tool error:") and "KeyError" in line for line in lines)
    assert "- assistant: The bug is a missing key check in parse(); fixed." in lines
    assert all(line.startswith("- ") for line in lines[1:])
    # newest last
    assert lines.index("- user asked: Please fix the failing test in parser.py") < next(
        i for i, line in enumerate(lines) if "run_tests" in line
    )
    assert lines[-1].startswith("- assistant: The bug is")


def test_extractive_summary_is_deterministic():
    assert summarize(CONVERSATION) == summarize(copy.deepcopy(CONVERSATION))


def test_extractive_summary_does_not_modify_its_input():
    messages = copy.deepcopy(CONVERSATION)
    summarize(messages)
    assert messages == CONVERSATION


def test_extractive_summary_of_nothing_is_the_header():
    assert summarize([]) == SUMMARY_HEADER


def test_extractive_summary_records_user_text_blocks_but_not_bare_results():
    summary = summarize(
        [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": "output"},
                    {"type": "text", "text": "also update the docs"},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u"}]},
        ]
    )
    assert summary.splitlines()[1:] == ["- user asked: also update the docs"]


def test_extractive_summary_shortens_long_lines():
    summary = summarize([{"role": "user", "content": "word " * 200}])
    line = summary.splitlines()[1]
    assert line.startswith("- user asked: word word")
    assert line.endswith("…")
    assert len(line) <= len("- user asked: ") + 160


def test_extractive_summary_carries_an_earlier_summary_forward():
    first = summarize(CONVERSATION)
    follow_up = [
        {"role": "user", "content": first},
        {"role": "user", "content": "Now add a regression test."},
    ]
    second = summarize(follow_up).splitlines()
    assert second[0] == SUMMARY_HEADER
    assert second[1:-1] == first.splitlines()[1:]
    assert second[-1] == "- user asked: Now add a regression test."
    assert sum(line == SUMMARY_HEADER for line in second) == 1


def test_extractive_summary_keeps_only_the_newest_max_lines():
    messages = [{"role": "user", "content": f"request {i}"} for i in range(20)]
    lines = summarize(messages, max_lines=5).splitlines()
    assert lines == [SUMMARY_HEADER] + [f"- user asked: request {i}" for i in range(15, 20)]


def test_extractive_summary_keeps_only_the_newest_lines_within_max_tokens():
    messages = [{"role": "user", "content": f"request {i:02d}"} for i in range(40)]
    line_size = len("- user asked: request 00") + 1
    max_tokens = (len(SUMMARY_HEADER) + 4 * line_size) // 3 + 1  # room for four lines
    lines = summarize(messages, max_tokens=max_tokens).splitlines()
    assert lines == [SUMMARY_HEADER] + [f"- user asked: request {i}" for i in range(36, 40)]


def test_extractive_summary_with_a_tiny_token_budget_is_the_header():
    assert summarize(CONVERSATION, max_tokens=1) == SUMMARY_HEADER


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.sampled_from(CONVERSATION), max_size=15),
    st.integers(1, 8),
    st.integers(1, 400),
)
def test_extractive_summary_is_bounded_by_max_lines_and_max_tokens(messages, max_lines, max_tokens):
    summary = summarize(messages, max_lines=max_lines, max_tokens=max_tokens)
    lines = summary.splitlines()
    assert lines[0] == SUMMARY_HEADER
    assert len(lines) <= max_lines + 1
    assert len(summary) <= max(3 * max_tokens, len(SUMMARY_HEADER))
    # what is kept is the newest lines of the unbounded summary, in order
    unbounded = summarize(messages, max_lines=10_000, max_tokens=10**6).splitlines()
    assert lines[1:] == unbounded[len(unbounded) - (len(lines) - 1) :]


def test_extractive_summary_with_max_lines_zero_is_only_the_header():
    assert summarize(CONVERSATION, max_lines=0) == SUMMARY_HEADER


def test_extractive_summary_mentions_results_flagged_is_error():
    messages = an_unit("permission denied: /etc/shadow", error=True)
    summary = summarize(messages)
    assert any(
        line.startswith("- tool error:") and "permission denied" in line
        for line in summary.splitlines()
    )


@pytest.mark.parametrize(
    "shape", ["openai", "anthropic", "responses", "gemini", "bedrock", "genai"]
)
def test_a_long_output_is_shortened_in_every_shape_and_still_answers_its_call(shape):
    import itertools

    from ctxkit.conformance.search.conversations import RoundTemplate
    from ctxkit.messages import text_of

    long = "\n".join(f"line {k}" for k in range(500))
    messages = RoundTemplate(shape, (long,), (0,)).messages(itertools.count(1))  # type: ignore[arg-type]
    answer = messages[-1]
    before = copy.deepcopy(answer)
    short = shorten_output(answer, head_lines=5, tail_lines=5, max_bytes=4_000)
    assert short is not None
    assert inspect_message(short).result_ids == inspect_message(answer).result_ids
    assert "[... omitted 490 of 500 lines ...]" in text_of(short)
    assert len(text_of(short)) < len(text_of(answer))
    assert answer == before  # the stored message is untouched
