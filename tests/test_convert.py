"""Tests for ctxkit.shapes.convert: lossless conversions between shapes, refusals naming what
would be lost."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.conformance.judge.comes_from import equivalent
from ctxkit.conformance.judge.invariants import check_tool_pairs
from ctxkit.conformance.search.conversations import RoundTemplate, conversation_plans
from ctxkit.shapes import SHAPES, group_units, validate_history
from ctxkit.shapes.convert import ConversionError, convert


@settings(max_examples=120, deadline=None)
@given(plan=conversation_plans(), source=st.sampled_from(SHAPES), target=st.sampled_from(SHAPES))
def test_a_history_converts_to_each_shape_it_can_and_back_unchanged(plan, source, target):
    history = plan.messages((source,))
    written = _converted(history, target)
    if written is None:
        return
    infos = validate_history(written)
    assert all(unit.status == "complete" for unit in group_units(infos))
    assert check_tool_pairs(written) == []
    back = convert(written, source)
    assert len(back) == len(history)
    for ours, theirs in zip(back, history, strict=True):
        assert equivalent(ours, theirs), (ours, theirs)


def _converted(history: list, target: str) -> list | None:
    """The history in ``target``, or None where it holds what the target cannot say (error
    flags, reasoning and thinking, server tools, Gemini calls known by position): refused
    with the message named."""
    try:
        return convert(history, target)  # type: ignore[arg-type]
    except ConversionError as refused:
        problem = refused
    assert problem.index is not None
    assert "not every shape can say" in str(problem)
    return None


@pytest.mark.parametrize("target", SHAPES)
def test_every_id_bearing_round_converts_to_every_shape(target):
    for source in ("openai", "responses", "bedrock", "genai"):
        history = RoundTemplate(source, ("a", "b"), (1, 0)).messages(itertools.count(1))
        assert [u.status for u in group_units(validate_history(convert(history, target)))] == [
            "complete"
        ]


@pytest.mark.parametrize(
    ("source", "target", "words"),
    [
        ("anthropic", "openai", "thinking block"),
        ("responses", "anthropic", "the item is a reasoning"),
        ("gemini", "openai", "signature"),
        ("bedrock", "openai", "reasoningContent"),
        ("genai", "openai", "reasoning part"),
    ],
)
def test_what_only_one_shape_can_say_is_refused_naming_the_message(source, target, words):
    history = RoundTemplate(source, ("a",), (0,), extras=True).messages(itertools.count(1))
    with pytest.raises(ConversionError) as refused:
        convert(history, target)
    assert refused.value.index == 0
    assert words in str(refused.value)


def test_an_error_flag_is_kept_where_the_target_has_one_and_refused_where_not():
    history = RoundTemplate("anthropic", ("Error: no such file",), (0,)).messages(
        itertools.count(1)
    )
    bedrock = convert(history, "bedrock")
    assert bedrock[1]["content"][0]["toolResult"]["status"] == "error"
    assert convert(bedrock, "anthropic") == history
    with pytest.raises(ConversionError, match="flagged as an error"):
        convert(history, "openai")


def test_an_unknown_shape_is_a_value_error():
    with pytest.raises(ValueError, match="unknown shape"):
        convert([], "cohere")  # type: ignore[arg-type]
