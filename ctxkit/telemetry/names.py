"""Every metric and attribute name ctxkit exports, declared once.

The Prometheus and OpenTelemetry subscribers, the Grafana dashboard and the alert rules all
read their names from here, and a test keeps the README's table in step with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ATTRIBUTES",
    "METRICS",
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
SECONDS_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
)  # fmt: skip

METRICS: tuple[Metric, ...] = (
    Metric(
        "ctxkit_views",
        "counter",
        "Views returned by get_messages_for_request.",
    ),
    Metric(
        "ctxkit_view_tokens",
        "histogram",
        "Tokens in each view returned, by ctxkit's exact count.",
        otel="ctxkit.view.tokens",
        unit="{token}",
        buckets=TOKEN_BUCKETS,
    ),
    Metric(
        "ctxkit_view_duration_seconds",
        "histogram",
        "Time to build a view, compaction included.",
        buckets=SECONDS_BUCKETS,
    ),
    Metric(
        "ctxkit_context_tokens",
        "gauge",
        "Tokens in the latest view.",
    ),
    Metric(
        "ctxkit_context_budget_tokens",
        "gauge",
        "Token budget of the latest view (the hard limit).",
    ),
    Metric(
        "ctxkit_context_utilization_ratio",
        "gauge",
        "Latest view's tokens over its budget.",
        otel="ctxkit.context.utilization",
    ),
    Metric(
        "ctxkit_compaction_threshold_ratio",
        "gauge",
        "Share of the budget past which the manager compacts (absent if unknown).",
    ),
    Metric(
        "ctxkit_context_tokens_until_compaction",
        "gauge",
        "Tokens the latest view can grow before it reaches the compaction threshold.",
    ),
    Metric(
        "ctxkit_history_tokens",
        "gauge",
        "Tokens in the whole stored history behind the latest view.",
    ),
    Metric(
        "ctxkit_history_messages",
        "gauge",
        "Messages in the whole stored history behind the latest view.",
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
)

COMPACTION_ACTIONS = {
    "dropped": "units_dropped",
    "truncated": "units_truncated",
    "summarized": "units_summarized",
}
"""Values of the ``action`` label of ``ctxkit_compaction_units_total``, each with the
``context:post_compact`` key that counts it."""

REQUIRED_PROPERTIES = ("tool_pair_integrity", "ordering", "non_destructive", "lifecycle")
"""Values of the ``property`` label: the properties ``instrument()`` checks live."""

_BY_NAME = {m.prometheus: m for m in METRICS}


def metric(name: str) -> Metric:
    """The declaration of a metric by its Prometheus name (a typo fails at import)."""
    return _BY_NAME[name]


# OpenTelemetry attribute names. GenAI semantic conventions where one exists (defined here as
# strings: the constants in opentelemetry-semantic-conventions are deprecated and moving).
CONVERSATION_ID = "gen_ai.conversation.id"
CONVERSATION_COMPACTED = "gen_ai.conversation.compacted"

ATTRIBUTES: dict[str, str] = {
    CONVERSATION_ID: "the conversation (manager) the view or compaction belongs to",
    CONVERSATION_COMPACTED: "whether a compaction happened while building this view",
    "ctxkit.view.messages": "messages in the view returned",
    "ctxkit.view.tokens": "tokens in the view returned (exact)",
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
    "ctxkit.include.source": "what made a synthetic message (summary)",
    "ctxkit.include.chars": "length of the synthetic message's text",
    "ctxkit.include.content": "the synthetic message's text: only with include_text=True",
    "message_count": "on context:* span events: messages, as the Amplifier contract names it",
    "token_count": "on context:* span events: tokens, as the Amplifier contract names it",
}
"""Attribute name -> meaning, for spans, span events and metric points."""
