"""Build the Grafana dashboard ``ctxkit-context.json`` from the metric declarations.

Every metric name comes from :mod:`ctxkit.telemetry.names`, so renaming a metric there
changes the dashboard here (or fails at import), instead of leaving a panel that silently
shows "No data". Plain dicts, no Grafana SDK: the JSON is the product, and a test checks
that the committed file is what this script builds.

Usage::

    python dashboards/build.py           # write dashboards/ctxkit-context.json
    python dashboards/build.py --check   # exit 1 if the committed file is stale
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxkit.telemetry.names import metric

__all__ = [
    "OUTPUT",
    "SELECTOR",
    "VARIABLES",
    "build",
    "for_prometheus",
    "queries",
    "render",
]

OUTPUT = Path(__file__).with_name("ctxkit-context.json")
UID = "ctxkit-context"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

SELECTOR = 'job=~"$job", instance=~"$instance"'
"""The label filter every panel query carries, so the variables narrow every panel."""

VARIABLES = {
    "$__rate_interval": "{window}",
    "$__range": "{window}",
    "$instance": ".*",
    "$job": ".*",
}
"""Grafana's variables in panel queries, and what stands for them on plain Prometheus
(``{window}`` is the range of rate windows; ``.*`` is what "All" sends)."""

WIDTH = 24
"""Grafana's grid is 24 columns wide."""


def _name(prometheus_name: str, suffix: str = "") -> str:
    """The ``/metrics`` name of a declared metric (a histogram's series with ``suffix``)."""
    declared = metric(prometheus_name)
    if suffix and declared.kind != "histogram":
        raise ValueError(f"{prometheus_name} is a {declared.kind}, it has no {suffix} series")
    return declared.exposed + suffix


def _select(prometheus_name: str, suffix: str = "", extra: str = "") -> str:
    """``name{job=~"$job", instance=~"$instance"}``, with ``extra`` matchers first."""
    matchers = f"{extra}, {SELECTOR}" if extra else SELECTOR
    return f"{_name(prometheus_name, suffix)}{{{matchers}}}"


def _per_minute(prometheus_name: str, by: str = "", extra: str = "") -> str:
    """Events per minute, summed over the selected processes: easier to read than per second."""
    grouping = f" by ({by}) " if by else ""
    return f"60 * sum{grouping}(rate({_select(prometheus_name, extra=extra)}[$__rate_interval]))"


def _in_range(prometheus_name: str, extra: str = "") -> str:
    """How much a counter grew over the dashboard's time range, summed over processes."""
    return f"sum(increase({_select(prometheus_name, extra=extra)}[$__range]))"


def _quantile(q: float, prometheus_name: str) -> str:
    """The ``q`` quantile of a histogram over the selected processes."""
    buckets = _select(prometheus_name, "_bucket")
    return f"histogram_quantile({q}, sum by (le) (rate({buckets}[$__rate_interval])))"


def _estimate_error(q: float) -> str:
    """The ``q`` quantile of ctxkit's count over the billed input, as an error: 0 is exact,
    -0.05 is 5% fewer tokens than the provider billed."""
    return f"{_quantile(q, 'ctxkit_usage_estimate_ratio')} - 1"


def _target(ref: str, expr: str, legend: str, *, instant: bool = False) -> dict[str, Any]:
    return {
        "datasource": DATASOURCE,
        "editorMode": "code",
        "expr": expr,
        "instant": instant,
        "legendFormat": legend,
        "range": not instant,
        "refId": ref,
    }


def _targets(*specs: tuple[str, str]) -> list[dict[str, Any]]:
    """Targets A, B, C, ... from ``(expr, legend)`` pairs."""
    return [_target(chr(ord("A") + i), expr, legend) for i, (expr, legend) in enumerate(specs)]


def _steps(*steps: tuple[str, float | None]) -> dict[str, Any]:
    return {
        "mode": "absolute",
        "steps": [{"color": color, "value": value} for color, value in steps],
    }


def _override(ref: str, **properties: Any) -> dict[str, Any]:
    """Field properties for the series of one target (``custom.x`` keys for custom ones)."""
    return {
        "matcher": {"id": "byFrameRefID", "options": ref},
        "properties": [{"id": key, "value": value} for key, value in properties.items()],
    }


