"""Correct but unusual members: each must pass every required property.

- InsertsSummary: when the view drops messages, one plain user summary follows the system
  messages.
- TruncatesToolOutputs: in the view only, long tool outputs become head + marker + tail.
- StampsMetadata: stored messages carry ``metadata: {"added_at": n}`` (an annotation key).
"""

from __future__ import annotations

import copy
from typing import Any

from tests.zoo.base import GoodManager, estimate, outputs, role_of, total

LONG = 500
KEEP = 200
MARKER = "\n[... omitted ...]\n"


class InsertsSummary(GoodManager):
    """Correct: when the view drops messages, it plans for a little less and puts one
    synthetic summary, a plain-text user message with no tool ids, right after the leading
    system messages; only when the summary costs less than what it stands for."""

    @staticmethod
    def _summary(dropped: int) -> dict:
        return {"role": "user", "content": f"[Summary: {dropped} earlier messages left out.]"}

    def _plan(self, history: list[Any], limit: int) -> list[int]:
        return super()._plan(history, limit - estimate(self._summary(len(history))))

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)
        summary = self._summary(len(history) - len(kept))
        if len(kept) < len(history) and estimate(summary) < total(history) - total(view):
            at = next((i for i, m in enumerate(view) if role_of(m) != "system"), len(view))
            view.insert(at, summary)
        return view


class TruncatesToolOutputs(GoodManager):
    """Correct: in the view, a tool output longer than 500 characters (OpenAI ``tool``
    content, Anthropic ``tool_result`` block content, when a string) becomes its first and
    last 200 characters around an omission marker; roles and ids stay, stored history is
    untouched."""

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)  # deep copies: safe to edit
        for owner in (o for m in view for o in outputs(m)):
            text = owner["content"]
            if len(text) > LONG:
                owner["content"] = text[:KEEP] + MARKER + text[-KEEP:]
        return view


class StampsMetadata(GoodManager):
    """Correct: each stored copy gets ``metadata: {"added_at": n}`` from a running counter
    (merged into metadata the caller gave); get_messages() and views carry the stamp. Equal
    to what was added once the annotation key ``metadata`` is ignored."""

    _added = 0

    def _stored(self, message: dict) -> Any:
        stored = copy.deepcopy(message)
        if isinstance(stored, dict):
            self._added += 1
            given = stored.get("metadata")
            stored["metadata"] = {
                **(given if isinstance(given, dict) else {}),
                "added_at": self._added,
            }
        return stored
