"""Tests for ctxkit.messages: validation, call/result bookkeeping and unit grouping."""

from __future__ import annotations

import asyncio
import copy
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.messages import (
    MAX_NESTING,
    InvalidMessage,
    MessageInfo,
    Unit,
    UnitGrouper,
    copy_message,
    group_units,
    inspect_message,
    results_of,
    text_of,
    tool_calls_of,
    validate_history,
)

# --------------------------------------------------------------------------- builders


def user(text: str = "hello") -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str = "sure") -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def oa_call(*ids: str, name: str = "search", text: str | None = None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": name, "arguments": '{"q": 1}'}}
            for i in ids
        ],
    }


def oa_result(call_id: str, output: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": output}


def an_call(*ids: str, name: str = "search", text: str | None = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [{"type": "tool_use", "id": i, "name": name, "input": {"q": 1}} for i in ids]
    return {"role": "assistant", "content": blocks}


def an_results(*ids: str, output: str = "ok", error: bool = False) -> dict[str, Any]:
    blocks = []
    for i in ids:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": i, "content": output}
        if error:
            block["is_error"] = True
        blocks.append(block)
    return {"role": "user", "content": blocks}


def units_of(messages: list[dict[str, Any]]) -> list[tuple[int, int, str]]:
    return [(u.start, u.stop, u.status) for u in group_units(validate_history(messages))]


# --------------------------------------------------------------------------- inspect_message


def raises_invalid(message: Any, index: int | None = 7) -> InvalidMessage:
    with pytest.raises(InvalidMessage) as info:
        inspect_message(message, index)
    return info.value


def test_invalid_message_is_a_value_error():
    assert issubclass(InvalidMessage, ValueError)
    with pytest.raises(ValueError, match=r"message\[0\]"):
        inspect_message([], 0)


@pytest.mark.parametrize(
    ("message", "type_name"), [([], "list"), ("hello", "str"), (None, "None"), (3, "int")]
)
def test_non_dict_message_is_rejected_naming_its_type(message, type_name):
    exc = raises_invalid(message)
    assert exc.index == 7
    assert exc.field is None
    assert "message[7]" in str(exc)
    assert "dict" in str(exc)
    assert type_name in str(exc)


def test_message_without_index_says_message_without_brackets():
    exc = raises_invalid({"content": "x"}, index=None)
    assert exc.index is None
    assert str(exc).startswith("message.role")


def test_missing_role_is_rejected():
    exc = raises_invalid({"content": "hi"})
    assert (exc.index, exc.field) == (7, "role")
    assert "message[7].role" in str(exc)
    assert "missing" in str(exc)


def test_unknown_role_is_rejected_listing_the_known_roles():
    exc = raises_invalid({"role": "robot", "content": "hi"})
    assert (exc.index, exc.field) == (7, "role")
    assert "'robot'" in str(exc)
    for role in ("assistant", "developer", "system", "tool", "user"):
        assert role in str(exc)


@pytest.mark.parametrize(
    "message",
    [
        {"role": "tool", "content": "out"},
        {"role": "tool", "tool_call_id": "", "content": "out"},
        {"role": "tool", "tool_call_id": None, "content": "out"},
        {"role": "tool", "tool_call_id": 12, "content": "out"},
    ],
    ids=["missing", "empty", "none", "int"],
)
def test_tool_message_needs_a_non_empty_string_tool_call_id(message):
    exc = raises_invalid(message)
    assert (exc.index, exc.field) == (7, "tool_call_id")
    assert "message[7].tool_call_id" in str(exc)
    assert "non-empty string" in str(exc)


def test_tool_call_without_id_is_rejected_naming_its_position():
    message = oa_call("a", "b")
    del message["tool_calls"][1]["id"]
    exc = raises_invalid(message)
    assert (exc.index, exc.field) == (7, "tool_calls[1].id")
    assert "message[7].tool_calls[1].id" in str(exc)


def test_tool_call_id_that_is_not_a_string_is_rejected():
    message = oa_call("a", "b")
    message["tool_calls"][1]["id"] = 42
    exc = raises_invalid(message)
    assert exc.field == "tool_calls[1].id"
    assert "message[7].tool_calls[1].id" in str(exc)
    assert "int" in str(exc)


@pytest.mark.parametrize(
    "function",
    [None, {}, {"name": 3, "arguments": "{}"}, "search"],
    ids=["no-function", "no-name", "name-not-str", "function-not-dict"],
)
def test_tool_call_without_function_name_is_rejected(function):
    message = oa_call("a")
    if function is None:
        del message["tool_calls"][0]["function"]
    else:
        message["tool_calls"][0]["function"] = function
    exc = raises_invalid(message)
    assert exc.field == "tool_calls[0].function"
    assert "message[7].tool_calls[0].function" in str(exc)
    assert "name" in str(exc)


def test_tool_calls_that_is_not_a_list_is_rejected():
    exc = raises_invalid({"role": "assistant", "tool_calls": {"id": "a"}})
    assert exc.field == "tool_calls"
    assert "list" in str(exc)


def test_tool_calls_on_a_user_message_is_rejected():
    message = oa_call("a")
    message["role"] = "user"
    exc = raises_invalid(message)
    assert exc.field == "tool_calls"
    assert "assistant" in str(exc)


def test_duplicate_openai_call_id_within_one_message_is_rejected():
    exc = raises_invalid(oa_call("a", "b", "a"))
    assert (exc.index, exc.field) == (7, "tool_calls")
    assert "duplicate call id 'a'" in str(exc)
    assert "message[7].tool_calls" in str(exc)


def test_duplicate_anthropic_call_id_within_one_message_is_rejected():
    exc = raises_invalid(an_call("x", "x"))
    assert (exc.index, exc.field) == (7, "content")
    assert "duplicate call id 'x'" in str(exc)


def test_duplicate_anthropic_result_id_within_one_message_is_rejected():
    exc = raises_invalid(an_results("x", "x"))
    assert exc.field == "content"
    assert "duplicate" in str(exc)


def test_tool_use_block_in_a_user_message_is_rejected():
    message = an_call("x")
    message["role"] = "user"
    exc = raises_invalid(message)
    assert (exc.index, exc.field) == (7, "content[0]")
    assert "message[7].content[0]" in str(exc)
    assert "tool_use" in str(exc)
    assert "user" in str(exc)


def test_tool_result_block_in_an_assistant_message_is_rejected():
    message = an_results("x")
    message["role"] = "assistant"
    exc = raises_invalid(message)
    assert (exc.index, exc.field) == (7, "content[0]")
    assert "tool_result" in str(exc)
    assert "assistant" in str(exc)


def test_tool_result_without_tool_use_id_is_rejected_naming_the_block():
    message = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "ok"},
            {"type": "tool_result", "content": "ok"},
        ],
    }
    exc = raises_invalid(message)
    assert (exc.index, exc.field) == (7, "content[1].tool_use_id")
    assert "message[7].content[1].tool_use_id" in str(exc)


