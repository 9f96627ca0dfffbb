"""What a view message comes from: equivalent shapes, identity by tool ids, an honest
order-keeping matcher, merged system messages, and the false accusations of issue 12."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxkit.conformance.judge.comes_from import (
    HistoryIndex,
    _Assignment,
    comes_from,
    equivalent,
    match_view,
)
from ctxkit.conformance.judge.invariants import (
    Violation,
    check_ordering,
    check_preservation,
    relaxed,
    result_groups,
)
from tests.rewrites import REWRITES, rewrite

SYSTEM = {"role": "system", "content": "You are a careful agent."}
REMINDER = {"role": "system", "content": "Reminder: run the tests."}


def user(text: Any) -> dict[str, Any]:
    return {"role": "user", "content": text}


def reply(text: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def calling(*ids: str, arguments: str = '{"path": "a.py", "n": 1}') -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "read", "arguments": arguments}}
            for i in ids
        ],
    }


def output(call_id: str, content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


USE = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "u1", "name": "read", "input": {"path": "a.py"}},
    ],
}
ANSWER = user([{"type": "tool_result", "tool_use_id": "u1", "content": "ok"}])


# -- each rewrite is equivalent, in both shapes ------------------------------------------------

SAMPLES = [
    SYSTEM,
    user("fix the test"),
    user([{"type": "text", "text": "fix the test"}]),
    {**user("hi"), "name": "alice"},
    reply(""),
    calling("c1", "c2"),
    output("c1", ""),
    output("c1", "3 files"),
    USE,
    ANSWER,
]


@pytest.mark.parametrize("how", REWRITES)
@pytest.mark.parametrize("message", SAMPLES, ids=repr)
def test_every_rewrite_is_equivalent_and_comes_from_the_original(message, how):
    rewritten = rewrite(message, how)
    assert equivalent(rewritten, message)
    assert comes_from(rewritten, message)
    assert match_view([message], [rewritten]) == [0]


def test_unknown_keys_count_only_where_both_sides_have_them():
    assert equivalent({**user("hi"), "name": "alice"}, user("hi"))
    assert not equivalent({**user("hi"), "name": "alice"}, {**user("hi"), "name": "bob"})
    assert comes_from(output("c1", "x"), {**output("c1", "y"), "name": "read"})


def test_annotation_keys_are_configurable():
    stamped = {**user("hi"), "metadata": {"seq": 1}}
    other = {**user("hi"), "metadata": {"seq": 2}}
    assert comes_from(stamped, other)
    assert not comes_from(stamped, other, frozenset())  # compared when both carry it
    assert comes_from(stamped, user("hi"), frozenset())  # absent on one side: not compared


# -- the three false accusations of issue 12 ---------------------------------------------------


def test_regression_a_rewritten_message_is_not_from_nowhere_nor_reordered():
    """Rewritten shapes were 'from no history message', or matched to a later identical
    message and reported as reordered."""
    history = [
        SYSTEM,
        user("go"),
        reply([{"type": "text", "text": "ok"}]),
        user("go"),
        reply("ok"),
        calling("c1"),
        output("c1", "done"),
    ]
    view = [
        SYSTEM,
        user([{"type": "text", "text": "go"}]),
        reply("ok"),  # history[2] as a string: also equal to history[4]
        user("go"),
        reply("ok"),
        calling("c1", arguments='{"n":1,"path":"a.py"}'),
        output("c1", [{"type": "text", "text": "done"}]),
    ]
    assert match_view(history, view) == list(range(7))
    assert check_ordering(history, view) == []


def test_regression_a_marker_longer_than_the_output_keeps_the_result_its_identity():
    history = [user("go"), calling("c1"), output("c1", "ok"), reply("done")]
    view = [user("go"), calling("c1"), output("c1", "[... 1 line omitted ...]"), reply("done")]
    assert check_ordering(history, view) == []
    anthropic = [user("go"), USE, ANSWER]
    marked = user([{"type": "tool_result", "tool_use_id": "u1", "content": "[... cleared ...]"}])
    assert check_ordering(anthropic, [user("go"), USE, marked]) == []


def test_regression_merged_system_messages_are_merged_not_dropped():
    history = [SYSTEM, user("go"), REMINDER, user("now")]
    merged = {"role": "system", "content": f"{SYSTEM['content']}\n\n{REMINDER['content']}"}
    (problem,) = check_preservation(history, [merged, user("go"), user("now")])
    assert problem.message == "system messages history[0] and history[2] are merged into view[0]"
    assert problem.kind == "merged-system"
    assert relaxed([problem], {"merged-system"}) == []
    assert check_ordering(history, [merged, user("go"), user("now")]) == []


# -- the order-keeping matcher ---------------------------------------------------------------


def _order_keeping_exists(candidates: list[list[int]]) -> bool:
    """Brute force: can every view message with candidates take one, in increasing order?"""
    sets = [c for c in candidates if c]
    return any(
        all(a < b for a, b in itertools.pairwise(choice)) for choice in itertools.product(*sets)
    )


def _keeps_order(matches: list[int | None], candidates: list[list[int]]) -> bool:
    chosen = [m for m, c in zip(matches, candidates, strict=True) if c]
    return None not in chosen and all(a < b for a, b in itertools.pairwise(chosen))


@given(
    st.lists(st.lists(st.integers(0, 6), max_size=4).map(sorted), max_size=5),
)
def test_the_assignment_keeps_order_whenever_any_assignment_can(candidates):
    candidates = [sorted(set(c)) for c in candidates]
    assignment = _Assignment()
    matches = [assignment.pick(lambda start, c=c: [i for i in c if i >= start]) for c in candidates]
    assert _keeps_order(matches, candidates) == _order_keeping_exists(candidates)
    chosen = [m for m in matches if m is not None]
    assert len(chosen) == len(set(chosen))
    assert all(m is None or m in c for m, c in zip(matches, candidates, strict=True))


ALPHABET = [
    user("a"),
    user("b"),
    reply("a"),
    SYSTEM,
    calling("c1"),
    calling("c1", "c2"),
    output("c1", "ok"),
    output("c2", ""),
    USE,
    ANSWER,
]


@st.composite
def small_cases(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Small histories full of duplicates, and views of rewritten picks from the same few."""
    history = draw(st.lists(st.sampled_from(ALPHABET), max_size=6))
    picks = draw(st.lists(st.sampled_from(ALPHABET), max_size=5))
    view = [rewrite(m, draw(st.sampled_from(REWRITES))) for m in picks]
    return history, view


