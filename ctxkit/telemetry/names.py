"""Every metric and attribute name ctxkit exports, declared once.

The Prometheus and OpenTelemetry subscribers, the Grafana dashboard and the alert rules all
read their names from here, and a test keeps the README's table in step with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ATTRIBUTES",
    "AUDIT_METRICS",
    "AUDIT_QUEUE_DEPTH",
    "FLEET_GAUGES",
    "LEVELS",
    "METRICS",
    "RETIRED",
    "Metric",
    "metric",
]

Kind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True, slots=True)
class Metric:
    """One fact, as Prometheus and OpenTelemetry name it."""

    prometheus: str
    """Prometheus name: base units, ``_total`` on counters (the client adds it), ``_ratio``
    for 0-1 values."""
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()
    """Only labels with a small fixed set of values: never a conversation id or text."""
    otel: str | None = None
    """The OpenTelemetry instrument name, if the OTel subscriber records this fact too (views
    are counted by the ``ctxkit.view.tokens`` histogram, their duration is the span's)."""
    unit: str = "1"
    """UCUM unit for OpenTelemetry."""
    buckets: tuple[float, ...] = ()

    @property
    def exposed(self) -> str:
        """The name as it appears on ``/metrics`` (counters gain ``_total``)."""
        return self.prometheus + "_total" if self.kind == "counter" else self.prometheus


TOKEN_BUCKETS = (
    500.0, 1_000.0, 2_000.0, 4_000.0, 8_000.0, 16_000.0, 32_000.0, 64_000.0,
    128_000.0, 200_000.0, 400_000.0, 1_000_000.0,
)  # fmt: skip
SHARE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)
UTILIZATION_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0, 1.25)
SECONDS_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
)  # fmt: skip
GEN_AI_TOKEN_BUCKETS = (
    1.0, 4.0, 16.0, 64.0, 256.0, 1_024.0, 4_096.0, 16_384.0, 65_536.0, 262_144.0,
    1_048_576.0, 4_194_304.0, 16_777_216.0, 67_108_864.0,
)  # fmt: skip
"""The bucket boundaries the GenAI semantic conventions advise for gen_ai.client.token.usage."""
ESTIMATE_BUCKETS = (
    0.5, 0.75, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99, 1.0, 1.01, 1.02, 1.05, 1.1, 1.25, 1.5, 2.0,
)  # fmt: skip
"""Around 1 (an exact estimate), finest within a few percent."""