def test_tool_use_without_id_or_name_is_rejected():
    no_id = {"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]}
    assert raises_invalid(no_id).field == "content[0].id"
    no_name = {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "input": {}}]}
    assert raises_invalid(no_name).field == "content[0].name"


@pytest.mark.parametrize(
    ("content", "type_name"), [(42, "int"), ({"text": "hi"}, "dict"), (b"hi", "bytes")]
)
def test_content_of_the_wrong_type_is_rejected(content, type_name):
    exc = raises_invalid({"role": "user", "content": content})
    assert (exc.index, exc.field) == (7, "content")
    assert "message[7].content" in str(exc)
    assert type_name in str(exc)


def test_content_block_that_is_not_a_dict_is_rejected():
    exc = raises_invalid({"role": "user", "content": [{"type": "text", "text": "a"}, "b"]})
    assert exc.field == "content[1]"
    assert "str" in str(exc)


def test_content_block_without_type_or_text_is_rejected():
    # Untyped blocks are Bedrock Converse's; mixed with typed ones they are neither shape.
    mixed = {"role": "user", "content": [{"type": "text", "text": "a"}, {"text": "b"}]}
    assert raises_invalid(mixed).field == "content[1]"
    exc = raises_invalid({"role": "user", "content": [{"type": "text", "text": 5}]})
    assert exc.field == "content[0].text"


def test_tool_result_inner_content_of_the_wrong_type_is_rejected():
    message = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "a", "content": 5}],
    }
    assert raises_invalid(message).field == "content[0].content"


