"""Usage a provider reported, as the metric subscribers read it from a ``ctxkit:usage`` event.

The Prometheus and OpenTelemetry subscribers record the same points: the provider's token
counts by ``gen_ai.token.type``, and ctxkit's exact count of the view over the input tokens
the provider billed for it. A ratio, not a signed difference, so that the histogram holds no
negative values: OpenTelemetry's SDK drops negative histogram records, and Prometheus's
``_sum`` must only grow for ``rate()`` to mean anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ReportedUsage", "reported_usage"]


@dataclass(frozen=True, slots=True)
class ReportedUsage:
    """What one ``ctxkit:usage`` event adds to the metrics."""

    tokens: dict[str, int]
    """Token counts by token type (``input``, ``output``): only those that are counts."""
    estimate_ratio: float | None
    """ctxkit's count over the billed input (1 is exact); None without a view or a bill."""


def _count(value: Any) -> bool:
    """A token count: a non-negative int (a publisher may send anything)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def reported_usage(data: Mapping[str, Any]) -> ReportedUsage:
    """The points of a ``ctxkit:usage`` event's data; values that are not counts are left out."""
    reported = {"input": data.get("input_tokens"), "output": data.get("output_tokens")}
    tokens = {kind: value for kind, value in reported.items() if _count(value)}
    estimated, billed = data.get("estimated_tokens"), tokens.get("input")
    ratio = estimated / billed if _count(estimated) and billed else None
    return ReportedUsage(tokens, ratio)
