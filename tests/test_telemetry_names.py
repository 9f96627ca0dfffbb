"""The metric declarations follow Prometheus conventions, and the README documents each one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxkit.telemetry.names import ATTRIBUTES, METRICS, metric

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


@pytest.mark.parametrize("declared", METRICS, ids=lambda m: m.prometheus)
def test_names_follow_the_prometheus_conventions(declared):
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
def test_the_readme_documents_every_metric(declared):
    assert f"`{declared.exposed}`" in README
    if declared.otel:
        assert f"`{declared.otel}`" in README


@pytest.mark.parametrize("name", sorted(ATTRIBUTES))
def test_the_readme_documents_every_attribute(name):
    assert f"`{name}`" in README


def test_an_unknown_metric_name_fails_loudly():
    with pytest.raises(KeyError):
        metric("ctxkit_no_such_metric")