def test_name_that_is_not_a_string_is_rejected():
    assert raises_invalid({"role": "user", "content": "x", "name": 5}).field == "name"


def test_message_mixing_tool_calls_and_tool_use_blocks_is_rejected():
    message = an_call("x")
    message["tool_calls"] = oa_call("y")["tool_calls"]
    exc = raises_invalid(message)
    assert (exc.index, exc.field) == (7, "tool_calls")
    assert "mixes" in str(exc)


def test_validate_history_rejects_a_call_id_reused_by_a_later_message_naming_both():
    history = [user(), oa_call("a"), oa_result("a"), assistant(), oa_call("b", "a")]
    with pytest.raises(InvalidMessage) as info:
        validate_history(history)
    exc = info.value
    assert (exc.index, exc.field) == (4, "tool_calls")
    assert "message[4]" in str(exc)
    assert "message[1]" in str(exc)
    assert "'a'" in str(exc)


def test_validate_history_rejects_a_call_id_reused_across_shapes():
    history = [oa_call("a"), oa_result("a"), an_call("a")]
    with pytest.raises(InvalidMessage) as info:
        validate_history(history)
    assert (info.value.index, info.value.field) == (2, "content")
    assert "message[0]" in str(info.value)


def test_validate_history_reports_the_first_bad_message_index():
    with pytest.raises(InvalidMessage) as info:
        validate_history([user(), assistant(), {"role": "nobody"}, "junk"])
    assert info.value.index == 2


def test_validate_history_returns_one_info_per_message():
    history = [user(), oa_call("a"), oa_result("a"), an_call("b"), an_results("b")]
    infos = validate_history(history)
    assert infos == [inspect_message(m) for m in history]


# --------------------------------------------------------------------------- MessageInfo


@pytest.mark.parametrize("role", ["system", "developer", "user", "assistant"])
def test_plain_message_info_has_no_calls_results_or_shape(role):
    info = inspect_message({"role": role, "content": "words"})
    assert info == MessageInfo(role=role, user_turn=role == "user")


def test_openai_call_info_lists_call_ids_in_order():
    info = inspect_message(oa_call("c3", "c1", "c2", text="let me look"))
    assert info.call_ids == ("c3", "c1", "c2")
    assert info.result_ids == ()
    assert info.shape == "openai"
    assert not info.user_turn


def test_openai_result_info():
    info = inspect_message(oa_result("c9"))
    assert info.role == "tool"
    assert (info.call_ids, info.result_ids, info.shape) == ((), ("c9",), "openai")
    assert not info.user_turn
    assert not info.error_result


def test_anthropic_call_info_lists_call_ids_in_order():
    info = inspect_message(an_call("t2", "t1", text="checking"))
    assert info.call_ids == ("t2", "t1")
    assert info.shape == "anthropic"


def test_anthropic_results_info_lists_result_ids_in_order():
    info = inspect_message(an_results("t2", "t1"))
    assert info.result_ids == ("t2", "t1")
    assert info.call_ids == ()
    assert info.shape == "anthropic"


def test_user_message_with_only_tool_results_is_not_a_user_turn():
    assert inspect_message(an_results("t1")).user_turn is False


def test_user_message_with_tool_results_and_text_is_a_user_turn():
    message = an_results("t1")
    message["content"].append({"type": "text", "text": "and also check the logs"})
    assert inspect_message(message).user_turn is True


def test_user_message_with_tool_results_and_blank_text_is_not_a_user_turn():
    message = an_results("t1")
    message["content"].append({"type": "text", "text": "   \n"})
    assert inspect_message(message).user_turn is False


def test_user_message_with_an_image_block_is_a_user_turn():
    message = {"role": "user", "content": [{"type": "image", "source": {}}]}
    assert inspect_message(message).user_turn is True


@pytest.mark.parametrize("content", ["", "   ", None, []])
def test_user_message_without_words_is_not_a_user_turn(content):
    assert inspect_message({"role": "user", "content": content}).user_turn is False


def test_is_error_true_marks_an_error_result():
    assert inspect_message(an_results("t1", error=True)).error_result is True
    assert inspect_message(an_results("t1")).error_result is False


def test_is_error_must_be_exactly_true():
    message = an_results("t1")
    message["content"][0]["is_error"] = "yes"
    assert inspect_message(message).error_result is False