@given(small_cases())
def test_matching_messages_keeps_order_whenever_brute_force_finds_a_way(case):
    history, view = case
    candidates = [[i for i, h in enumerate(history) if comes_from(v, h)] for v in view]
    matches = match_view(history, view)
    assert all(m is None or m in c for m, c in zip(matches, candidates, strict=True))
    keeps = _keeps_order(matches, candidates)
    assert keeps == _order_keeping_exists(candidates)
    reordered = [p for p in check_ordering(history, view) if p.kind == "reordered"]
    runs = result_groups(history)  # results of one message's calls: in order in any order
    assert bool(reordered) == (
        not all(
            runs[a] < runs[b] or (a != b and runs[a] == runs[b])
            for a, b in itertools.pairwise(m for m in matches if m is not None)
        )
    )
    if keeps:
        assert not reordered
    index = HistoryIndex()
    for message in history:
        index.append(message)
    assert index.match(view) == matches


# -- ordering and preservation, kinds and relaxations --------------------------------------------


def test_ordering_names_the_kind_of_each_violation():
    history = [user("a"), calling("c1"), output("c1", "ok"), reply("b")]
    (swap,) = check_ordering(history, [reply("b"), user("a")])
    assert swap.kind == "reordered"
    (forged,) = check_ordering(history, [user("a"), output("zz", "notice")])
    assert forged.kind == "synthetic-tool-ids"
    assert forged.ids == ("zz",)
    (twice,) = check_ordering(history, [calling("c1"), output("c1", "ok"), output("c1", "ok")])
    assert twice.kind == "repeated"
    assert "view[2] carries tool ids c1, as view[1] does, which is history[2]" in twice.message


def test_preservation_accepts_equivalent_system_messages_and_reports_the_rest():
    history = [SYSTEM, user("go"), REMINDER, user("now")]
    as_blocks = {"role": "system", "content": [{"type": "text", "text": SYSTEM["content"]}]}
    assert check_preservation(history, [as_blocks, REMINDER, user("now")]) == []
    kinds = [p.kind for p in check_preservation(history, [user("go")])]
    assert kinds == ["dropped-system", "dropped-system", "dropped-user"]
    backwards = {"role": "system", "content": f"{REMINDER['content']} {SYSTEM['content']}"}
    kinds = [p.kind for p in check_preservation(history, [backwards, user("now")])]
    assert kinds == ["dropped-system", "dropped-system"]
    three = [SYSTEM, REMINDER, {"role": "system", "content": "Be brief."}, user("q")]
    merged = {"role": "system", "content": "You are a careful agent. | Reminder: run the tests."}
    found = check_preservation(three, [merged, three[2], user("q")])
    assert [p.message for p in found] == [
        "system messages history[0] and history[1] are merged into view[0]"
    ]
    everything = {"role": "system", "content": "\n".join(m["content"] for m in three[:3])}
    (problem,) = check_preservation(three, [everything, user("q")])
    assert "history[0], history[1] and history[2] are merged into view[0]" in problem.message


@dataclass(frozen=True)
class Allowed:
    """Like the state machine's Relaxations: one attribute per relaxation."""

    hoisted_system: bool = False
    dropped_system: bool = False
    merged_system: bool = False
    budget_tolerance: float = 0.0


def test_relaxed_filters_by_kind_from_names_or_a_relaxations_object():
    merged = Violation("preservation", "merged", kind="merged-system")
    dropped = Violation("preservation", "dropped", kind="dropped-system")
    user_gone = Violation("preservation", "newest user", kind="dropped-user")
    found = [merged, dropped, user_gone]
    assert relaxed(found, ()) == found
    assert relaxed(found, ["merged-system"]) == [dropped, user_gone]
    assert relaxed(found, "merged-system") == [dropped, user_gone]
    assert relaxed(found, {"dropped-system", "budget-tolerance=0.05"}) == [user_gone]
    assert relaxed(found, Allowed(merged_system=True)) == [dropped, user_gone]
    assert relaxed(found, Allowed(dropped_system=True)) == [user_gone]
    assert relaxed(found, Allowed(hoisted_system=True, budget_tolerance=0.1)) == found


def test_the_catalogue_names_each_relaxation_once_and_allow_knows_each():
    from ctxkit.conformance.judge.allow import parse_allow
    from ctxkit.conformance.judge.catalogue import catalogue

    relaxations = catalogue()["relaxations"]
    names = [r["name"] for r in relaxations]
    assert len(names) == len(set(names)), names
    for relaxation in relaxations:
        value = "=0.1" if relaxation["value"] else ""
        parse_allow([relaxation["name"] + value])  # raises for a name --allow does not know
