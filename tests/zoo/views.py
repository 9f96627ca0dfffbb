"""Members whose views are wrong without splitting pairs: order, determinism, budget, what stays.

- ReordersView: moves the newest user message to the end of the view.
- AnswerAheadOfTools: after two tool rounds, the answer goes ahead of the later one; the
  results of parallel calls sorted by call id besides, which is no fault.
- HoistsSystem: moves every system message, mid-conversation ones too, to the front.
- Nondeterministic: when compacting, adds a notice stamped with the current time.
- IgnoresBudget: ignores token_budget and the provider; every view holds everything.
- DropsSystemPrompt: when compacting, drops the system messages.
- DropsNewestUser: does not pin the newest user message, so tool rounds after it push it out.
- WrongFallbackBudget: asked with no budget and no provider, plans for 4x its max_tokens.
"""

from __future__ import annotations

import time
from typing import Any

from tests.zoo.base import GoodManager, results_by_id, role_of


class ReordersView(GoodManager):
    """Fault (ordering): moves the newest user message to the end of the view ("the model
    should read the question last"), ahead of the assistant replies and tool rounds that
    came after it in the history."""

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)
        users = [i for i, m in enumerate(view) if role_of(m) == "user" and not self._results(m)]
        if users:
            view.append(view.pop(users[-1]))
        return view


class AnswerAheadOfTools(GoodManager):
    """Fault (ordering): after two tool rounds in a row, the view sends the assistant's text
    answer that follows them ahead of the later round (a calling message and its results,
    kept whole), as if the answer had come before it. It also sorts the results of parallel
    calls by call id, which the APIs take (``unusual:SortsResultsById``): the failure shown
    must be the answer moved (five messages at least), never the results in another order
    (three would do, were that a fault)."""

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = results_by_id(super()._render(history, kept))
        answers = [
            i
            for i, m in enumerate(view)
            if role_of(m) == "assistant" and not self._calls(m) and not self._results(m)
        ]
        if not answers:
            return view
        at = start = answers[-1]
        while start > 0 and self._results(view[start - 1]):
            start -= 1
        call = start - 1  # the later round's calling message
        if start < at and call > 0 and self._calls(view[call]) and self._results(view[call - 1]):
            view.insert(call, view.pop(at))
        return view


class HoistsSystem(GoodManager):
    """Fault (ordering, which the ``hoisted-system`` relaxation will allow): every system
    message, mid-conversation reminders too, moves to the front of the view; the rest keeps
    its order and pairs stay whole."""

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)
        return sorted(view, key=lambda m: role_of(m) != "system")


class Nondeterministic(GoodManager):
    """Fault (determinism): when the view drops anything, it adds a user notice stamped with
    the current time and a running count after the system messages, so two views asked for
    in a row differ."""

    _views = 0

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        view = super()._render(history, kept)
        if len(kept) < len(history):
            self._views += 1
            stamp = f"[trimmed at {time.time_ns()}, view {self._views}]"
            notice = {"role": "user", "content": stamp}
            at = next((i for i, m in enumerate(view) if role_of(m) != "system"), len(view))
            view.insert(at, notice)
        return view


class IgnoresBudget(GoodManager):
    """Fault (budget): ignores token_budget and the provider's limits, always planning for
    10**9 tokens, so every view is the whole history however small the budget."""

    def _budget(self, token_budget: int | None, provider: Any) -> int:
        return 10**9


class DropsSystemPrompt(GoodManager):
    """Fault (preservation): when the view must drop anything, it drops the system messages
    first, though they would fit."""

    def _plan(self, history: list[Any], limit: int) -> list[int]:
        kept = super()._plan(history, limit)
        if len(kept) == len(history):
            return kept
        return [i for i in kept if role_of(history[i]) != "system"]


class DropsNewestUser(GoodManager):
    """Fault (preservation): pins only the system messages, so under a tight budget the
    newest units win and the newest user message goes when tool rounds follow it."""

    def _pinned(self, history: list[Any], units: list[tuple[list[int], bool]]) -> set[int]:
        return {k for k, (ids, _) in enumerate(units) if role_of(history[ids[0]]) == "system"}


class WrongFallbackBudget(GoodManager):
    """Fault (budget): honours token_budget and the provider, but a request that names
    neither gets a view planned for four times the configured ``max_tokens`` (a fallback read
    from the wrong setting), so with a small configuration it returns views over budget."""

    def _budget(self, token_budget: int | None, provider: Any) -> int:
        if token_budget is None and provider is None:
            return 4 * self.max_tokens
        return super()._budget(token_budget, provider)