# --------------------------------------------------------------------------- group_units


def test_plain_messages_are_complete_units_of_one():
    history = [{"role": "system", "content": "be nice"}, user(), assistant(), user("more")]
    assert units_of(history) == [(i, i + 1, "complete") for i in range(4)]


def test_empty_history_has_no_units():
    assert group_units([]) == []


def test_openai_parallel_calls_answered_in_any_order_form_one_complete_unit():
    history = [user(), oa_call("a", "b", "c"), oa_result("c"), oa_result("a"), oa_result("b")]
    history.append(assistant())
    assert units_of(history) == [(0, 1, "complete"), (1, 5, "complete"), (5, 6, "complete")]


def test_anthropic_call_answered_by_the_next_user_message_is_one_complete_unit():
    history = [user(), an_call("x", "y", text="two calls"), an_results("y", "x"), assistant()]
    assert units_of(history) == [(0, 1, "complete"), (1, 3, "complete"), (3, 4, "complete")]


def test_anthropic_results_split_over_two_user_messages_is_broken():
    history = [user(), an_call("x", "y"), an_results("x"), an_results("y"), assistant()]
    assert units_of(history) == [
        (0, 1, "complete"),
        (1, 2, "broken"),
        (2, 3, "broken"),
        (3, 4, "broken"),
        (4, 5, "complete"),
    ]


def test_anthropic_results_message_answering_an_extra_id_is_broken():
    history = [an_call("x"), an_results("x", "zzz")]
    assert units_of(history) == [(0, 1, "broken"), (1, 2, "broken")]


def test_result_with_no_call_is_a_broken_unit_alone():
    assert units_of([user(), oa_result("ghost"), assistant()]) == [
        (0, 1, "complete"),
        (1, 2, "broken"),
        (2, 3, "complete"),
    ]
    assert units_of([user(), an_results("ghost"), assistant()]) == [
        (0, 1, "complete"),
        (1, 2, "broken"),
        (2, 3, "complete"),
    ]


def test_interrupted_openai_call_is_broken_and_next_message_starts_its_own_unit():
    history = [user(), oa_call("a", "b"), oa_result("a"), user("stop, do something else")]
    assert units_of(history) == [(0, 1, "complete"), (1, 3, "broken"), (3, 4, "complete")]


def test_interrupted_anthropic_call_is_broken_and_next_message_starts_its_own_unit():
    history = [user(), an_call("x"), user("never mind"), assistant()]
    assert units_of(history) == [
        (0, 1, "complete"),
        (1, 2, "broken"),
        (2, 3, "complete"),
        (3, 4, "complete"),
    ]


def test_call_followed_by_another_call_breaks_the_first():
    assert units_of([oa_call("a"), oa_call("b"), oa_result("b")]) == [
        (0, 1, "broken"),
        (1, 3, "complete"),
    ]


def test_openai_result_for_an_unknown_id_breaks_the_pending_call():
    history = [oa_call("a", "b"), oa_result("a"), oa_result("zzz"), oa_result("b")]
    assert units_of(history) == [(0, 2, "broken"), (2, 3, "broken"), (3, 4, "broken")]


def test_openai_result_repeated_while_pending_breaks_the_call():
    history = [oa_call("a", "b"), oa_result("a"), oa_result("a"), oa_result("b")]
    assert units_of(history) == [(0, 2, "broken"), (2, 3, "broken"), (3, 4, "broken")]


def test_result_answered_twice_leaves_the_second_broken():
    assert units_of([oa_call("a"), oa_result("a"), oa_result("a")]) == [
        (0, 2, "complete"),
        (2, 3, "broken"),
    ]


def test_trailing_openai_call_is_pending_until_every_result_arrives():
    grouper = UnitGrouper()
    for message in [user(), oa_call("a", "b")]:
        grouper.push(inspect_message(message))
    assert grouper.units == [Unit(0, 1, "complete"), Unit(1, 2, "pending")]
    grouper.push(inspect_message(oa_result("b")))
    assert grouper.units == [Unit(0, 1, "complete"), Unit(1, 3, "pending")]
    grouper.push(inspect_message(oa_result("a")))
    assert grouper.units == [Unit(0, 1, "complete"), Unit(1, 4, "complete")]
    grouper.push(inspect_message(assistant()))
    assert grouper.units[-1] == Unit(4, 5, "complete")
    assert len(grouper.units) == 3


