"""The metric declarations follow Prometheus conventions, and the docs' telemetry page documents
each one (its tables are generated from them: tests/test_docs.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxkit.telemetry.names import ATTRIBUTES, METRICS, TOKEN_TYPES, metric

PAGE = (Path(__file__).resolve().parent.parent / "docs" / "telemetry.md").read_text()


@pytest.mark.parametrize("declared", METRICS, ids=lambda m: m.prometheus)
def test_names_follow_the_prometheus_conventions(declared):
    if declared.otel and declared.otel.startswith("gen_ai."):
        # A GenAI semantic convention's metric keeps its name, as OpenTelemetry's Prometheus
        # exporters write it (dots to underscores, a {curly} unit dropped), so dashboards
        # built for the convention read it.
        assert declared.prometheus == declared.otel.replace(".", "_")
        assert all(label.startswith("gen_ai_") for label in declared.labels)
    else:
        assert re.fullmatch(r"ctxkit_[a-z_]+", declared.prometheus)
    assert not declared.prometheus.endswith("_total"), "the client adds _total to counters"
    if "seconds" in declared.prometheus or declared.unit == "s":
        assert declared.prometheus.endswith("_seconds")
    if declared.prometheus.endswith("_ratio"):
        assert declared.kind in ("gauge", "histogram"), "a ratio is a value, never a count"
    assert "conversation" not in " ".join(declared.labels), "labels must stay bounded"
    if declared.kind == "histogram":
        assert list(declared.buckets) == sorted(declared.buckets)


@pytest.mark.parametrize("declared", METRICS, ids=lambda m: m.prometheus)
def test_the_docs_document_every_metric(declared):
    assert f"`{declared.exposed}`" in PAGE
    if declared.otel:
        assert f"`{declared.otel}`" in PAGE


@pytest.mark.parametrize("name", sorted(ATTRIBUTES))
def test_the_docs_document_every_attribute(name):
    assert f"`{name}`" in PAGE


def test_an_unknown_metric_name_fails_loudly():
    with pytest.raises(KeyError):
        metric("ctxkit_no_such_metric")


def test_gen_ai_token_usage_follows_the_semantic_convention():
    """Name, unit, attribute and the bucket boundaries the GenAI conventions advise."""
    usage = metric("gen_ai_client_token_usage")
    assert (usage.otel, usage.kind, usage.unit) == (
        "gen_ai.client.token.usage",
        "histogram",
        "{token}",
    )
    assert usage.labels == ("gen_ai_token_type",)
    assert usage.buckets == tuple(float(4**n) for n in range(14))  # 1, 4, 16, ... 67108864
    assert TOKEN_TYPES == ("input", "output")


def test_build_info_follows_the_prometheus_convention():
    info = metric("ctxkit_build_info")
    assert info.kind == "gauge"
    assert info.exposed == "ctxkit_build_info"
    assert {"version", "python_version"} <= set(info.labels)
