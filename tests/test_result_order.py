"""Equal is what the API treats as equal: the results of parallel calls in any order where
the API takes them in any order (issue 45, item 2).

Chat Completions, Responses and GenAI results are messages of their own, and a view (or a
stored history, or a recorded request) that puts them in another order among themselves keeps
the history's order for ``ordering``, ``non_destructive``, ``lifecycle``, ``determinism`` and
the audit. Anthropic, Bedrock and Gemini results are blocks of one message, which compare in
any order. Results known by name and position (Gemini and GenAI parts without ids) keep their
order. A real reorder (a later message moved ahead of an earlier unit, a result moved out of
its unit) is still found, and said.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.audit.auditor import Auditor
from ctxkit.audit.request import Request
from ctxkit.conformance.judge.comes_from import HistoryIndex, equivalent
from ctxkit.conformance.judge.invariants import (
    check_lifecycle,
    check_non_destructive,
    check_ordering,
    check_tool_pairs,
    moves,
    result_groups,
)
from ctxkit.conformance.judge.step_checks import same_view
from ctxkit.conformance.search.conversations import in_shape

Message = dict[str, Any]

FOLLOWING = ("openai", "responses", "genai")
"""Shapes whose results are messages of their own, right after their call."""
IN_ONE = ("anthropic", "bedrock", "gemini")
"""Shapes whose results are blocks (parts) of the one next message."""


def user(text: str, shape: str = "openai") -> Message:
    return in_shape({"role": "user", "content": text}, shape)  # type: ignore[arg-type]


def answer(text: str, shape: str = "openai") -> Message:
    return in_shape({"role": "assistant", "content": text}, shape)  # type: ignore[arg-type]


def tool_round(
    shape: str, ids: list[str], order: list[int] | None = None, *, with_ids: bool = True
) -> list[Message]:
    """An assistant message calling ``ids`` in parallel, and the results, in ``order`` (an
    order of the calls' indices; the calls' own by default)."""
    order = list(range(len(ids))) if order is None else order
    names = [f"tool_{i}" for i in ids]
    if shape == "openai":
        calls = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": "{}"}}
            for i, n in zip(ids, names, strict=True)
        ]
        results = [
            {"role": "tool", "tool_call_id": ids[k], "content": f"out {ids[k]}"} for k in order
        ]
        return [{"role": "assistant", "content": None, "tool_calls": calls}, *results]
    if shape == "responses":
        items = [
            {"type": "function_call", "call_id": i, "name": n, "arguments": "{}"}
            for i, n in zip(ids, names, strict=True)
        ]
        outputs = [
            {"type": "function_call_output", "call_id": ids[k], "output": f"out {ids[k]}"}
            for k in order
        ]
        return [*items, *outputs]
    if shape == "genai":

        def keyed(k: int) -> dict[str, Any]:
            return {"id": ids[k]} if with_ids else {}

        call_parts = [
            {"type": "tool_call", **keyed(k), "name": names[k], "arguments": {}}
            for k in range(len(ids))
        ]
        return [
            {"role": "assistant", "parts": call_parts},
            *(
                {
                    "role": "tool",
                    "parts": [
                        {"type": "tool_call_response", **keyed(k), "response": f"out {ids[k]}"}
                    ],
                }
                for k in order
            ),
        ]
    if shape == "anthropic":
        uses = [
            {"type": "tool_use", "id": i, "name": n, "input": {}}
            for i, n in zip(ids, names, strict=True)
        ]
        results = [
            {"type": "tool_result", "tool_use_id": ids[k], "content": f"out {ids[k]}"}
            for k in order
        ]
        return [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]
    if shape == "bedrock":
        uses = [
            {"toolUse": {"toolUseId": i, "name": n, "input": {}}}
            for i, n in zip(ids, names, strict=True)
        ]
        results = [
            {"toolResult": {"toolUseId": ids[k], "content": [{"text": f"out {ids[k]}"}]}}
            for k in order
        ]
        return [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]
    assert shape == "gemini"

    def key(k: int) -> dict[str, Any]:
        return {"id": ids[k]} if with_ids else {}

    calls = [{"functionCall": {**key(k), "name": names[k], "args": {}}} for k in range(len(ids))]
    responses = [
        {"functionResponse": {**key(k), "name": names[k], "response": {"out": ids[k]}}}
        for k in order
    ]
    return [{"role": "model", "parts": calls}, {"role": "user", "parts": responses}]


def conversation(shape: str, first: list[int], second: list[int] | None = None) -> list[Message]:
    """A question, a round of three parallel calls answered in order ``first``, a round of
    two answered in order ``second``, and the final answer."""
    return [
        user("read the logs", shape),
        *tool_round(shape, ["c1", "c2", "c3"], first),
        *tool_round(shape, ["c4", "c5"], second or [0, 1]),
        answer("the logs say it failed", shape),
    ]


@pytest.mark.parametrize("shape", FOLLOWING + IN_ONE)
def test_results_of_parallel_calls_in_another_order_are_the_historys_order(shape: str):
    """The view, the stored history and the next view may each put the results of one
    message's calls in any order among themselves: the API takes them so."""
    history = conversation(shape, [2, 0, 1])
    view = conversation(shape, [0, 1, 2], [1, 0])
    assert check_tool_pairs(view) == []  # the API takes it
    assert check_ordering(history, view) == []
    assert check_non_destructive(history, view) == []
    assert check_lifecycle(history, view) == []
    assert same_view(history, view) == []