METRICS: tuple[Metric, ...] = (
    Metric(
        "ctxkit_views",
        "counter",
        "Views returned by get_messages_for_request.",
    ),
    Metric(
        "ctxkit_view_size_tokens",
        "histogram",
        "Tokens in each view returned, by ctxkit's exact count.",
        otel="ctxkit.view.tokens",
        unit="{token}",
        buckets=TOKEN_BUCKETS,
    ),
    Metric(
        "ctxkit_view_tokens",
        "counter",
        "Tokens of all views returned: with ctxkit_view_prefix_kept_tokens_total, the share "
        "a prompt cache can serve.",
    ),
    Metric(
        "ctxkit_view_prefix_kept_tokens",
        "counter",
        "Tokens of views that repeat, message by message, the start of their conversation's "
        "previous view: what a provider's prompt cache can serve.",
        otel="ctxkit.view.prefix_kept",
        unit="{token}",
    ),
    Metric(
        "ctxkit_view_prefix_kept_ratio",
        "histogram",
        "Share of the previous view of the same conversation that a view kept as its prefix.",
        otel="ctxkit.view.prefix_kept_ratio",
        buckets=SHARE_BUCKETS,
    ),
    Metric(
        "ctxkit_view_utilization_ratio",
        "histogram",
        "Each view's tokens over its budget.",
        otel="ctxkit.view.utilization",
        buckets=UTILIZATION_BUCKETS,
    ),
    Metric(
        "ctxkit_view_duration_seconds",
        "histogram",
        "Time to build a view, compaction included.",
        buckets=SECONDS_BUCKETS,
    ),
    Metric(
        "ctxkit_conversations",
        "gauge",
        "Live conversations: those with a view in the last idle time (15 minutes by default).",
    ),
    Metric(
        "ctxkit_conversations_over_threshold",
        "gauge",
        "Live conversations whose last view passed their compaction threshold.",
    ),
    Metric(
        "ctxkit_conversations_near_limit",
        "gauge",
        "Live conversations whose last view passed the near-limit share of their budget "
        "(0.9 by default).",
    ),
    Metric(
        "ctxkit_context_utilization_max_ratio",
        "gauge",
        "The highest utilization (last view's tokens over budget) among live conversations.",
    ),
    Metric(
        "ctxkit_history_tokens",
        "gauge",
        "Tokens in the stored histories of the live conversations, summed.",
    ),
    Metric(
        "ctxkit_history_messages",
        "gauge",
        "Messages in the stored histories of the live conversations, summed.",
    ),
    Metric(
        "ctxkit_compactions",
        "counter",
        "Compactions, by strategy.",
        labels=("strategy",),
        otel="ctxkit.compactions",
        unit="{compaction}",
    ),
    Metric(
        "ctxkit_compaction_tokens_saved",
        "counter",
        "Tokens removed from views by compactions, by strategy.",
        labels=("strategy",),
        otel="ctxkit.compaction.tokens_saved",
        unit="{token}",
    ),
    Metric(
        "ctxkit_compaction_duration_seconds",
        "histogram",
        "Time one compaction took, by strategy.",
        labels=("strategy",),
        otel="ctxkit.compaction.duration",
        unit="s",
        buckets=SECONDS_BUCKETS,
    ),
    Metric(
        "ctxkit_compaction_units",
        "counter",
        "Units (a message, or a tool call with its results) a compaction dropped, truncated "
        "or summarized.",
        labels=("action",),
        otel="ctxkit.compaction.units",
        unit="{unit}",
    ),
    Metric(
        "ctxkit_budget_exceeded",
        "counter",
        "Views whose pinned content alone did not fit the budget.",
        otel="ctxkit.budget_exceeded",
        unit="{view}",
    ),
    Metric(
        "ctxkit_audit_write_failures",
        "counter",
        "Runs of failed audit writes to a history file (a full disk): the views went on, "
        "the entries waited in memory.",
        otel="ctxkit.audit.write_failures",
        unit="{failure}",
    ),
    Metric(
        "ctxkit_invariant_violations",
        "counter",
        "Required conformance properties found broken in a live view, by property id.",
        labels=("property",),
        otel="ctxkit.invariant.violations",
        unit="{violation}",
    ),
    Metric(
        "ctxkit_view_units_by_level",
        "counter",
        "Units of each view by the level the hierarchical strategy showed them at (full, "
        "paragraph, line), summed over views.",
        labels=("level",),
        unit="{unit}",
    ),
    Metric(
        "ctxkit_view_level_tokens_saved",
        "counter",
        "Tokens the hierarchical strategy saved in each view by showing units as a paragraph "
        "or one line instead of full, by level, summed over views.",
        labels=("level",),
        unit="{token}",
    ),
    Metric(
        "ctxkit_view_units_recalled",
        "counter",
        "Units that recall brought back into views (left out, or shown coarser, until the "
        "newest user message asked about them), summed over views.",
        unit="{unit}",
    ),
    Metric(
        "ctxkit_views_guarded",
        "counter",
        "Views a guard acted on (instrument(manager, on_violation=...)) because a provider "
        "would reject them: repaired (the smallest valid change returned) or refused "
        "(ViewRefused raised), by action.",
        labels=("action",),
        unit="{view}",
    ),
    Metric(
        "gen_ai_client_token_usage",
        "histogram",
        "Tokens the provider reported for each model call (given to record_usage()), input "
        "and output: the GenAI semantic conventions' gen_ai.client.token.usage.",
        labels=("gen_ai_token_type",),
        otel="gen_ai.client.token.usage",
        unit="{token}",
        buckets=GEN_AI_TOKEN_BUCKETS,
    ),
    Metric(
        "ctxkit_usage_estimate_ratio",
        "histogram",
        "For each model call whose usage was recorded: ctxkit's exact count of the view over "
        "the input tokens the provider reported (1 is exact, 0.95 counts 5% fewer: tool "
        "definitions, images or a system prompt the view does not hold).",
        otel="ctxkit.usage.estimate_ratio",
        buckets=ESTIMATE_BUCKETS,
    ),
    Metric(
        "ctxkit_build_info",
        "gauge",
        "Always 1; its labels say which ctxkit and Python this process runs.",
        labels=("version", "python_version", "python_implementation"),
    ),
)

FLEET_GAUGES = (
    "ctxkit_conversations",
    "ctxkit_conversations_over_threshold",
    "ctxkit_conversations_near_limit",
    "ctxkit_context_utilization_max_ratio",
    "ctxkit_history_tokens",
    "ctxkit_history_messages",
)
"""The gauges aggregated over the live conversations at scrape time
(:mod:`ctxkit.telemetry.conversations`); the only other gauge is ``ctxkit_build_info``."""

TOKEN_TYPES = ("input", "output")
"""Values of ``gen_ai.token.type`` (the ``gen_ai_token_type`` label), each present at 0 from
the start."""

RETIRED = {
    "ctxkit_context_tokens": "ctxkit_view_size_tokens (the distribution over views)",
    "ctxkit_context_budget_tokens": "ctxkit_conversations_near_limit",
    "ctxkit_context_utilization_ratio": (
        "ctxkit_context_utilization_max_ratio and ctxkit_view_utilization_ratio"
    ),
    "ctxkit_compaction_threshold_ratio": "ctxkit_conversations_over_threshold",
    "ctxkit_context_tokens_until_compaction": "ctxkit_conversations_over_threshold",
    "ctxkit_view_tokens (histogram)": "ctxkit_view_size_tokens; ctxkit_view_tokens is a counter",
}
"""Metrics of the latest view, gone: in a process with many conversations they flapped
between whichever spoke last. Each maps to what answers its question now."""

