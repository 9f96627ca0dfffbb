"""Reading a ``ctxkit:usage`` event into metric points: only counts become points, and the
estimate ratio exists exactly when there is a view and a bill to compare."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ctxkit.telemetry.usage import reported_usage

ANYTHING = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**9), st.floats(), st.text(max_size=5)
)
KEYS = st.sampled_from(["input_tokens", "output_tokens", "estimated_tokens", "conversation_id"])


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


@given(st.dictionaries(KEYS, ANYTHING))
def test_only_counts_become_points(data: dict[str, Any]) -> None:
    usage = reported_usage(data)
    expected = {
        kind: data[key]
        for kind, key in (("input", "input_tokens"), ("output", "output_tokens"))
        if _is_count(data.get(key))
    }
    assert usage.tokens == expected
    billed, estimated = data.get("input_tokens"), data.get("estimated_tokens")
    if _is_count(billed) and billed > 0 and _is_count(estimated):
        assert usage.estimate_ratio == estimated / billed
    else:
        assert usage.estimate_ratio is None


def test_a_view_counted_exactly_as_billed_is_a_ratio_of_one() -> None:
    usage = reported_usage({"input_tokens": 1_234, "output_tokens": 56, "estimated_tokens": 1_234})
    assert usage.tokens == {"input": 1_234, "output": 56}
    assert usage.estimate_ratio == 1.0
