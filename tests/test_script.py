"""Reproducer scripts are valid Python by construction, whatever the messages hold."""

from __future__ import annotations

import ast
import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkit.conformance.allow import Relaxations
from ctxkit.conformance.script import Reproduction, literal, render_script, render_steps
from ctxkit.conformance.steps import Call, Check, Request

# Any JSON-like value, with the awkward corners: surrogates, control and line-separator
# characters, quotes and backslashes, non-finite floats, big ints, deep nesting.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(st.characters(codec=None), max_size=40),
    st.sampled_from(["'", '"', "'\"", "\\", '"""', "\u2028", "\x0c", "\r\n", "\ud800", "x" * 300]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)


def same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def evaluate(source: str) -> Any:
    return eval(compile(source, "<literal>", "eval"), {"json": json})


@settings(max_examples=300)
@given(value=values, indent=st.sampled_from([0, 4, 8]))
def test_a_literal_evaluates_to_the_value(value: Any, indent: int) -> None:
    source = literal(value, indent)
    assert same(evaluate(source), value)
    # A literal spread over lines is valid wherever it is indented (inside a function body).
    ast.parse("def f():\n    x = " + source.replace("\n", "\n    ") + "\n")


def test_deep_nesting_becomes_json_and_long_runs_stay_short() -> None:
    deep: Any = "leaf"
    for _ in range(300):
        deep = [deep]
    assert literal(deep).startswith("json.loads(")
    assert evaluate(literal(deep)) == deep
    assert literal("y" * 24_000) == '"y" * 24000'
    assert literal(float("nan")) == 'float("nan")'


messages = st.dictionaries(
    st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "name", "x"]),
    values,
    max_size=4,
)
requests = st.builds(
    Request,
    token_budget=st.none() | st.integers(1, 10**6),
    defaults=st.none() | st.fixed_dictionaries({"context_window": st.integers(1, 10**6)}),
)
calls = st.one_of(
    st.builds(
        Call,
        op=st.sampled_from(["add", "add_then_edit", "add_bad"]),
        value=messages,
        note=st.text(max_size=30),
    ),
    st.builds(
        Call,
        op=st.sampled_from(["add_concurrently", "set", "set_then_edit"]),
        value=st.lists(messages, max_size=3),
    ),
    st.builds(
        Call,
        op=st.sampled_from(["request", "request_then_edit"]),
        value=requests,
        tolerated=st.booleans(),
        timeout=st.none() | st.floats(0.1, 60),
        name=st.sampled_from(["view", "again"]),
    ),
    st.builds(Call, op=st.sampled_from(["get_then_edit", "clear"])),
)
checks = st.one_of(
    st.builds(
        Check,
        kind=st.sampled_from(
            [
                "raises",
                "returns",
                "crashes",
                "refuses",
                "is_list",
                "tool_pairs",
                "empty_view",
                "same_view",
                "not_edited",
                "events",
            ]
        ),
    ),
    st.builds(
        Check,
        kind=st.sampled_from(["ordering", "preserved"]),
        args=st.fixed_dictionaries(
            {
                "history": st.lists(messages, max_size=3),
                "allow": st.just(Relaxations(hoisted_system=True)),
            }
        ),
    ),
    st.builds(
        Check, kind=st.just("fits"), args=st.fixed_dictionaries({"budget": st.integers(1, 10**6)})
    ),
    st.builds(
        Check,
        kind=st.just("history"),
        args=st.fixed_dictionaries(
            {"expected": st.lists(messages, max_size=3), "property": st.sampled_from(["lifecycle"])}
        ),
    ),
    st.builds(
        Check,
        kind=st.just("stored_all"),
        args=st.fixed_dictionaries(
            {"before": st.lists(messages, max_size=2), "added": st.lists(messages, max_size=2)}
        ),
    ),
)


@settings(max_examples=200)
@given(
    calls=st.lists(calls, max_size=6),
    check=checks,
    message=st.text(st.characters(codec=None), max_size=200),
    target=st.text(max_size=30),
    config=st.dictionaries(st.text(max_size=8), values, max_size=3),
)
def test_every_script_is_valid_python(
    calls: list[Call], check: Check, message: str, target: str, config: dict[str, Any]
) -> None:
    repro = Reproduction(
        target=target,
        config=config,
        property_id="ordering",
        level="required",
        message=message,
        calls=calls,
        check=check,
        command=f"ctxkit conformance {message}",
    )
    script = render_script(repro)
    tree = ast.parse(script)
    assert ast.get_docstring(tree) is not None
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported == {"ctxkit.conformance.replay"}
    assert "def test_ordering() -> None:" in script
    assert len(render_steps(repro)) == len(calls) + 1