DASHED = {"fill": "dash", "dash": [10, 10]}


def _timeseries(
    title: str,
    description: str,
    targets: list[dict[str, Any]],
    *,
    unit: str = "short",
    axis_label: str = "",
    overrides: list[dict[str, Any]] | None = None,
    thresholds: dict[str, Any] | None = None,
    threshold_style: str = "off",
    bars: bool = False,
    minimum: float | None = 0,
    maximum: float | None = None,
) -> dict[str, Any]:
    defaults: dict[str, Any] = {
        "color": {"mode": "palette-classic"},
        "custom": {
            "axisLabel": axis_label,
            "drawStyle": "bars" if bars else "line",
            "fillOpacity": 60 if bars else 10,
            "lineWidth": 1,
            "showPoints": "never",
            "spanNulls": False,
            "thresholdsStyle": {"mode": threshold_style},
        },
        "thresholds": thresholds or _steps(("green", None)),
        "unit": unit,
    }
    if minimum is not None:
        defaults["min"] = minimum
    if maximum is not None:
        defaults["max"] = maximum
    return {
        "datasource": DATASOURCE,
        "description": description,
        "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
        "options": {
            "legend": {
                "calcs": [],
                "displayMode": "list",
                "placement": "bottom",
                "showLegend": True,
            },
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": targets,
        "title": title,
        "type": "timeseries",
    }


def _single(
    kind: str,
    title: str,
    description: str,
    target: dict[str, Any],
    *,
    unit: str,
    thresholds: dict[str, Any],
    maximum: float | None = None,
) -> dict[str, Any]:
    """A stat or gauge panel showing one number per selected process."""
    defaults: dict[str, Any] = {
        "color": {"mode": "thresholds"},
        "min": 0,
        "thresholds": thresholds,
        "unit": unit,
    }
    if unit != "percentunit":
        defaults["decimals"] = 0  # counts of tokens, compactions, violations
    if maximum is not None:
        defaults["max"] = maximum
    options: dict[str, Any] = {
        "orientation": "auto",
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
    }
    if kind == "stat":
        options |= {
            "colorMode": "value",
            "graphMode": "area",
            "justifyMode": "auto",
            "textMode": "auto",
        }
    else:
        options |= {"showThresholdLabels": False, "showThresholdMarkers": True}
    return {
        "datasource": DATASOURCE,
        "description": description,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": options,
        "targets": [target],
        "title": title,
        "type": kind,
    }


def _row(title: str) -> dict[str, Any]:
    return {"collapsed": False, "panels": [], "title": title, "type": "row"}


def _heatmap(title: str, description: str, target: dict[str, Any]) -> dict[str, Any]:
    """A heatmap of a histogram's buckets over time (``target`` returns them per ``le``)."""
    return {
        "datasource": DATASOURCE,
        "description": description,
        "fieldConfig": {"defaults": {"custom": {"hideFrom": {"legend": False}}}, "overrides": []},
        "options": {
            "calculate": False,
            "cellGap": 1,
            "color": {"mode": "scheme", "scheme": "Oranges", "steps": 64},
            "legend": {"show": True},
            "rowsFrame": {"layout": "auto"},
            "tooltip": {"mode": "single", "yHistogram": True},
            "yAxis": {"axisPlacement": "left", "unit": "percentunit"},
        },
        "targets": [target | {"format": "heatmap"}],
        "title": title,
        "type": "heatmap",
    }


def _share(part: str, whole: str) -> str:
    """One counter's growth over another's, summed over the selected processes."""
    return (
        f"sum(rate({_select(part)}[$__rate_interval])) / "
        f"sum(rate({_select(whole)}[$__rate_interval]))"
    )


def _panels() -> Iterator[tuple[dict[str, Any], int, int]]:
    """Each panel with its width and height, in reading order."""
    live = _select("ctxkit_conversations")
    near = _select("ctxkit_conversations_near_limit")
    over = _select("ctxkit_conversations_over_threshold")
    highest = _select("ctxkit_context_utilization_max_ratio")
    kept = _share("ctxkit_view_prefix_kept_tokens", "ctxkit_view_tokens")

    yield _row("Fleet now"), WIDTH, 1
    yield (
        _single(
            "stat",
            "Live conversations",
            "Conversations with a view in the last idle time (15 minutes by default), over "
            "all selected processes.",
            _target("A", f"sum({live})", "conversations"),
            unit="short",
            thresholds=_steps(("blue", None)),
        ),
        3,
        5,
    )
    yield (
        _single(
            "stat",
            "Near their limit",
            "Live conversations whose last view passed 90% of their budget (the "
            "near-limit share), over all selected processes. The CtxkitContextNearLimit "
            "alert fires while any process has one.",
            _target("A", f"sum({near})", "near limit"),
            unit="short",
            thresholds=_steps(("green", None), ("red", 1)),
        ),
        3,
        5,
    )
    yield (
        _single(
            "gauge",
            "Highest utilization",
            "The fullest live conversation: its last view's tokens over its budget. Orange "
            "from 70% (the reference manager's default compaction threshold), red from 90%.",
            _target("A", f"max({highest})", "highest"),
            unit="percentunit",
            thresholds=_steps(("green", None), ("orange", 0.7), ("red", 0.9)),
            maximum=1,
        ),
        3,
        5,
    )
    yield (
        _single(
            "stat",
            "Prompt-cache prefix kept",
            "The share of view tokens that repeat, message by message, the start of their "
            "conversation's previous view: what a provider's prompt cache can serve at a "
            "discount. A manager that rewrites the start of its view every turn shows near "
            "0; one that compacts rarely and then extends its view, near 100%.",
            _target("A", kept, "prefix kept"),
            unit="percentunit",
            thresholds=_steps(("red", None), ("orange", 0.5), ("green", 0.8)),
            maximum=1,
        ),
        3,
        5,
    )
    yield (
        _single(
            "stat",
            "Compactions in range",
            "Compactions in the dashboard's time range, all strategies and selected processes.",
            _target("A", _in_range("ctxkit_compactions"), "compactions", instant=True),
            unit="short",
            thresholds=_steps(("blue", None)),
        ),
        3,
        5,
    )
    yield (
        _single(
            "stat",
            "Tokens saved in range",
            "Tokens that compactions removed from views in the time range.",
            _target("A", _in_range("ctxkit_compaction_tokens_saved"), "tokens", instant=True),
            unit="short",
            thresholds=_steps(("blue", None)),
        ),
        3,
        5,
    )
    yield (
        _single(
            "stat",
            "Tool outputs truncated in range",
            "Units (a tool call with its results) whose tool outputs a compaction shortened "
            "in the time range. They stay in the view, shorter; the model sees a marker "
            "where lines were cut.",
            _target(
                "A",
                _in_range("ctxkit_compaction_units", extra='action="truncated"'),
                "truncated",
                instant=True,
            ),
            unit="short",
            thresholds=_steps(("blue", None)),
        ),
        3,
        5,
    )
    yield (
        _single(
            "stat",
            "Invariant violations in range",
            "Required conformance properties found broken in live views (by instrument() "
            "with check_invariants) in the time range. Anything above 0 means a view sent "
            "to the model was malformed: see the Invariant violations panel for which "
            "property, and the process log for the call ids.",
            _target("A", _in_range("ctxkit_invariant_violations"), "violations", instant=True),
            unit="short",
            thresholds=_steps(("green", None), ("red", 1)),
        ),
        3,
        5,
    )

    yield _row("Fleet over time"), WIDTH, 1
    yield (
        _timeseries(
            "Conversations",
            "Live conversations, those whose last view passed their compaction threshold, "
            "and those past 90% of their budget, over all selected processes. Whatever the "
            "number of conversations, these count each once.",
            _targets(
                (f"sum({live})", "live"),
                (f"sum({over})", "over the compaction threshold"),
                (f"sum({near})", "near the limit"),
            ),
            axis_label="conversations",
            overrides=[_override("C", color={"fixedColor": "red", "mode": "fixed"})],
        ),
        12,
        8,
    )
    yield (
        _heatmap(
            "Utilization of views",
            "How full each view was (tokens over budget), as a distribution over time: "
            "most views low and a thin band near 100% is a healthy fleet; a band that "
            "settles at the top means conversations live at their limit.",
            _target(
                "A",
                "sum by (le) (increase("
                f"{_select('ctxkit_view_utilization_ratio', '_bucket')}[$__rate_interval]))",
                "{{le}}",
            ),
        ),
        12,
        8,
    )
    yield (
        _timeseries(
            "Prompt-cache prefix kept",
            "The share of view tokens that repeat the start of their conversation's "
            "previous view (solid), and the median share of the previous view each view "
            "kept (dashed). Each compaction rewrites the start of a view: the cost of "
            "compaction in prompt-cache misses.",
            _targets(
                (kept, "share of view tokens"),
                (_quantile(0.5, "ctxkit_view_prefix_kept_ratio"), "median kept of previous"),
            ),
            unit="percentunit",
            maximum=1,
            overrides=[_override("B", **{"custom.lineStyle": DASHED})],
        ),
        12,
        8,
    )
    yield (
        _timeseries(
            "Highest utilization by instance",
            "Per process, the fullest live conversation's utilization: the drill-down "
            "behind the fleet's figures (narrow it with the instance variable). The red "
            "line is 90%, where the near-limit count starts.",
            _targets((f"max by (instance) ({highest})", "{{instance}}")),
            unit="percentunit",
            thresholds=_steps(("transparent", None), ("red", 0.9)),
            threshold_style="line",
            maximum=1,
        ),
        12,
        8,
    )
    yield (
        _timeseries(
            "Tokens per view",
            "Median and 95th percentile of the tokens in views returned (exact counts, from "
            "the view-size histogram, over all selected processes).",
            _targets(
                (_quantile(0.5, "ctxkit_view_size_tokens"), "p50 view"),
                (_quantile(0.95, "ctxkit_view_size_tokens"), "p95 view"),
            ),
            axis_label="tokens",
        ),
        12,
        8,
    )
    yield (
        _timeseries(
            "History size",
            "The stored histories of the live conversations, summed per process: tokens "
            "(left axis) and messages (right axis). The reference manager never deletes, "
            "so a conversation's history only grows until it is cleared; the gap between "
            "it and its views is what compaction leaves out.",
            _targets(
                (f"sum by (instance) ({_select('ctxkit_history_tokens')})", "tokens {{instance}}"),
                (
                    f"sum by (instance) ({_select('ctxkit_history_messages')})",
                    "messages {{instance}}",
                ),
            ),
            axis_label="tokens",
            overrides=[
                _override(
                    "B",
                    **{"custom.axisPlacement": "right", "custom.axisLabel": "messages"},
                )
            ],
        ),
        12,
        8,
    )

    yield _row("Compaction"), WIDTH, 1
    yield (
        _timeseries(
            "Compactions per minute by strategy",
            "How often views are compacted, per strategy combination (e.g. "
            "truncate_outputs+truncate). A healthy manager compacts once every several "
            "turns; a rate near the views' rate means every turn compacts (a compaction "
            "storm, see the CtxkitCompactionStorm alert): the target ratio is too close "
            "to the threshold, or pinned content fills the budget.",
            _targets((_per_minute("ctxkit_compactions", by="strategy"), "{{strategy}}")),
            axis_label="compactions / min",
        ),
        12,
        8,
    )
    yield (
        _timeseries(
            "Tokens saved per minute",
            "Tokens that compactions removed from views, per minute and strategy: the "
            "difference between each view before and after its compaction.",
            _targets(
                (_per_minute("ctxkit_compaction_tokens_saved", by="strategy"), "{{strategy}}")
            ),
            axis_label="tokens / min",
        ),
        12,
        8,
    )
    yield (
        _timeseries(
            "Compaction duration",
            "Median, 95th and 99th percentile of the time one compaction took, over all "
            "strategies and selected processes. The CtxkitCompactionSlow alert fires when "
            "the 95th percentile stays above 1 s.",
            _targets(
                (_quantile(0.5, "ctxkit_compaction_duration_seconds"), "p50"),
                (_quantile(0.95, "ctxkit_compaction_duration_seconds"), "p95"),
                (_quantile(0.99, "ctxkit_compaction_duration_seconds"), "p99"),
            ),
            unit="s",
        ),
        12,
        8,
    )
    yield (
        _timeseries(
            "Units truncated, dropped, summarized per minute",
            "What compactions did to units (a message, or a tool call with its results), "
            "per minute: 'truncated' units had their tool outputs shortened and stay in the "
            "view, 'dropped' units left the view, 'summarized' units were folded into a "
            "summary message.",
            _targets(
                (
                    _per_minute("ctxkit_compaction_units", by="action"),
                    "{{action}}",
                )
            ),
            axis_label="units / min",
            bars=True,
        ),
        12,
        8,
    )

    yield _row("Health"), WIDTH, 1
    yield (
        _timeseries(
            "Invariant violations",
            "Required conformance properties (tool_pair_integrity, ordering, "
            "non_destructive, lifecycle) found broken in live views, by property, per rate "
            "interval. Counted only when the manager is wrapped with "
            "instrument(check_invariants=...). Any bar here is a malformed request to the "
            "model; the CtxkitInvariantViolation alert fires on it.",
            _targets(
                (
                    "sum by (property) (increase("
                    f"{_select('ctxkit_invariant_violations')}[$__rate_interval]))",
                    "{{property}}",
                )
            ),
            thresholds=_steps(("green", None), ("red", 1)),
            bars=True,
        ),
        12,
        8,
    )
    yield (
        _timeseries(
            "View build time",
            "Median, 95th and 99th percentile of the time get_messages_for_request took "
            "to build a view, compaction included: the latency the context manager adds "
            "to each model call.",
            _targets(
                (_quantile(0.5, "ctxkit_view_duration_seconds"), "p50"),
                (_quantile(0.95, "ctxkit_view_duration_seconds"), "p95"),
                (_quantile(0.99, "ctxkit_view_duration_seconds"), "p99"),
            ),
            unit="s",
        ),
        12,
        8,
    )
    yield (
        _timeseries(
            "Views, budget overruns, audit write failures and guarded views per minute",
            "Views returned per minute (about one per model call), and views whose pinned "
            "content alone (system messages, the newest user message and the newest unit) "
            "did not fit the budget. Overruns need a bigger budget or shorter pinned "
            "content; the CtxkitBudgetExceeded alert fires on them. Audit write failures: "
            "a history file's disk is full (views go on, their audit entries wait in "
            "memory); the CtxkitAuditNotWritten alert fires on them. Guarded views: views a "
            "provider would have rejected, repaired or refused by instrument(manager, "
            "on_violation=...): the wrapped manager splits tool pairs.",
            _targets(
                (_per_minute("ctxkit_views"), "views"),
                (_per_minute("ctxkit_budget_exceeded"), "budget exceeded"),
                (_per_minute("ctxkit_audit_write_failures"), "audit write failures"),
                (_per_minute("ctxkit_views_guarded", by="action"), "views {{action}} by a guard"),
            ),
            axis_label="views / min",
            overrides=[_override("B", color={"fixedColor": "red", "mode": "fixed"})],
        ),
        WIDTH,
        8,
    )


def _usage_panels() -> Iterator[tuple[dict[str, Any], int, int]]:
    """What the providers reported (through record_usage()), and which versions run."""
    yield _row("Provider usage"), WIDTH, 1
    yield (
        _timeseries(
            "Reported tokens per minute",
            "Input and output tokens the provider reported for its model calls, per minute, "
            "from gen_ai_client_token_usage (the GenAI semantic conventions' "
            "gen_ai.client.token.usage). Only calls whose usage the application passed to "
            "record_usage() count.",
            _targets(
                (
                    "60 * sum by (gen_ai_token_type) (rate("
                    f"{_select('gen_ai_client_token_usage', '_sum')}[$__rate_interval]))",
                    "{{gen_ai_token_type}}",
                )
            ),
            axis_label="tokens / min",
        ),
        9,
        8,
    )
    yield (
        _timeseries(
            "Token estimate error",
            "How far ctxkit's exact count of each view is from the input tokens the "
            "provider billed for it (median, 5th and 95th percentile): 0 is exact, -5% "
            "means the provider billed 5% more. A steady offset is input ctxkit does not "
            "see (tool definitions, images, a system prompt outside the view): leave that "
            "much room in the budget.",
            _targets(
                (_estimate_error(0.5), "median"),
                (_estimate_error(0.05), "p5"),
                (_estimate_error(0.95), "p95"),
            ),
            unit="percentunit",
            minimum=None,
            overrides=[
                _override("B", **{"custom.lineStyle": DASHED}),
                _override("C", **{"custom.lineStyle": DASHED}),
            ],
        ),
        9,
        8,
    )
    yield (
        _single(
            "stat",
            "Processes by version",
            "Scraped processes by the ctxkit and Python versions they run "
            "(ctxkit_build_info): during a rollout, two versions side by side.",
            _target(
                "A",
                f"count by (version, python_version) ({_select('ctxkit_build_info')})",
                "ctxkit {{version}}, Python {{python_version}}",
            ),
            unit="short",
            thresholds=_steps(("blue", None)),
        ),
        6,
        8,
    )


def _level_panels() -> Iterator[tuple[dict[str, Any], int, int]]:
    """The hierarchical strategy's levels and recall, in managers configured with them."""
    yield (
        _timeseries(
            "Units by level and recalled, per minute",
            "Units the views showed at each level of the hierarchical strategy (full, as a "
            "paragraph, as one line) and units recall brought back because the newest user "
            "message asked about them, per minute. Zero in managers without these strategies.",
            _targets(
                (_per_minute("ctxkit_view_units_by_level", by="level"), "{{level}}"),
                (_per_minute("ctxkit_view_units_recalled"), "recalled"),
            ),
            axis_label="units / min",
        ),
        12,
        8,
    )
    yield (
        _timeseries(
            "Tokens saved by level, per minute",
            "What showing older units as a paragraph or one line saved against showing them "
            "full, per minute, by level.",
            _targets((_per_minute("ctxkit_view_level_tokens_saved", by="level"), "{{level}}")),
            axis_label="tokens / min",
        ),
        12,
        8,
    )


def _audit_panels() -> Iterator[tuple[dict[str, Any], int, int]]:
    """What `ctxkit watch` finds in the requests agents really send (recorded by their
    GenAI instrumentation, received over OTLP)."""
    yield _row("Recorded requests (ctxkit watch)"), WIDTH, 1
    yield (
        _timeseries(
            "Requests audited and findings per minute",
            "Model requests received from the agents' telemetry and audited, per minute, and "
            "the findings in them by property: a required one (tool_pair_integrity, "
            "ordering) is a request the provider rejects or a history the manager "
            "reordered; the CtxkitAuditRequiredViolation alert fires on them.",
            _targets(
                (_per_minute("ctxkit_audit_requests"), "requests audited"),
                (
                    _per_minute("ctxkit_audit_violations", by="property, level"),
                    "{{property}} ({{level}})",
                ),
            ),
            axis_label="per min",
        ),
        9,
        8,
    )
    yield (
        _timeseries(
            "Prompt-cache prefix kept by recorded requests",
            "Of the tokens each request sent, the share the next request of its conversation "
            "starts with, message for message (median and 10th percentile): what a "
            "provider's prompt cache can serve. A compaction that rewrites the start of the "
            "conversation on every turn shows here as a low line.",
            _targets(
                (_quantile(0.5, "ctxkit_audit_prefix_kept_ratio"), "median"),
                (_quantile(0.1, "ctxkit_audit_prefix_kept_ratio"), "p10"),
            ),
            unit="percentunit",
            maximum=1,
        ),
        8,
        8,
    )
    yield (
        _timeseries(
            "Receiver health",
            "Exports refused with 503 (the audit queue was full; exporters retry), records "
            "skipped by reason (no content: the instrumentation does not record messages), "
            "and exports waiting in the queue.",
            _targets(
                (_per_minute("ctxkit_audit_rejected"), "exports refused / min"),
                (_per_minute("ctxkit_audit_skipped", by="reason"), "skipped / min: {{reason}}"),
                (f"sum({_select('ctxkit_audit_queue_depth')})", "queue depth"),
            ),
        ),
        7,
        8,
    )


def _layout(panels: Iterator[tuple[dict[str, Any], int, int]]) -> list[dict[str, Any]]:
    """Give each panel an id and a grid position, filling rows left to right."""
    placed: list[dict[str, Any]] = []
    x = y = row_height = 0
    for number, (panel, width, height) in enumerate(panels, start=1):
        if x + width > WIDTH:
            x, y, row_height = 0, y + row_height, 0
        placed.append(panel | {"id": number, "gridPos": {"h": height, "w": width, "x": x, "y": y}})
        x += width
        row_height = max(row_height, height)
    return placed


def _query_variable(name: str, label: str, query: str, description: str) -> dict[str, Any]:
    return {
        "allValue": ".*",
        "current": {},
        "datasource": DATASOURCE,
        "definition": query,
        "description": description,
        "hide": 0,
        "includeAll": True,
        "label": label,
        "multi": True,
        "name": name,
        "options": [],
        "query": {"qryType": 1, "query": query, "refId": "PrometheusVariableQueryEditor-" + name},
        "refresh": 2,
        "regex": "",
        "skipUrlSync": False,
        "sort": 1,
        "type": "query",
    }


def build() -> dict[str, Any]:
    """The dashboard, as Grafana's "Import dashboard" takes it."""
    views = _name("ctxkit_views")
    panels = _layout(itertools.chain(_panels(), _level_panels(), _usage_panels(), _audit_panels()))
    panel_types = sorted({p["type"] for p in panels if p["type"] != "row"})
    names = {"gauge": "Gauge", "heatmap": "Heatmap", "stat": "Stat", "timeseries": "Time series"}
    return {
        "__inputs": [
            {
                "description": "The Prometheus that scrapes ctxkit's /metrics.",
                "label": "Prometheus",
                "name": "DS_PROMETHEUS",
                "pluginId": "prometheus",
                "pluginName": "Prometheus",
                "type": "datasource",
            }
        ],
        "__elements": {},
        "__requires": [
            {"id": "grafana", "name": "Grafana", "type": "grafana", "version": "10.4.0"},
            {"id": "prometheus", "name": "Prometheus", "type": "datasource", "version": "1.0.0"},
            *({"id": t, "name": names[t], "type": "panel", "version": ""} for t in panel_types),
        ],
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "description": "Context window use and compaction of LLM context managers, from "
        "ctxkit's Prometheus metrics (ctxkit.telemetry.PrometheusMetrics).",
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [],
        "panels": panels,
        "refresh": "10s",
        "schemaVersion": 39,
        "tags": ["ctxkit", "llm", "context"],
        "templating": {
            "list": [
                {
                    "current": {
                        "selected": False,
                        "text": "Prometheus",
                        "value": "${DS_PROMETHEUS}",
                    },
                    "description": "The Prometheus that scrapes ctxkit.",
                    "hide": 0,
                    "includeAll": False,
                    "label": "Data source",
                    "multi": False,
                    "name": "datasource",
                    "options": [],
                    "query": "prometheus",
                    "refresh": 1,
                    "regex": "",
                    "skipUrlSync": False,
                    "type": "datasource",
                },
                _query_variable(
                    "job",
                    "Job",
                    f"label_values({views}, job)",
                    "Scrape jobs that export ctxkit metrics.",
                ),
                _query_variable(
                    "instance",
                    "Instance",
                    f'label_values({views}{{job=~"$job"}}, instance)',
                    "Processes (host:port of /metrics) of the selected jobs.",
                ),
            ]
        },
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": "ctxkit: context window and compaction",
        "uid": UID,
        "version": 1,
        "weekStart": "",
    }


def render(dashboard: dict[str, Any]) -> str:
    """The file's text: sorted keys and a trailing newline, so rebuilds diff cleanly."""
    return json.dumps(dashboard, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def queries(dashboard: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(panel title, refId, expr)`` of every panel target, rows' nested panels included."""
    found = []
    for panel in dashboard["panels"]:
        for inner in [panel, *panel.get("panels", [])]:
            for target in inner.get("targets", []):
                found.append((inner["title"], target["refId"], target["expr"]))
    return found


def for_prometheus(expr: str, *, window: str = "1m") -> str:
    """A panel query as plain Prometheus runs it: variables replaced as "All" would be, rate
    and range windows ``window``. Raises ``ValueError`` on a variable it does not know, so a
    new variable cannot slip past the checks that use this."""
    # Longest first: "$__range" must not be eaten by a shorter name.
    for variable in sorted(VARIABLES, key=len, reverse=True):
        expr = expr.replace(variable, VARIABLES[variable].format(window=window))
    if "$" in expr:
        raise ValueError(f"unknown Grafana variable in {expr!r}; add it to VARIABLES")
    return expr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"exit 1 if {OUTPUT.name} differs from what this script builds",
    )
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(
                f"{OUTPUT} is stale: run python dashboards/build.py and commit it",
                file=sys.stderr,
            )
            return 1
        print(f"{OUTPUT.name} is up to date")
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