@pytest.mark.parametrize("shape", FOLLOWING)
def test_results_of_one_message_trade_places_only_among_themselves(shape: str):
    groups = result_groups(conversation(shape, [2, 0, 1]))
    calls = 3 if shape == "responses" else 1  # Responses: one call item a call
    first = 1 + calls
    second = first + 3 + (2 if shape == "responses" else 1)
    assert groups[first : first + 3] == [first] * 3
    assert groups[second : second + 2] == [second] * 2
    assert [g for k, g in enumerate(groups) if g != k] == [first] * 2 + [second]


@pytest.mark.parametrize("shape", ["gemini", "genai"])
def test_results_known_by_position_keep_their_order(shape: str):
    """Without ids, Gemini (and a GenAI record of it) pairs a response with a call by its
    place: another order answers other calls, and that is a reorder."""
    history = [user("go", shape), *tool_round(shape, ["c1", "c2"], [0, 1], with_ids=False)]
    view = [user("go", shape), *tool_round(shape, ["c1", "c2"], [1, 0], with_ids=False)]
    (found,) = check_ordering(history, view)
    assert found.kind == "reordered"
    if shape == "gemini":  # the responses are parts of one message
        assert found.message.startswith(
            "view[2] holds the parts of history[2] in another order: its functionResponse "
            "parts have no ids, so they pair by position"
        )
    else:  # each response a message of its own
        assert found.message == (
            "view[2] (history[3]) moved ahead of 1 message: the view reorders the history"
        )
    assert check_non_destructive(history, view) != []
    assert same_view(history, view) != []


@pytest.mark.parametrize("shape", FOLLOWING + IN_ONE)
def test_the_final_answer_sent_ahead_of_a_later_tool_round_is_a_reorder(shape: str):
    """The smallest failure is the real one: a view that also puts the results in another
    order reports only the answer, moved."""
    history = conversation(shape, [2, 0, 1], [1, 0])
    first = tool_round(shape, ["c1", "c2", "c3"], [0, 1, 2])
    second = tool_round(shape, ["c4", "c5"], [0, 1])
    view = [history[0], *first, history[-1], *second]
    (found,) = check_ordering(history, view)
    assert found.message == (
        f"view[{1 + len(first)}] (history[{len(history) - 1}]) moved ahead of {len(second)} "
        "messages: the view reorders the history"
    )


@pytest.mark.parametrize("shape", FOLLOWING)
def test_a_result_moved_out_of_its_unit_is_a_reorder(shape: str):
    history = conversation(shape, [0, 1, 2])
    first = tool_round(shape, ["c1", "c2", "c3"], [1, 0, 2])
    second = tool_round(shape, ["c4", "c5"], [1, 0])
    moved = first.pop()  # the result of c3, after the next round
    view = [history[0], *first, *second, moved]
    (found,) = check_ordering(history, view)
    assert found.message == (
        f"view[{len(view) - 1}] (history[{history.index(moved)}]) moved behind "
        f"{len(second)} messages: the view reorders the history"
    )


def test_a_changed_result_among_reordered_ones_is_still_a_difference():
    history = conversation("openai", [0, 1, 2])
    stored = conversation("openai", [2, 1, 0])
    stored[2] = {**stored[2], "content": "changed"}
    (problem,) = check_non_destructive(history, stored)
    assert problem.message.startswith("get_messages()[2] differs from the message added at 2")


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        (tool_round("anthropic", ["a", "b"])[1], tool_round("anthropic", ["a", "b"], [1, 0])[1], 1),
        (tool_round("bedrock", ["a", "b"])[1], tool_round("bedrock", ["a", "b"], [1, 0])[1], 1),
        (tool_round("gemini", ["a", "b"])[1], tool_round("gemini", ["a", "b"], [1, 0])[1], 1),
        (
            tool_round("gemini", ["a", "b"], with_ids=False)[1],
            tool_round("gemini", ["a", "b"], [1, 0], with_ids=False)[1],
            0,
        ),
        # the calls are the model's own output: their order is what it said
        (
            tool_round("anthropic", ["a", "b"])[0],
            {
                "role": "assistant",
                "content": tool_round("anthropic", ["a", "b"])[0]["content"][::-1],
            },
            0,
        ),
    ],
    ids=["anthropic", "bedrock", "gemini", "gemini-without-ids", "calls"],
)
def test_result_blocks_of_one_message_compare_in_any_order(first, second, same):
    assert equivalent(first, second) is bool(same)


