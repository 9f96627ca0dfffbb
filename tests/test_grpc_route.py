"""``ctxkit conformance grpc://HOST:PORT``: context modules served through amplifier-core's
gRPC ContextService (real servers on 127.0.0.1) are judged like any target; messages cross
the proto faithfully both ways, and what it cannot carry is named, never guessed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

grpc = pytest.importorskip("grpc", reason="pip install 'ctxkit-llm[grpc]'")

from ctxkit.conformance.runner import RunOptions, run  # noqa: E402
from ctxkit.conformance.search.conversations import conversations, plain_messages  # noqa: E402
from ctxkit.conformance.targets.grpc_messages import CannotCross, Crossing  # noqa: E402
from tests.grpc_modules import served  # noqa: E402
from tests.processes import ctxkit  # noqa: E402

SHORT = {
    "profile": "quick",
    "seed": 3,
    "max_examples": 6,
    "shrink_seconds": 1.0,
    "stability_steps": 40,
}
"""Short runs: brief shrinking and a 40-call advisory loop, each call a round trip through the
gRPC bridge (what these tests judge is the route, not how small a counterexample gets)."""
OPENAI = {**SHORT, "shapes": ("openai",)}


@settings(max_examples=60, deadline=None)
@given(conversations() | st.lists(plain_messages(), max_size=5))
def test_a_history_crosses_the_proto_and_comes_back_equal(history):
    crossing = Crossing()
    blocks = [b for m in history for b in _blocks(m)]
    server = any(b.get("type") in ("server_tool_use", "web_search_tool_result") for b in blocks)
    if server or any(b.get("is_error") for b in blocks):
        # The proto has no field for is_error, nor blocks for server tools.
        with pytest.raises(CannotCross, match=r"'is_error'|a content block shaped"):
            [crossing.to_proto(m) for m in history]
        return
    sent = [crossing.to_proto(m) for m in history]
    assert [crossing.from_proto(m) for m in sent] == history


def _blocks(message: dict) -> list[dict]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


@pytest.mark.parametrize(
    ("message", "named"),
    [
        ({"role": "wizard", "content": "x"}, "role 'wizard'"),
        ({"role": "user", "content": "x", "cache": 1}, "the key(s) 'cache'"),
        (
            {"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {}}]},
            "block",
        ),
        ({"role": "user", "content": 42}, "content that is a int"),
        ("not a message", "not an object"),
    ],
)
def test_what_the_proto_cannot_carry_is_named(message, named):
    with pytest.raises(CannotCross, match=named.replace("(", r"\(").replace(")", r"\)")):
        Crossing().to_proto(message)


def test_a_correct_module_served_over_grpc_passes_every_required_property():
    # About 25 s: every call of a whole suite run is a round trip through the gRPC bridge.
    # The module keeps every message, so nothing is ever compacted: inconclusive, after a
    # history grown to 10,000 tokens (every call through the bridge) never compacted either.
    with served("all") as target:
        report = run(RunOptions(target=target, max_tokens=10_000, **OPENAI))
    statuses = {p.id: p.status for p in report.properties}
    assert report.verdict == "inconclusive", statuses
    assert all(p.status == "passed" for p in report.properties if p.level == "required")
    assert report.depth["largest_history_tokens"] >= 10_000
    assert statuses["events"] == "skipped"  # the proto carries no events


@pytest.mark.long
def test_a_pair_splitting_module_is_caught_with_a_verified_reproducer():
    # About 35 s: as above, and four failing properties each minimized over gRPC and verified.
    with served("newest") as target:
        report = run(RunOptions(target=target, **OPENAI))
    (pairs,) = [p for p in report.properties if p.id == "tool_pair_integrity"]
    assert pairs.status == "failed"
    assert pairs.verified, pairs.verification
    assert f'TARGET = "{target}"' in pairs.reproducer


def test_what_cannot_cross_is_reported_as_not_checked_not_as_a_failure():
    """Anthropic tool results marked is_error, and server tool blocks, have no field in the
    proto: the examples that need them are dropped, and the report says why."""
    with served("all") as target:
        report = run(
            RunOptions(target=target, max_tokens=10_000, **{**SHORT, "shapes": ("anthropic",)})
        )
    # keep_all ignores budgets: only recommended ones fail, and it never compacts
    assert report.verdict == "inconclusive"
    reasons = list(report.depth["not_sent"])
    assert any("'is_error' of a tool_result block" in r or "server_tool" in r for r in reasons)
    for reason in reasons:
        assert reason.startswith(
            ("add_message: the proto cannot carry", "set_messages: the proto cannot carry")
        ), reason


def test_an_address_nobody_serves_is_a_setup_error():
    done = ctxkit("conformance", "grpc://127.0.0.1:9", "--timeout", "8")
    assert done.returncode == 2, done.stderr
    assert "no gRPC service answers at 127.0.0.1:9" in done.stderr


def test_a_malformed_address_says_what_a_good_one_looks_like():
    done = ctxkit("conformance", "grpc://nohost")
    assert done.returncode == 2
    assert "is not grpc://HOST:PORT (e.g. grpc://127.0.0.1:50051)" in done.stderr
