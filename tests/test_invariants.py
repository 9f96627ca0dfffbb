"""The invariants on hand-made views: each catches its fault, and says it plainly."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.conformance.judge.comes_from import match_view
from ctxkit.conformance.judge.invariants import (
    check_attachments,
    check_budget,
    check_events,
    check_lifecycle,
    check_non_destructive,
    check_ordering,
    check_preservation,
    check_tool_pairs,
    moves,
)
from ctxkit.conformance.judge.sent import as_sent
from tests.hostile import spoiled_views

USER = {"role": "user", "content": "go"}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}},
    ],
}
RESULT_A = {"role": "tool", "tool_call_id": "a", "content": "A" * 50}
RESULT_B = {"role": "tool", "tool_call_id": "b", "content": "B"}
USE = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "u", "name": "f", "input": {}}],
}
ANSWER = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u", "content": "x"}]}
REPLY = {"role": "assistant", "content": "done"}


@pytest.mark.parametrize(
    "view",
    [
        [USER, CALL, RESULT_A, RESULT_B, REPLY],
        [USER, CALL, RESULT_B, RESULT_A],  # any order
        [USER, USE, ANSWER, REPLY],
        [],
    ],
)
def test_whole_pairs_pass(view):
    assert check_tool_pairs(view) == []


@pytest.mark.parametrize(
    ("view", "fragment"),
    [
        (
            [RESULT_A],
            "view[0] is a tool result for a, but no assistant message in the view calls a",
        ),
        ([CALL, RESULT_A], "view[0] calls b, but no result for it follows at once"),
        ([CALL, RESULT_A, USER, RESULT_B], "(its result is at view[3])"),
        ([CALL, RESULT_A, RESULT_B, RESULT_B], "view[3] is a second tool result for b"),
        ([CALL, RESULT_A, RESULT_B, CALL], "already called by view[0]"),
        ([USE, REPLY, ANSWER], "view[0] calls u, but no tool_result for it follows at once"),
        ([ANSWER, USE], "view[0] is a tool_result block for u"),
        (["not a message"], "view[0] is a str, not a message dict"),
    ],
)
def test_split_pairs_are_reported_in_plain_words(view, fragment):
    problems = check_tool_pairs(view)
    assert any(fragment in p.message for p in problems), problems
    assert all(p.property == "tool_pair_integrity" for p in problems)


def test_ordering_allows_summaries_and_rewritten_outputs_but_not_reordering():
    history = [USER, CALL, RESULT_A, RESULT_B, REPLY]
    summary = {"role": "user", "content": "[summary of earlier turns]"}
    shortened = {**RESULT_A, "content": "A...A"}
    assert check_ordering(history, [summary, CALL, shortened, RESULT_B]) == []
    (problem,) = check_ordering(history, [REPLY, USER])
    assert "view[0] (history[4]) moved ahead of 1 message" in problem.message
    forged = {"role": "tool", "tool_call_id": "zzz", "content": "notice"}
    (problem,) = check_ordering(history, [USER, forged])
    assert "carries tool ids zzz but comes from no history message" in problem.message
    marker = {**RESULT_B, "content": "[... 1 line omitted ...]"}  # longer than "B": still B
    assert check_ordering(history, [CALL, RESULT_A, marker]) == []


def test_one_message_moved_ahead_of_four_is_one_finding():
    history = [USER, CALL, RESULT_A, RESULT_B, REPLY, {"role": "user", "content": "next"}]
    moved = [history[0], history[5], *history[1:5]]
    (problem,) = check_ordering(history, moved)
    assert problem.message.startswith("view[1] (history[5]) moved ahead of 4 messages")


@given(order=st.permutations(range(8)))
def test_the_moves_are_the_fewest_that_explain_any_reorder(order: list[int]):
    """Every message out of the longest run kept in order is one move, and no fewer moves
    would do: the messages left, in view order, keep the old order."""
    found = moves(order)
    moved = {m.position for m in found}
    left = [source for position, source in enumerate(order) if position not in moved]
    assert left == sorted(left)
    longest = max(len(run) for run in _increasing_runs(order))  # brute force
    assert len(found) == len(order) - longest
    assert all(m.ahead or m.behind for m in found)


def _increasing_runs(values: list[int]) -> list[list[int]]:
    runs: list[list[int]] = [[]]
    for value in values:
        runs += [[*run, value] for run in runs if not run or run[-1] < value]
    return runs


def test_metadata_is_an_annotation_key_for_ordering():
    assert check_ordering([USER], [{**USER, "metadata": {"seen": 1}}]) == []


def test_non_destructive_and_lifecycle_name_the_first_difference():
    added = [USER, REPLY]
    (problem,) = check_non_destructive(added, [USER, {**REPLY, "content": "changed"}])
    assert problem.message.startswith("get_messages()[1] differs from the message added at 1")
    (problem,) = check_non_destructive(added, [USER])
    assert "has 1 messages, but 2 were added" in problem.message
    assert (
        check_non_destructive(added, [USER, {**REPLY, "metadata": 1}], frozenset({"metadata"}))
        == []
    )
    (problem,) = check_lifecycle([], [USER])
    assert problem.property == "lifecycle"
    (problem,) = check_non_destructive(added, "not a list")  # type: ignore[arg-type]
    assert "not a list" in problem.message


def test_budget_counts_only_where_a_view_could_fit():
    assert check_budget(120, 100, feasible=False) == []
    (problem,) = check_budget(120, 100, feasible=True)
    assert "at a budget of 100 the view has 120 tokens, 20 over" in problem.message
    assert check_budget(104, 100, feasible=True, tolerance=0.05) == []


def test_preservation_wants_system_messages_and_the_newest_user_message():
    system = {"role": "system", "content": "rules"}
    history = [system, USER, CALL, RESULT_A, RESULT_B, {"role": "user", "content": "now"}]
    assert check_preservation(history, [system, history[-1]]) == []
    problems = check_preservation(history, [USER])
    assert [p.message for p in problems] == [
        "system message history[0] is dropped",
        "the newest user message, history[5], is dropped",
    ]
    # a user message that only carries tool results is no user turn
    assert check_preservation([USER, USE, ANSWER], [USER, USE, ANSWER]) == []


def test_events_must_pair_in_order_with_integer_counts():
    good = [
        ("context:pre_compact", {"message_count": 9, "token_count": 900}),
        ("other:event", {}),
        ("context:post_compact", {"message_count": 4, "token_count": 400}),
    ]
    assert check_events(good) == []
    assert check_events([good[2]])[0].message.endswith("without a context:pre_compact")
    assert "never got its" in check_events([good[0]])[0].message
    grown = [good[0], ("context:post_compact", {"message_count": 4, "token_count": 901})]
    assert "more than the 900 before" in check_events(grown)[0].message
    text = [good[0], ("context:post_compact", {"message_count": 4, "token_count": "400"})]
    assert "token_count='400', not an int" in check_events(text)[0].message


def test_invariants_import_nothing_heavy_and_nothing_they_check():
    """Production code may run them (no test stack, no tokenizer), and they read the message
    shapes themselves (not through ctxkit.messages, the code they check)."""
    code = (
        "import sys, ctxkit.conformance.judge.invariants\n"
        "heavy = {'hypothesis', 'pytest', 'tiktoken', 'ctxkit.messages'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def _call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def _use(tool_id: str) -> dict:
    return {"type": "tool_use", "id": tool_id, "name": "f", "input": {}}


@pytest.mark.parametrize(
    ("view", "rule_id"),
    [
        ([{"role": "tool", "tool_call_id": "c1", "content": "x"}], "openai.result_has_call"),
        (
            [{"role": "assistant", "tool_calls": [_call("c1")]}, {"role": "user", "content": "u"}],
            "openai.calls_answered",
        ),
        (
            [
                {"role": "assistant", "content": [_use("t1")]},
                {"role": "user", "content": "later"},
            ],
            "anthropic.calls_answered_next",
        ),
        (
            [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}],
            "anthropic.result_has_call",
        ),
        (
            [{"type": "function_call_output", "call_id": "f1", "output": "x"}],
            "responses.output_has_call",
        ),
    ],
)
def test_pair_violations_name_the_provider_rule_and_its_error(view, rule_id):
    from ctxkit.shapes.rules import rule

    found = check_tool_pairs(view)
    assert [v.rule for v in found] == [rule_id]
    assert found[0].provider_error == rule(rule_id).error
    assert rule(rule_id).property == "tool_pair_integrity"


def test_genai_results_recorded_in_a_user_message_pair_with_their_calls():
    """Instrumentations of Anthropic's API (OpenLLMetry's) record tool_result blocks as a
    user message of tool_call_response parts: valid, not a split pair."""
    view = [
        {"role": "user", "parts": [{"type": "text", "content": "list files"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "t1", "name": "ls"}]},
        {"role": "user", "parts": [{"type": "tool_call_response", "id": "t1", "response": "a"}]},
    ]
    assert check_tool_pairs(view) == []
    assert [v.rule for v in check_tool_pairs(view[1:2])] == ["genai.calls_answered"]


@settings(max_examples=300, deadline=None)
@given(case=spoiled_views())
def test_a_spoiled_view_is_judged_never_an_error(case):
    """A target may return anything in its view (a number for a message, a part typed text
    with no text): every check reads it into violations or none, and ctxkit never fails on
    it (an error there would be ctxkit's own, exit 3, and no verdict)."""
    history, view = case
    for api in (None, "openai", "anthropic", "responses", "gemini", "bedrock", "genai"):
        check_tool_pairs(view, api)
        if api:
            as_sent(list(view), api)
    check_attachments(history, view)
    match_view(history, view)
    check_ordering(history, view)
    check_non_destructive(history, view)
    check_lifecycle(history, view)
    check_preservation(history, view)
