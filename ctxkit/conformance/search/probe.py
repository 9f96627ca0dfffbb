"""Which message shapes a target takes, asked before the search.

A target built for one provider's messages (a Gemini agent's context, an adapter over a
library that knows only Chat Completions) refuses the others, rightly. Checking it in a shape
it refuses would only report that refusal under every property, so the run asks first: for each
shape, a fresh manager gets a user message and a tool call written in that shape; a shape whose
messages are refused with an error is left out of the run, and the report says so.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ctxkit.conformance.search.conversations import RoundTemplate, Shape, in_shape
from ctxkit.conformance.targets.worker_client import Child, TargetUnusable

__all__ = ["ShapeProbe", "probe_shapes"]


@dataclass
class ShapeProbe:
    accepted: tuple[Shape, ...]
    refused: dict[str, str] = field(default_factory=dict)
    """Shape -> what the target said when refusing it."""

    def note(self) -> str:
        """A sentence for the report, empty when every shape asked was taken."""
        if not self.refused:
            return ""
        shown = "; ".join(f"{shape} ({why})" for shape, why in self.refused.items())
        return f"not checked in shapes the target refused on the first add: {shown}"


def _samples(shape: Shape) -> list[dict]:
    round_ = RoundTemplate(shape, ("ok",), (0,), extras=False).messages(itertools.count(1))
    return [in_shape({"role": "user", "content": "hello"}, shape), round_[0]]


def probe_shapes(child: Child, shapes: tuple[Shape, ...], timeout: float) -> ShapeProbe:
    """Ask the target for each shape (see the module). A target that hangs or dies while
    asked keeps every shape: the run itself will meet and report that."""
    accepted: list[Shape] = []
    refused: dict[str, str] = {}
    try:
        for shape in shapes:
            child.call("reset", timeout)
            for message in _samples(shape):
                reply = child.call("add", timeout, message=message)
                if not reply.ok:
                    refused[shape] = f"{reply.type or 'error'}: {reply.message}".strip()[:200]
                    break
            else:
                accepted.append(shape)
        child.call("reset", timeout)
    except TargetUnusable:
        return ShapeProbe(shapes)
    if not accepted:
        # A target that refuses every shape is judged in all of them: its refusals are the
        # finding, not a reason to check nothing.
        return ShapeProbe(shapes)
    return ShapeProbe(tuple(accepted), refused)