# -- a property over generated histories ----------------------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> tuple[str, list[list[Message]], list[list[Message]]]:
    """A shape, and a history as units twice: as written, and with the results of each
    tool round in another order (drawn)."""
    shape = draw(st.sampled_from(FOLLOWING + IN_ONE))
    written: list[list[Message]] = []
    permuted: list[list[Message]] = []
    for number in range(draw(st.integers(2, 6))):
        kind = draw(st.sampled_from(["user", "answer", "round"]))
        if kind == "round":
            ids = [f"c{number}_{k}" for k in range(draw(st.integers(1, 4)))]
            order = draw(st.permutations(range(len(ids))))
            written.append(tool_round(shape, ids))
            permuted.append(tool_round(shape, ids, list(order)))
        else:
            said = (user if kind == "user" else answer)(f"{kind} {number}", shape)
            written.append([said])
            permuted.append([said])
    return shape, written, permuted


def _flat(units: list[list[Message]]) -> list[Message]:
    return [m for unit in units for m in unit]


@settings(max_examples=200, deadline=None)
@given(case=histories(), data=st.data())
def test_permuting_results_never_reorders_and_swapping_units_always_does(case, data):
    shape, written, permuted = case
    history = _flat(written)
    assert check_ordering(history, _flat(permuted)) == []
    index = HistoryIndex()  # as instrument() checks live views
    for message in history:
        index.append(message)
    matches = index.match(_flat(permuted))
    assert check_ordering(history, _flat(permuted), matches=matches) == []
    assert check_non_destructive(history, _flat(permuted)) == []
    assert same_view(history, _flat(permuted)) == []
    # two units swapped: the smaller one moved, each of its messages once
    at = data.draw(st.integers(0, len(permuted) - 2))
    swapped = [*permuted[:at], permuted[at + 1], permuted[at], *permuted[at + 2 :]]
    found = check_ordering(history, _flat(swapped))
    assert [v.kind for v in found] == ["reordered"] * min(len(written[at]), len(written[at + 1]))
    # the audit reads a request's results in another order as the previous request's order
    auditor = Auditor()
    for time, messages in ((1, history), (2, [*_flat(permuted), user("next", shape)])):
        auditor.add(Request(messages, time, f"r{time}", "gpt-4o", key="c", keyed_by="session.id"))
    assert [f for f in auditor.conversations["c"].findings if f.property == "ordering"] == []


def test_the_audit_finds_a_real_reorder_beside_results_in_another_order():
    previous = conversation("openai", [2, 0, 1])
    request = [previous[0], previous[-1], *conversation("openai", [0, 1, 2])[1:-1]]
    auditor = Auditor()
    for time, messages in ((1, previous), (2, request)):
        auditor.add(Request(messages, time, f"r{time}", "gpt-4o", key="c", keyed_by="session.id"))
    (finding,) = [f for f in auditor.conversations["c"].findings if f.property == "ordering"]
    assert finding.message.startswith(
        "message[1] (was message[8] of the previous request) moved ahead of 7 messages"
    )


def test_parts_that_json_cannot_sort_are_still_compared():
    """A view may hold what JSON cannot write with sorted keys (keys of several types inside
    a part): reading its parts in one order falls back to their repr, never an error."""
    odd = {"functionResponse": {"name": "g", "response": {1: "x", "a": 2}}}
    plain = {"functionResponse": {"name": "f", "response": {"r": 1}}}
    history = [user("go", "gemini"), {"role": "user", "parts": [plain, odd]}]
    (found,) = check_ordering(history, [history[0], {"role": "user", "parts": [odd, plain]}])
    assert found.message.startswith("view[1] holds the parts of history[1] in another order")


@given(order=st.permutations(range(7)), joined=st.lists(st.booleans(), min_size=7, max_size=7))
def test_moves_over_runs_are_the_fewest_that_explain_the_order(order, joined):
    """With runs of places that may trade among themselves, every message out of the longest
    run kept in order (runs never going back) is one move, and no fewer would do."""
    groups: list[int] = []
    for place in range(7):
        groups.append(groups[-1] if place and joined[place] else place)
    found = moves(order, groups)
    moved = {m.position for m in found}
    left = [groups[source] for position, source in enumerate(order) if position not in moved]
    assert left == sorted(left)
    ranks = [groups[source] for source in order]
    longest = [1] * len(ranks)  # brute force: the longest run never going back, ending at k
    for k in range(len(ranks)):
        for j in range(k):
            if ranks[j] <= ranks[k]:
                longest[k] = max(longest[k], longest[j] + 1)
    assert len(found) == len(order) - max(longest)
    assert all(m.ahead or m.behind for m in found)