def test_trailing_anthropic_call_is_pending_then_complete_when_results_arrive():
    grouper = UnitGrouper()
    grouper.push(inspect_message(an_call("x", "y")))
    assert grouper.units == [Unit(0, 1, "pending")]
    grouper.push(inspect_message(an_results("x", "y")))
    assert grouper.units == [Unit(0, 2, "complete")]
    assert len(grouper.units[0]) == 2


def test_pending_unit_becomes_broken_when_a_plain_message_arrives():
    grouper = UnitGrouper()
    grouper.push(inspect_message(oa_call("a")))
    grouper.push(inspect_message(user()))
    assert grouper.units == [Unit(0, 1, "broken"), Unit(1, 2, "complete")]


def test_shapes_can_be_mixed_across_units_in_one_history():
    history = [
        user(),
        oa_call("a", "b"),
        oa_result("b"),
        oa_result("a"),
        an_call("x", text="now the other shape"),
        an_results("x"),
        oa_call("c"),
        oa_result("c"),
        assistant("done"),
    ]
    assert units_of(history) == [
        (0, 1, "complete"),
        (1, 4, "complete"),
        (4, 6, "complete"),
        (6, 8, "complete"),
        (8, 9, "complete"),
    ]


def test_openai_call_answered_by_an_anthropic_tool_result_is_broken():
    assert units_of([oa_call("a"), an_results("a")]) == [(0, 1, "broken"), (1, 2, "broken")]


def test_anthropic_call_answered_by_an_openai_tool_message_is_broken():
    assert units_of([an_call("a"), oa_result("a")]) == [(0, 1, "broken"), (1, 2, "broken")]


def test_unit_equality_and_length():
    assert Unit(2, 5, "complete") == Unit(2, 5, "complete")
    assert Unit(2, 5, "complete") != Unit(2, 5, "broken")
    assert Unit(2, 5, "complete") != (2, 5, "complete")
    assert len(Unit(2, 5, "pending")) == 3
    assert repr(Unit(2, 5, "pending")) == "Unit(2, 5, 'pending')"


# --------------------------------------------------------------------------- generated histories


@st.composite
def histories(draw) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """A valid history and the units it must group into, as (length, status) pairs.

    Segments: plain messages, answered calls of 1-3 parallel calls in either shape, orphan
    results, interrupted calls (followed by a user message), and optionally a trailing call.
    """
    counter = iter(range(10_000))

    def fresh() -> str:
        return f"call_{next(counter)}"

    messages: list[dict[str, Any]] = []
    expected: list[tuple[int, str]] = []
    kinds = st.sampled_from(
        ["plain", "oa_answered", "an_answered", "orphan", "oa_interrupted", "an_interrupted"]
    )
    for kind in draw(st.lists(kinds, max_size=12)):
        if kind == "plain":
            messages.append(draw(st.sampled_from([user("q"), assistant("a"), user("more")])))
            expected.append((1, "complete"))
        elif kind == "oa_answered":
            ids = [fresh() for _ in range(draw(st.integers(1, 3)))]
            messages.append(oa_call(*ids, text=draw(st.sampled_from([None, "", "checking"]))))
            messages.extend(oa_result(i) for i in draw(st.permutations(ids)))
            expected.append((1 + len(ids), "complete"))
        elif kind == "an_answered":
            ids = [fresh() for _ in range(draw(st.integers(1, 3)))]
            messages.append(an_call(*ids, text=draw(st.sampled_from([None, "checking"]))))
            messages.append(an_results(*draw(st.permutations(ids)), error=draw(st.booleans())))
            expected.append((2, "complete"))
        elif kind == "orphan":
            orphan = fresh()
            messages.append(draw(st.sampled_from([oa_result(orphan), an_results(orphan)])))
            expected.append((1, "broken"))
        elif kind == "oa_interrupted":
            ids = [fresh() for _ in range(draw(st.integers(1, 3)))]
            answered = draw(st.integers(0, len(ids) - 1))
            messages.append(oa_call(*ids))
            messages.extend(oa_result(i) for i in draw(st.permutations(ids))[:answered])
            messages.append(user("stop"))
            expected += [(1 + answered, "broken"), (1, "complete")]
        else:  # an_interrupted: no results, or only some of them
            ids = [fresh() for _ in range(draw(st.integers(1, 3)))]
            messages.append(an_call(*ids))
            expected.append((1, "broken"))
            if len(ids) > 1 and draw(st.booleans()):
                messages.append(an_results(*ids[:-1]))
                expected.append((1, "broken"))
            messages.append(user("stop"))
            expected.append((1, "complete"))
    if draw(st.booleans()):
        ids = [fresh() for _ in range(draw(st.integers(1, 3)))]
        if draw(st.booleans()):
            answered = draw(st.integers(0, len(ids) - 1))
            messages.append(oa_call(*ids))
            messages.extend(oa_result(i) for i in ids[:answered])
            expected.append((1 + answered, "pending"))
        else:
            messages.append(an_call(*ids))
            expected.append((1, "pending"))
    return messages, expected


