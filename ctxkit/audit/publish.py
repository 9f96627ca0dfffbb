"""An audited request as ctxkit's events, so that everything that follows a managed
conversation follows an audited one: the Prometheus fleet aggregates, OpenTelemetry, the JSON
Lines stream ``ctxkit inspect`` reads. Plus the audit's own counters.

Per request, one ``ctxkit:view`` (the request is the view; its budget is the model's context
window, so "near the limit" means near the window), a ``context:post_compact`` (strategy
``external``) when a compaction is inferred, and a ``ctxkit:invariant_violation`` per required
finding. Metrics sum across receivers: a fleet sharded by conversation over several
``ctxkit watch`` instances adds up in Prometheus (``sum by (property)``).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from ctxkit import events
from ctxkit.audit.checks import ConversationAudit, Finding
from ctxkit.audit.request import Request
from ctxkit.events import EventBus
from ctxkit.telemetry.names import AUDIT_METRICS, AUDIT_QUEUE_DEPTH
from ctxkit.telemetry.prometheus import _make

__all__ = ["SKIP_REASONS", "AuditMetrics", "publish_request"]

SKIP_REASONS = ("undecodable", "malformed", "no content")
"""Values of the ``reason`` label of ``ctxkit_audit_skipped_total``."""


class AuditMetrics:
    """The audit's counters, in ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        made = {d.prometheus: _make(d, registry) for d in AUDIT_METRICS}
        self.requests = made["ctxkit_audit_requests"]
        self.violations = made["ctxkit_audit_violations"]
        self.skipped = made["ctxkit_audit_skipped"]
        self.rejected = made["ctxkit_audit_rejected"]
        self.prefix_kept = made["ctxkit_audit_prefix_kept_ratio"]
        self.queue_depth = Gauge(
            AUDIT_QUEUE_DEPTH.prometheus, AUDIT_QUEUE_DEPTH.help, registry=registry
        )
        from ctxkit.conformance.judge.catalogue import PROPERTIES

        for prop in PROPERTIES:  # series exist at 0 from the start, not "no data"
            self.violations.labels(prop.id, prop.level)
        for reason in SKIP_REASONS:
            self.skipped.labels(reason)

    def count(self, audit: ConversationAudit, request: Request, found: list[Finding]) -> None:
        self.requests.inc()
        for finding in found:
            self.violations.labels(finding.property, finding.level).inc()
        if audit.requests > 1 and audit.last_previous_tokens:
            self.prefix_kept.observe(audit.last_prefix_tokens / audit.last_previous_tokens)


async def publish_request(
    bus: EventBus, audit: ConversationAudit, request: Request, found: list[Finding]
) -> None:
    """The request's events, with ``conversation_id`` the conversation's key."""
    base: dict[str, Any] = {"conversation_id": audit.key}
    compaction = audit.compactions[-1] if audit.compactions else None
    compacted = compaction is not None and compaction.request == audit.requests - 1
    if compacted:
        await bus.publish(
            events.POST_COMPACT,
            {
                **base,
                "message_count": len(request.messages),
                "token_count": audit.last_tokens,
                "budget": audit.last_window,
                "strategy": "external",
                "tokens_before": compaction.tokens_before,
                "tokens_saved": max(0, compaction.tokens_before - compaction.tokens_after),
                "duration_s": 0.0,
                "units_dropped": compaction.dropped,
                "units_truncated": compaction.rewritten,
                "units_summarized": 0,
            },
        )
    await bus.publish(
        events.VIEW,
        {
            **base,
            "message_count": len(request.messages),
            "token_count": audit.last_tokens,
            "budget": audit.last_window or 0,
            "history_messages": len(request.messages),
            "history_tokens": audit.last_tokens,
            "compacted": compacted,
            "compact_threshold": None,
            "breakdown": {},
            "kinds": {},
            "prefix_tokens": audit.last_prefix_tokens,
            "previous_tokens": audit.last_previous_tokens,
            "duration_s": 0.0,
            "model": request.model,
            "request": audit.requests - 1,
        },
    )
    for finding in found:
        if finding.level == "required":
            await bus.publish(
                events.INVARIANT_VIOLATION,
                {
                    **base,
                    "property": finding.property,
                    "message": f"request {finding.request}: {finding.message}",
                    "ids": list(finding.ids),
                },
            )
    if request.usage is not None and request.usage.input_tokens is not None:
        await bus.publish(
            events.USAGE,
            {
                **base,
                "input_tokens": request.usage.input_tokens,
                "output_tokens": request.usage.output_tokens,
                "estimated_tokens": audit.last_tokens,
            },
        )