COMPACTION_ACTIONS = {
    "dropped": "units_dropped",
    "truncated": "units_truncated",
    "summarized": "units_summarized",
}
"""Values of the ``action`` label of ``ctxkit_compaction_units_total``, each with the
``context:post_compact`` key that counts it."""

LEVELS = ("full", "paragraph", "line")
"""Values of the ``level`` label: how the hierarchical strategy shows a unit."""

REQUIRED_PROPERTIES = ("tool_pair_integrity", "ordering", "non_destructive", "lifecycle")
"""Values of the ``property`` label: the properties ``instrument()`` checks live."""

AUDIT_METRICS: tuple[Metric, ...] = (
    Metric(
        "ctxkit_audit_requests",
        "counter",
        "Recorded model requests `ctxkit watch` audited.",
        unit="{request}",
    ),
    Metric(
        "ctxkit_audit_violations",
        "counter",
        "Findings of the audit of recorded requests, by property and its level "
        "(required, recommended, advisory).",
        labels=("property", "level"),
        unit="{finding}",
    ),
    Metric(
        "ctxkit_audit_skipped",
        "counter",
        "Received records that are no auditable request, by reason (undecodable, "
        "malformed, no content: a model call recorded without its messages).",
        labels=("reason",),
        unit="{record}",
    ),
    Metric(
        "ctxkit_audit_rejected",
        "counter",
        "OTLP exports answered 503 with Retry-After because the audit queue was full.",
        unit="{export}",
    ),
    Metric(
        "ctxkit_audit_prefix_kept_ratio",
        "histogram",
        "Share of the previous request's tokens a request starts with, message for message "
        "(what a provider's prompt cache can serve), per request after a conversation's "
        "first.",
        buckets=SHARE_BUCKETS,
    ),
)
"""The metrics of `ctxkit watch` (:class:`~ctxkit.audit.publish.AuditMetrics`), beside the
fleet figures every ctxkit process exports; not created by
:class:`~ctxkit.telemetry.PrometheusMetrics`. The queue depth gauge is
``ctxkit_audit_queue_depth``."""

AUDIT_QUEUE_DEPTH = Metric(
    "ctxkit_audit_queue_depth", "gauge", "OTLP exports received and not yet audited."
)

_BY_NAME = {m.prometheus: m for m in (*METRICS, *AUDIT_METRICS, AUDIT_QUEUE_DEPTH)}


def metric(name: str) -> Metric:
    """The declaration of a metric by its Prometheus name (a typo fails at import)."""
    return _BY_NAME[name]


# OpenTelemetry attribute names. GenAI semantic conventions where one exists (defined here as
# strings: the constants in opentelemetry-semantic-conventions are deprecated and moving).
CONVERSATION_ID = "gen_ai.conversation.id"
CONVERSATION_COMPACTED = "gen_ai.conversation.compacted"
TOKEN_TYPE = "gen_ai.token.type"
OPERATION_NAME = "gen_ai.operation.name"

ATTRIBUTES: dict[str, str] = {
    CONVERSATION_ID: "the conversation (manager) the view or compaction belongs to",
    CONVERSATION_COMPACTED: "true on a view whose request compacted; absent otherwise",
    "ctxkit.view.messages": "messages in the view returned",
    "ctxkit.view.tokens": "tokens in the view returned (exact)",
    "ctxkit.view.prefix_kept_tokens": (
        "tokens of the longest common prefix with the conversation's previous view"
    ),
    "ctxkit.view.previous_tokens": "tokens of the conversation's previous view (0: first view)",
    "ctxkit.budget.tokens": "token budget of the request",
    "ctxkit.history.messages": "messages in the stored history",
    "ctxkit.history.tokens": "tokens in the stored history",
    "ctxkit.context.utilization": "view tokens over budget",
    "ctxkit.compaction.strategy": "the strategies applied, joined by '+'",
    "ctxkit.compaction.tokens_before": "tokens of the view before the compaction",
    "ctxkit.compaction.tokens_after": "tokens of the view after the compaction",
    "ctxkit.compaction.tokens_saved": "tokens_before - tokens_after",
    "ctxkit.compaction.messages_before": "messages of the view before the compaction",
    "ctxkit.compaction.messages_after": "messages of the view after the compaction",
    "ctxkit.compaction.units_dropped": "units the compaction dropped",
    "ctxkit.compaction.units_truncated": "units the compaction shortened",
    "ctxkit.compaction.units_summarized": "units folded into a summary",
    "ctxkit.compaction.action": "metric attribute: dropped, truncated or summarized",
    "ctxkit.invariant.property": "metric attribute: the broken property's id",
    TOKEN_TYPE: "metric attribute of gen_ai.client.token.usage: input or output",
    OPERATION_NAME: "metric attribute of gen_ai.client.token.usage: chat",
    "ctxkit.include.source": "what made a synthetic message (summary)",
    "ctxkit.include.chars": "length of the synthetic message's text",
    "ctxkit.include.content": "the synthetic message's text: only with include_text=True",
    "message_count": "on context:* span events: messages, as the Amplifier contract names it",
    "token_count": "on context:* span events: tokens, as the Amplifier contract names it",
}
"""Attribute name -> meaning, for spans, span events and metric points."""