@settings(max_examples=150, deadline=None)
@given(histories())
def test_generated_histories_group_into_the_expected_units(case):
    messages, expected = case
    units = group_units(validate_history(messages))
    assert [(len(u), u.status) for u in units] == expected


@settings(max_examples=150, deadline=None)
@given(histories())
def test_units_cover_every_index_exactly_once_in_order(case):
    messages, _ = case
    units = group_units(validate_history(messages))
    covered = [i for u in units for i in range(u.start, u.stop)]
    assert covered == list(range(len(messages)))
    assert all(len(u) >= 1 for u in units)
    for before, after in itertools.pairwise(units):
        assert before.stop == after.start


@settings(max_examples=150, deadline=None)
@given(histories())
def test_complete_calling_units_answer_every_call_inside_them(case):
    messages, _ = case
    infos = validate_history(messages)
    for unit in group_units(infos):
        inside = infos[unit.start : unit.stop]
        calls = [c for info in inside for c in info.call_ids]
        results = [r for info in inside for r in info.result_ids]
        if unit.status == "complete" and calls:
            assert sorted(calls) == sorted(results)
            assert infos[unit.start].call_ids  # the call opens its unit
        if unit.status == "complete" and not calls:
            assert not results
            assert len(unit) == 1


@settings(max_examples=100, deadline=None)
@given(histories())
def test_group_units_equals_pushing_one_message_at_a_time(case):
    messages, _ = case
    infos = validate_history(messages)
    grouper = UnitGrouper()
    for count, info in enumerate(infos, start=1):
        grouper.push(info)
        # each prefix groups exactly like the batch over the same prefix
        assert grouper.units == group_units(infos[:count])
    assert grouper.units == group_units(infos)


# --------------------------------------------------------------------------- copy_message


def test_copy_message_is_equal_and_deep():
    original = an_call("x", "y", text="hi")
    original["content"][1]["input"] = {"paths": ["a", "b"], "opts": {"deep": [1, {"k": "v"}]}}
    snapshot = copy.deepcopy(original)
    clone = copy_message(original)
    assert clone == original
    assert clone is not original
    clone["content"][1]["input"]["paths"].append("c")
    clone["content"][1]["input"]["opts"]["deep"][1]["k"] = "changed"
    clone["content"].append({"type": "text", "text": "new"})
    clone["content"][0]["text"] = "edited"
    clone["role"] = "user"
    assert original == snapshot


def test_copy_message_copies_openai_tool_calls_deeply():
    original = oa_call("a", "b")
    snapshot = copy.deepcopy(original)
    clone = copy_message(original)
    assert clone == original
    clone["tool_calls"][0]["function"]["name"] = "other"
    clone["tool_calls"].pop()
    assert original == snapshot


