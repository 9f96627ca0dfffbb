"""The Prometheus subscriber and exporter, read back from a private registry after a real manager
ran: the numbers a dashboard and its alerts are built on, and the label sets that keep the
number of series bounded."""

from __future__ import annotations

import asyncio
import errno
import platform
import socket
import subprocess
import urllib.request
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from ctxkit import __version__, events
from ctxkit.events import EventBus
from ctxkit.reference import ReferenceContextManager
from ctxkit.telemetry.names import (
    COMPACTION_ACTIONS,
    ESTIMATE_BUCKETS,
    GEN_AI_TOKEN_BUCKETS,
    REQUIRED_PROPERTIES,
    TOKEN_TYPES,
)
from ctxkit.telemetry.prometheus import MetricsPortInUse, PrometheusMetrics, serve_metrics
from ctxkit.workload import Workload
from tests.system import require_binary
from tests.telemetry_cases import (
    STRATEGY,
    TOOL_DEFINITIONS,
    Recorder,
    compacting_manager,
    drive_reporting_usage,
)

CONVERSATION_ID = "conv-prom-7f3a9c"


def manager(**overrides: Any) -> ReferenceContextManager:
    return compacting_manager(**({"conversation_id": CONVERSATION_ID} | overrides))


def drive(
    target: ReferenceContextManager, messages: Sequence[dict[str, Any]]
) -> tuple[PrometheusMetrics, Recorder]:
    """Run a conversation through ``target`` with metrics on a private registry subscribed."""
    metrics = PrometheusMetrics(CollectorRegistry())
    recorder = Recorder(target.bus)
    target.bus.subscribe(metrics)

    async def loop() -> None:
        for message in messages:
            await target.add_message(message)
            await target.get_messages_for_request()

    asyncio.run(loop())
    target.bus.flush()
    return metrics, recorder


