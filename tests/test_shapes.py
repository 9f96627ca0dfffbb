"""Tests for ctxkit.shapes: every shape validated, grouped into units, and its rules as data;
the suite's own reading (ctxkit.conformance.judge.parts) agreeing with it on generated histories."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit import ContextBudgetExceeded
from ctxkit.conformance.judge.invariants import check_attachments, check_tool_pairs
from ctxkit.conformance.search.conversations import SHAPES as GENERATED
from ctxkit.conformance.search.conversations import RoundTemplate, conversation_plans, in_shape
from ctxkit.reference import ReferenceContextManager
from ctxkit.shapes import (
    PAIRING,
    SHAPES,
    InvalidMessage,
    group_units,
    inspect_message,
    text_of,
    validate_history,
)
from ctxkit.shapes.rules import BREAKS, rule, rule_set
from tests.hostile import spoiled_histories

RULES = Path(__file__).resolve().parent.parent / "conformance" / "rules"


def round_of(shape: str, outputs=("ok",), order=(0,), extras=False) -> list[dict[str, Any]]:
    return RoundTemplate(shape, outputs, order, extras).messages(itertools.count(1))  # type: ignore[arg-type]


# -- the rule sets are data, and the code agrees with them -----------------------------------


def test_every_shape_has_one_rule_file_and_every_name_agrees():
    assert {p.stem for p in RULES.glob("*.json")} == set(SHAPES)
    assert SHAPES == GENERATED
    for shape in SHAPES:
        rules = rule_set(shape)
        assert rules.shape == shape
        assert rules.pairing == PAIRING[shape]
        assert all(r.id.startswith(f"{shape}.") and r.error for r in rules.rules)
        assert len({r.id for r in rules.rules}) == len(rules.rules)


def test_every_rule_the_checks_cite_exists():
    source = "\n".join(
        (
            Path(__file__).resolve().parent.parent / "ctxkit" / "conformance" / "judge" / name
        ).read_text()
        for name in ("invariants.py",)
    )
    cited = set(__import__("re").findall(r'rule\("([a-z]+\.[a-z_]+)"\)', source))
    assert cited, "the checks cite rules by id"
    for rule_id in cited:
        assert rule(rule_id).property == "tool_pair_integrity"


def test_the_rule_files_are_plain_json_with_the_documented_keys():
    for path in RULES.glob("*.json"):
        data = json.loads(path.read_text())
        assert set(data) == {
            "$comment",
            "shape",
            "api",
            "system",
            "pairing",
            "parallel_calls",
            "without_ids",
            "result_order",
            "words",
            "rules",
        }
        assert set(data["words"]) == {"result", "call", "answer"}
        for item in data["rules"]:
            assert set(item) - {"breaks"} == {"id", "property", "holds", "error"}


def test_each_api_says_in_what_order_the_results_of_one_messages_calls_may_come():
    """Every API pairs results with calls by id, so the results of one message's calls come in
    any order; Gemini (and the GenAI record of it) pairs a call without an id by position."""
    assert {shape: rule_set(shape).result_order for shape in SHAPES} == {
        "openai": "any",
        "anthropic": "any",
        "responses": "any",
        "bedrock": "any",
        "gemini": "by_id",
        "genai": "by_id",
    }


@pytest.mark.parametrize("shape", SHAPES)
def test_every_api_names_one_rule_per_kind_of_pair_break(shape):
    """The judge, the repair and the audit cite the rule of a kind of break by asking the
    API's rule set: each API has exactly one rule for a call unanswered and one for a stray
    result, and at most one for an id used twice."""
    rules = rule_set(shape)
    for kind in BREAKS:
        tagged = [r.id for r in rules.rules if r.breaks == kind]
        assert len(tagged) == (kind != "duplicate" or len(tagged)), (kind, tagged)
        assert rules.breaking(kind) == (tagged[0] if tagged else "")
    result, call, answer = rules.said("custom_tool_call")
    assert "{" not in result + call + answer


# -- each shape: what a message is -----------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("extras", [False, True])
def test_a_round_of_each_shape_is_one_complete_unit(shape, extras):
    messages = round_of(shape, ("a", "b"), (1, 0), extras)
    infos = validate_history(messages)
    assert [u.status for u in group_units(infos)] == ["complete"]
    assert infos[0].form == shape
    assert (infos[0].call_ids and not infos[0].result_ids) or infos[0].leads


@pytest.mark.parametrize("shape", SHAPES)
def test_a_round_without_its_results_is_pending_and_a_lone_result_is_broken(shape):
    messages = round_of(shape, ("a",), (0,))
    calling = len(messages) - 1
    assert [u.status for u in group_units(validate_history(messages[:calling]))] == ["pending"]
    lone = group_units(validate_history([{"role": "user", "content": "hi"}, messages[-1]]))
    assert lone[-1].status == "broken"


@pytest.mark.parametrize("shape", SHAPES)
def test_text_in_each_shape_is_a_user_turn_and_its_text_is_read(shape):
    message = in_shape({"role": "user", "content": [{"type": "text", "text": "fix it"}]}, shape)
    info = inspect_message(message)
    assert info.role == "user"
    assert info.user_turn
    assert text_of(message) == "fix it"


def test_responses_items_have_roles_ctxkit_understands():
    reasoning, call, output = round_of("responses", extras=True)
    assert inspect_message(reasoning).leads
    assert inspect_message(call).role == "assistant"
    assert inspect_message(output).role == "tool"
    assert inspect_message({"role": "user", "content": "hi"}).form == "openai"
    typed = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    assert inspect_message(typed).form == "responses"


def test_a_reasoning_item_joins_the_item_it_preceded():
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    answer = {"type": "message", "role": "assistant", "content": "done"}
    units = group_units(validate_history([reasoning, answer]))
    assert [(u.start, u.stop, u.status) for u in units] == [(0, 2, "complete")]
    assert group_units(validate_history([reasoning]))[0].status == "pending"


def test_gemini_calls_without_ids_pair_by_position_and_name():
    call = {
        "role": "model",
        "parts": [{"functionCall": {"name": "a", "args": {}}}, {"functionCall": {"name": "b"}}],
    }

    def answer(*names):
        return {"role": "user", "parts": [{"functionResponse": {"name": n}} for n in names]}

    assert group_units(validate_history([call, answer("a", "b")]))[0].status == "complete"
    assert group_units(validate_history([call, answer("b", "a")]))[0].status == "broken"
    assert group_units(validate_history([call, answer("a")]))[0].status == "broken"
    # the same function called in two turns is no duplicate: positions are not ids
    validate_history([call, answer("a", "b"), call, answer("a", "b")])


def test_gemini_snake_case_parts_from_the_python_sdk_are_read_too():
    call = {"role": "model", "parts": [{"function_call": {"name": "a", "id": "c1", "args": {}}}]}
    answer = {"role": "user", "parts": [{"function_response": {"name": "a", "id": "c1"}}]}
    assert group_units(validate_history([call, answer]))[0].status == "complete"


@pytest.mark.parametrize(
    ("message", "field", "words"),
    [
        (
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "x"},
                    {"type": "tool_result", "tool_use_id": "t"},
                ],
            },
            "content[1]",
            "come first",
        ),
        (
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "x"},
                    {"type": "thinking", "thinking": "y", "signature": "s"},
                ],
            },
            "content[1]",
            "come first",
        ),
        (
            {
                "role": "assistant",
                "content": [{"type": "web_search_tool_result", "tool_use_id": "srv"}],
            },
            "content[0]",
            "same message",
        ),
        ({"type": "function_call", "name": "f"}, "call_id", "non-empty string"),
        ({"type": "function_call_output", "call_id": "c", "output": 3}, "output", "string"),
        ({"type": "message", "role": "tool", "content": "x"}, "role", "unknown role"),
        ({"role": "user", "parts": [{"functionCall": {"name": "f"}}]}, "parts[0]", "model turns"),
        ({"role": "model", "parts": "text"}, "parts", "list of parts"),
        ({"role": "user", "content": [{"toolUse": {"name": "f"}}]}, "content[0]", "assistant"),
        (
            {"role": "assistant", "content": [{"toolUse": {"name": "f"}}]},
            "content[0].toolUse.toolUseId",
            "non-empty",
        ),
        ({"role": "user", "parts": [{"type": "tool_call", "name": "f"}]}, "parts[0]", "assistant"),
        ({"role": "critic", "parts": [{"type": "text", "content": "x"}]}, "role", "unknown role"),
    ],
)
def test_what_a_provider_refuses_is_refused_naming_the_field(message, field, words):
    with pytest.raises(InvalidMessage) as caught:
        inspect_message(message, 3)
    assert caught.value.index == 3
    assert caught.value.field == field
    assert words in str(caught.value)


# -- generated histories: ctxkit.shapes and the suite's own reading agree ---------------------


@settings(max_examples=150, deadline=None)
@given(plan=conversation_plans(), shape=st.sampled_from(SHAPES))
def test_every_generated_history_is_valid_whole_units_and_passes_the_suites_checks(plan, shape):
    history = plan.messages((shape,))
    infos = validate_history(history)
    assert all(u.status == "complete" for u in group_units(infos))
    assert check_tool_pairs(history) == []
    assert check_attachments(history, history) == []


@settings(max_examples=300, deadline=None)
@given(history=spoiled_histories())
def test_a_spoiled_history_is_read_or_refused_with_a_typed_error_and_nothing_is_stored(history):
    """A list where the role goes, a number where the calls go: reading the history ends in
    InvalidMessage or its units, never another error, and the reference manager stores
    nothing of a message it refuses and views what it took, whole or compacted."""
    with contextlib.suppress(InvalidMessage):
        group_units(validate_history(history))

    async def add_each() -> None:
        manager = ReferenceContextManager()
        for message in history:
            before = await manager.get_messages()
            try:
                await manager.add_message(message)
            except InvalidMessage:
                assert await manager.get_messages() == before
        kept = await manager.get_messages()
        for budget in (100_000, 300):  # whole, and compacted
            try:
                view = await manager.get_messages_for_request(token_budget=budget)
            except ContextBudgetExceeded:  # what must be kept does not fit: said, typed
                continue
            assert len(view) <= len(kept)
            assert await manager.get_messages() == kept  # a view, the history untouched

    asyncio.run(add_each())


@settings(max_examples=100, deadline=None)
@given(plan=conversation_plans(), shape=st.sampled_from(SHAPES), data=st.data())
def test_a_view_of_whole_units_passes_and_cutting_inside_a_unit_fails(plan, shape, data):
    """The suite's checks and ctxkit's units agree: any choice of whole units is a valid
    view, and a view that starts inside a unit is caught."""
    history = plan.messages((shape,))
    units = group_units(validate_history(history))
    kept = data.draw(st.lists(st.booleans(), min_size=len(units), max_size=len(units)))
    view = [
        m
        for unit, keep in zip(units, kept, strict=True)
        if keep
        for m in history[unit.start : unit.stop]
    ]
    assert check_tool_pairs(view) == []
    assert check_attachments(history, view) == []
    inside = [u for u in units if len(u) > 1]
    if inside:
        unit = data.draw(st.sampled_from(inside))
        cut = data.draw(st.integers(unit.start + 1, unit.stop - 1))
        assert check_tool_pairs(history[cut:]) + check_attachments(history, history[cut:])


def test_a_caller_that_takes_some_shapes_refuses_the_others_but_not_plain_text():
    plain = {"role": "user", "content": "hi"}
    assert inspect_message(plain, shapes=("responses",)).form == "openai"
    call = round_of("openai")[0]
    with pytest.raises(InvalidMessage, match="only responses messages are taken"):
        inspect_message(call, 0, shapes=("responses",))
    gemini_text = in_shape({"role": "user", "content": [{"type": "text", "text": "x"}]}, "gemini")
    with pytest.raises(InvalidMessage, match="written in the gemini shape"):
        validate_history([plain, gemini_text], shapes=("openai", "anthropic"))


def test_format_takes_shapes_lists_and_all_and_names_a_misspelt_one():
    import argparse

    from ctxkit.cli.options import shape_list

    assert shape_list("all") == SHAPES
    assert shape_list("both") == ("openai", "anthropic")
    assert shape_list("gemini, responses,gemini") == ("gemini", "responses")
    with pytest.raises(argparse.ArgumentTypeError, match=r"gemni \(did you mean gemini\?\)"):
        shape_list("gemni")