def test_copy_message_falls_back_to_deepcopy_for_other_containers():
    original = {"role": "user", "content": "x", "meta": ({"tags": ["a"]},)}
    clone = copy_message(original)
    assert clone == original
    clone["meta"][0]["tags"].append("b")
    assert original["meta"][0]["tags"] == ["a"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(json_values)
def test_copy_message_equals_deepcopy_on_any_json_value(value):
    clone = copy_message(value)
    assert clone == value
    assert clone == copy.deepcopy(value)


# --------------------------------------------------------------------------- accessors


def test_tool_calls_of_both_shapes():
    assert tool_calls_of(oa_call("a", "b")) == ("a", "b")
    assert tool_calls_of(an_call("x", "y", text="t")) == ("x", "y")
    assert tool_calls_of(user()) == ()
    assert tool_calls_of(oa_result("a")) == ()


def test_results_of_both_shapes():
    assert results_of(oa_result("a")) == ("a",)
    assert results_of(an_results("y", "x")) == ("y", "x")
    assert results_of(an_call("x")) == ()
    assert results_of(assistant()) == ()


def test_accessors_validate_the_message():
    with pytest.raises(InvalidMessage):
        tool_calls_of({"role": "tool"})
    with pytest.raises(InvalidMessage):
        results_of({"role": "wizard"})


def test_text_of_string_content_and_none():
    assert text_of(user("hello there")) == "hello there"
    assert text_of(oa_result("a", "output text")) == "output text"
    assert text_of(oa_call("a")) == ""
    assert text_of({"role": "assistant"}) == ""


def test_text_of_anthropic_blocks_joins_text_and_tool_outputs():
    message = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "x", "content": "first output"},
            {
                "type": "tool_result",
                "tool_use_id": "y",
                "content": [{"type": "text", "text": "nested"}, {"type": "image"}],
            },
            {"type": "text", "text": "my note"},
            {"type": "image", "source": {}},
        ],
    }
    assert text_of(message) == "first output\nnested\nmy note"


def test_text_of_anthropic_call_skips_tool_use_blocks():
    assert text_of(an_call("x", text="thinking aloud")) == "thinking aloud"
    assert text_of(an_call("x")) == ""


def _nested(depth: int) -> dict:
    """A message whose metadata nests so that the deepest dict is at ``depth``."""
    message: dict = {"role": "user", "content": "hi"}
    inner = message
    for _ in range(depth - 1):
        inner["metadata"] = {}
        inner = inner["metadata"]
    return message


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 490, 100_000])
def test_nesting_past_the_limit_is_refused_up_front_at_any_depth(depth: int):
    with pytest.raises(InvalidMessage, match=f"deeper than {MAX_NESTING}"):
        inspect_message(_nested(depth))


def test_nesting_at_the_limit_is_stored_viewed_and_reloaded(tmp_path):
    from ctxkit.reference import ReferenceContextManager

    message = _nested(MAX_NESTING)

    async def scenario() -> tuple[list, list]:
        path = tmp_path / "h.jsonl"
        async with ReferenceContextManager(storage_path=path, fsync="never") as manager:
            await manager.add_message(message)
            view = await manager.get_messages_for_request(token_budget=100_000)
        async with ReferenceContextManager(storage_path=path, fsync="never") as manager:
            return view, await manager.get_messages()

    view, reloaded = asyncio.run(scenario())
    assert view == [message]
    assert reloaded == [message]


@pytest.mark.parametrize("key", [(1, 2), 1, None, 2.5])
def test_a_key_that_is_not_a_string_is_refused_and_nothing_is_stored(key):
    from ctxkit.reference import ReferenceContextManager

    async def scenario() -> list:
        manager = ReferenceContextManager()
        await manager.add_message({"role": "user", "content": "first"})
        with pytest.raises(InvalidMessage, match="not a string"):
            await manager.add_message({"role": "user", "content": "x", "metadata": {key: 1}})
        return await manager.get_messages()

    assert asyncio.run(scenario()) == [{"role": "user", "content": "first"}]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=3), json_values, max_size=5))
def test_a_messages_copier_is_a_deep_copy_shared_by_messages_built_alike(message):
    from ctxkit import messages
    from ctxkit.messages import copier_of

    messages._COPIERS.clear()  # a full cache makes copiers without keeping them
    copy = copier_of(message)
    copied = copy(message)
    assert copied == message
    assert copier_of(copy_message(message)) is copy  # same skeleton, same copier

    def containers(value, found):
        if isinstance(value, dict | list):
            found.add(id(value))
            for item in value.values() if isinstance(value, dict) else value:
                containers(item, found)
        return found

    assert not containers(copied, set()) & containers(message, set())


def test_a_value_the_copier_does_not_model_is_copied_generically():
    from ctxkit.messages import copier_of

    message = {"role": "user", "content": [("a", ["b"])]}
    copied = copier_of(message)(message)
    assert copied == message
    assert copied["content"][0][1] is not message["content"][0][1]