def value(metrics: PrometheusMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def samples(registry: CollectorRegistry) -> list[Any]:
    return [sample for family in registry.collect() for sample in family.samples]


def conversation(n: int = 60, seed: int = 3) -> list[dict[str, Any]]:
    return Workload(seed=seed, max_output_bytes=3_000).messages(n)


# -- what the numbers say -------------------------------------------------------------------------


def test_counters_and_histograms_add_up_to_what_the_manager_did():
    """Rates on the dashboard are only as right as these totals."""
    metrics, recorder = drive(manager(), conversation())
    views = recorder.of(events.VIEW)
    compactions = recorder.of(events.POST_COMPACT)
    assert compactions

    assert value(metrics, "ctxkit_views_total") == len(views) == 60
    assert value(metrics, "ctxkit_view_size_tokens_count") == len(views)
    assert value(metrics, "ctxkit_view_size_tokens_sum") == sum(v["token_count"] for v in views)
    assert value(metrics, "ctxkit_view_duration_seconds_count") == len(views)

    assert value(metrics, "ctxkit_compactions_total", strategy=STRATEGY) == len(compactions)
    saved = sum(c["tokens_saved"] for c in compactions)
    assert value(metrics, "ctxkit_compaction_tokens_saved_total", strategy=STRATEGY) == saved > 0
    assert value(metrics, "ctxkit_compaction_duration_seconds_count", strategy=STRATEGY) == len(
        compactions
    )
    for action, key in COMPACTION_ACTIONS.items():
        total = sum(c[key] for c in compactions)
        assert total > 0, f"the conversation should exercise {action}"
        assert value(metrics, "ctxkit_compaction_units_total", action=action) == total
    assert value(metrics, "ctxkit_budget_exceeded_total") == 0


def test_the_gauges_describe_the_live_conversation():
    """With one conversation the fleet gauges are its last view: what the near-limit alert
    and the dashboard read."""
    metrics, recorder = drive(manager(), conversation(45))
    views = recorder.of(events.VIEW)
    last = views[-1]
    tokens, budget = last["token_count"], last["budget"]
    assert budget == 4_000
    assert value(metrics, "ctxkit_conversations") == 1
    assert value(metrics, "ctxkit_context_utilization_max_ratio") == pytest.approx(tokens / budget)
    assert value(metrics, "ctxkit_conversations_over_threshold") == int(tokens > 0.7 * budget)
    assert value(metrics, "ctxkit_conversations_near_limit") == int(tokens > 0.9 * budget)
    assert value(metrics, "ctxkit_history_messages") == 45
    assert value(metrics, "ctxkit_history_tokens") == last["history_tokens"]
    assert value(metrics, "ctxkit_view_tokens_total") == sum(v["token_count"] for v in views)
    assert value(metrics, "ctxkit_view_size_tokens_count") == len(views)
    assert value(metrics, "ctxkit_view_utilization_ratio_count") == len(views)
    kept = sum(v["prefix_tokens"] for v in views)
    assert value(metrics, "ctxkit_view_prefix_kept_tokens_total") == kept > 0
    measured = [v for v in views if v["previous_tokens"]]
    assert value(metrics, "ctxkit_view_prefix_kept_ratio_count") == len(measured)
    for retired in ("ctxkit_context_tokens", "ctxkit_context_utilization_ratio"):
        assert value(metrics, retired) is None


def test_reported_usage_reaches_the_token_usage_histogram_and_the_estimate_ratio():
    """record_usage() after each model call: the provider's counts land in
    gen_ai_client_token_usage by token type, and ctxkit's count of the view over the billed
    input in ctxkit_usage_estimate_ratio, bucket by bucket."""
    target = manager()
    metrics = PrometheusMetrics(CollectorRegistry())
    target.bus.subscribe(metrics)
    calls = asyncio.run(drive_reporting_usage(target, conversation(40)))
    target.bus.flush()
    reported = {
        "input": [billed for _tokens, billed, _answered in calls],
        "output": [answered for _tokens, _billed, answered in calls],
    }
    for kind, counts in reported.items():
        series = {"gen_ai_token_type": kind}
        assert value(metrics, "gen_ai_client_token_usage_count", **series) == len(calls) == 40
        assert value(metrics, "gen_ai_client_token_usage_sum", **series) == sum(counts)
        for bound in GEN_AI_TOKEN_BUCKETS:
            below = value(
                metrics, "gen_ai_client_token_usage_bucket", le=floatToGoString(bound), **series
            )
            assert below == sum(c <= bound for c in counts), (kind, bound)
    ratios = [tokens / billed for tokens, billed, _answered in calls]
    assert all(0 < r < 1 for r in ratios), "the provider bills the tool definitions too"
    assert value(metrics, "ctxkit_usage_estimate_ratio_count") == len(calls)
    assert value(metrics, "ctxkit_usage_estimate_ratio_sum") == pytest.approx(sum(ratios))
    for bound in ESTIMATE_BUCKETS:
        below = value(metrics, "ctxkit_usage_estimate_ratio_bucket", le=floatToGoString(bound))
        assert below == sum(r <= bound for r in ratios), bound
    assert calls[-1][1] - calls[-1][0] == TOOL_DEFINITIONS


def test_usage_before_any_view_counts_tokens_but_no_estimate():
    """Without a view there is no estimate to compare; a zero input bills nothing to divide."""
    target = manager()
    metrics = PrometheusMetrics(CollectorRegistry())
    target.bus.subscribe(metrics)
    target.record_usage(input_tokens=500, output_tokens=40)  # no event loop: published at once
    target.bus.flush()
    assert value(metrics, "gen_ai_client_token_usage_sum", gen_ai_token_type="input") == 500
    assert value(metrics, "gen_ai_client_token_usage_sum", gen_ai_token_type="output") == 40
    assert value(metrics, "ctxkit_usage_estimate_ratio_count") == 0


def token_type_labels(metrics: PrometheusMetrics) -> set[str]:
    return {
        s.labels["gen_ai_token_type"]
        for s in samples(metrics.registry)
        if s.name.startswith("gen_ai_client_token_usage")
    }


@given(
    payload=st.dictionaries(
        st.sampled_from(["input_tokens", "output_tokens", "estimated_tokens", "other"]),
        st.one_of(st.none(), st.booleans(), st.integers(-5, 10**9), st.floats(), st.text()),
    )
)
def test_any_usage_payload_adds_no_series_and_breaks_nothing(payload: dict[str, Any]):
    """Whatever another publisher puts in a usage event, the subscriber records only counts,
    under the two token types that exist from the start."""
    bus = EventBus()
    metrics = PrometheusMetrics(CollectorRegistry())
    assert token_type_labels(metrics) == set(TOKEN_TYPES)
    bus.subscribe(metrics)
    asyncio.run(bus.publish(events.USAGE, payload))
    bus.flush()
    assert bus.failures == 0
    assert token_type_labels(metrics) == set(TOKEN_TYPES)
    billed = payload.get("input_tokens")
    counted = isinstance(billed, int) and not isinstance(billed, bool) and billed >= 0
    recorded = value(metrics, "gen_ai_client_token_usage_count", gen_ai_token_type="input")
    assert recorded == int(counted)


def test_build_info_says_which_ctxkit_and_python_run():
    """The Prometheus convention: a gauge of 1 whose labels are the versions."""
    metrics = PrometheusMetrics(CollectorRegistry())
    (info,) = [s for s in samples(metrics.registry) if s.name == "ctxkit_build_info"]
    assert info.value == 1
    assert info.labels == {
        "version": __version__,
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
    }


@given(
    max_tokens=st.integers(2_000, 20_000),
    threshold=st.sampled_from([0.4, 0.55, 0.7, 0.85, 1.0]),
    n=st.integers(1, 40),
    seed=st.integers(0, 20),
)
def test_gauges_follow_any_budget_and_threshold(
    max_tokens: int, threshold: float, n: int, seed: int
):
    """However the manager is configured, the gauges are exact functions of the last view,
    even past the budget (best effort: utilization above 1)."""
    target = manager(
        max_tokens=max_tokens,
        compact_threshold=threshold,
        target_ratio=threshold * 0.7,
        on_overflow="best_effort",
    )
    metrics, recorder = drive(target, conversation(n, seed))
    last = recorder.of(events.VIEW)[-1]
    tokens = last["token_count"]
    ratio = tokens / max_tokens
    assert value(metrics, "ctxkit_context_utilization_max_ratio") == pytest.approx(ratio)
    assert value(metrics, "ctxkit_conversations_over_threshold") == int(
        tokens > threshold * max_tokens
    )
    assert value(metrics, "ctxkit_conversations_near_limit") == int(ratio > 0.9)
    assert value(metrics, "ctxkit_views_total") == n
    exceeded = len(recorder.of(events.BUDGET_EXCEEDED))
    assert value(metrics, "ctxkit_budget_exceeded_total") == exceeded


# -- bounded labels -----------------------------------------------------------------------------


def violation_labels(metrics: PrometheusMetrics) -> dict[str, float]:
    return {
        s.labels["property"]: s.value
        for s in samples(metrics.registry)
        if s.name == "ctxkit_invariant_violations_total"
    }


def test_invariant_violation_series_exist_at_zero_from_the_start():
    """An alert on increase() needs the series before the first violation, not 'no data'."""
    metrics = PrometheusMetrics(CollectorRegistry())
    assert violation_labels(metrics) == dict.fromkeys(REQUIRED_PROPERTIES, 0.0)
    actions = {
        s.labels["action"]
        for s in samples(metrics.registry)
        if s.name == "ctxkit_compaction_units_total"
    }
    assert actions == set(COMPACTION_ACTIONS)


@given(
    unknown=st.one_of(
        st.text(max_size=40).filter(lambda p: p not in REQUIRED_PROPERTIES),
        st.lists(st.text(max_size=3), max_size=2),
        st.none(),
        st.integers(),
    )
)
def test_a_violation_of_an_unknown_property_adds_no_series(unknown: object):
    """Property ids come from whatever publishes: only the known ones may become label values,
    or a buggy publisher grows the series without bound."""
    bus = EventBus()
    metrics = PrometheusMetrics(CollectorRegistry())
    bus.subscribe(metrics)

    async def publish() -> None:
        await bus.publish(events.INVARIANT_VIOLATION, {"property": unknown, "ids": []})
        await bus.publish(events.INVARIANT_VIOLATION, {"property": "ordering", "ids": ["c1"]})

    asyncio.run(publish())
    bus.flush()
    expected = dict.fromkeys(REQUIRED_PROPERTIES, 0.0) | {"ordering": 1.0}
    assert violation_labels(metrics) == expected
    assert bus.failures == 0


def test_no_label_value_is_a_conversation_id():
    """Conversation ids grow without bound; they must never become label values."""
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    for number, seed in enumerate((1, 2, 3)):
        target = manager(conversation_id=f"{CONVERSATION_ID}-{number}")
        target.bus.subscribe(metrics)
        drive(target, conversation(40, seed))
    label_values = {v for s in samples(registry) for v in s.labels.values()}
    assert label_values
    assert not [v for v in label_values if CONVERSATION_ID in v]
    assert CONVERSATION_ID not in generate_latest(registry).decode()
    strategies = {s.labels["strategy"] for s in samples(registry) if "strategy" in s.labels}
    assert strategies == {STRATEGY}


# -- the exporter -------------------------------------------------------------------------------


def get(url: str) -> tuple[str, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.headers["Content-Type"], response.read().decode()


def test_serve_metrics_binds_loopback_and_serves_text_that_promtool_accepts():
    """What Prometheus scrapes: loopback only, the text format, and lint-clean names."""
    metrics, recorder = drive(manager(), conversation(50))
    server, port = serve_metrics(metrics.registry, port=0)
    try:
        assert port > 0
        assert server.server_address[0] == "127.0.0.1"
        content_type, body = get(f"http://127.0.0.1:{port}/metrics")
    finally:
        server.shutdown()
        server.server_close()
    assert content_type.startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(body)}
    (views,) = families["ctxkit_views"].samples[:1]
    assert views.name == "ctxkit_views_total"
    assert views.value == len(recorder.of(events.VIEW)) == 50
    assert families["ctxkit_context_utilization_max_ratio"].type == "gauge"
    assert families["ctxkit_conversations"].samples[0].value == 1
    assert families["ctxkit_build_info"].type == "gauge"
    assert families["gen_ai_client_token_usage"].type == "histogram"

    promtool = require_binary("promtool")
    checked = subprocess.run(
        [promtool, "check", "metrics"],
        input=body,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_port_in_use_raises_an_error_naming_the_port():
    """'Address already in use' alone does not say which flag to change."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(MetricsPortInUse) as raised:
            serve_metrics(CollectorRegistry(), port=port)
    assert isinstance(raised.value, OSError)
    assert raised.value.errno == errno.EADDRINUSE
    assert str(port) in str(raised.value)
    assert "--" not in str(raised.value)  # an API error speaks of ports, not of CLI flags


def test_a_guard_counts_the_views_it_repairs_and_refuses():
    """instrument(on_violation=...) around a function that cuts a pair: each guarded view
    counts once, by what the guard did."""
    from ctxkit.telemetry import instrument
    from ctxkit.telemetry.instrument import ViewRefused

    def cut_first_two(messages):
        return messages[2:]

    history = [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "user", "content": "thanks"},
    ]  # fmt: skip

    async def run(mode: str) -> CollectorRegistry:
        registry = CollectorRegistry()
        wrapped = instrument(cut_first_two, on_violation=mode)
        wrapped.bus.subscribe(PrometheusMetrics(registry))
        for message in history:
            await wrapped.add_message(message)
        try:
            view = await wrapped.get_messages_for_request(token_budget=10_000)
        except ViewRefused:
            view = None
        if mode == "repair":
            assert view == history[3:]  # the orphaned result dropped, nothing else
        return registry

    for mode, action in (("repair", "repaired"), ("raise", "refused")):
        registry = asyncio.run(run(mode))
        value = registry.get_sample_value("ctxkit_views_guarded_total", {"action": action})
        assert value == 1.0, mode
