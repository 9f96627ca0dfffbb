"""Plans views in whole units, and compacts them with hysteresis.

A view grows with the history until it would pass ``compact_threshold x budget``; then one
compaction brings it down to ``target_ratio x budget`` and the view grows again from there.
Between compactions the start of the view stays the same, so repeated requests share a
prompt-cache prefix and a summary is made once per compaction, not once per request.

Work per request follows the new units and the view, never the whole history: the plan keeps
the list of units in the view and a running token total, and only looks at units added since.
The opt-in listing of a view (:meth:`Planner.listing`) keeps to the same rule.

Retention limits (:mod:`ctxkit.reference.retention`) come first: :meth:`Planner.retain`
takes the units they leave out off a plan's kept list, and the budget logic works on the
rest. Retention moves the start of the view, so a view it changes is rendered afresh.

With the ``hierarchical`` strategy a compaction also gives units a level of detail
(:mod:`ctxkit.reference.levels`): a plan's ``levels`` holds the units shown as a paragraph or
one line, each rendered as one message that stands for the whole unit. Choosing levels needs
the summaries' sizes, so that decision is async (:meth:`Planner.compaction`).

With ``recall`` (:mod:`ctxkit.reference.recall`) a plan's ``recalled`` units are in its kept
list too, in history order, shown whole: units the view had left out or shown coarse, brought
back because the newest user message asks about them. They are taken out again before any
compaction decides (:meth:`Planner.strip_recalled`), so recall never changes what the budget
logic keeps; a compaction only keeps room aside for them (``reserve``) when they do not fit in
what it leaves.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from ctxkit.events import LISTING_ROWS
from ctxkit.messages import MessageInfo, Unit, copier_of, copy_message, is_flat, text_message
from ctxkit.reference.levels import (
    FULL,
    LEVELS,
    LevelSettings,
    LevelSummaries,
    assign_levels,
    fingerprint,
    marker,
)
from ctxkit.reference.pins import always_pinned, has_user_turn
from ctxkit.reference.retention import Horizon, Limits, limit_names
from ctxkit.reference.store import History
from ctxkit.reference.strategies import (
    Summarizer,
    extractive_unit_summary,
    importance_score,
    shorten_output,
)
from ctxkit.tokens import REPLY_PRIMING, MessageCost

__all__ = ["Compaction", "Planner", "Recalled", "Retained", "Settings", "Spans", "ViewPlan"]

Entry = tuple[str, int | None, dict[str, Any], MessageCost]
"""``(kind, history index, message, cost)``; kind is ``kept``, ``shortened`` or ``summary``."""


@dataclass(slots=True)
class Rendered:
    """A view's messages, uncopied, with the totals a usage snapshot needs."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    """The view's messages, uncopied, in order."""
    nested: list[tuple[int, Callable[[Any], Any]]] = field(default_factory=list)
    """Positions of messages holding lists or dicts, each with its copier (:func:`copier_of`);
    for all others ``dict.copy`` is a deep copy, done in C, which keeps the cost of a long view
    low."""
    units: int = 0
    """How many of the plan's kept units are rendered."""
    summary_placed: bool = False
    costs: list[int] = field(default_factory=list)
    """Tokens of each message, in order (for the prefix a view shares with the previous)."""
    tokens: int = 0
    """Their sum: the view's tokens without the reply priming."""
    breakdown: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    rows: list[dict[str, Any]] = field(default_factory=list)
    """The listing's rows up to the newest listed unit (see :meth:`Planner.listing`); never
    changed once added, and handed out as copies."""
    listed: int = 0
    """How many of the plan's kept units ``rows`` covers."""
    summary_listed: bool = False

    def add(self, entry: Entry) -> None:
        kind, _index, message, cost = entry
        if not is_flat(message):
            self.nested.append((len(self.messages), copier_of(message)))
        self.messages.append(message)
        self.costs.append(cost.total)
        self.tokens += cost.total
        self.kinds[kind] += 1
        breakdown = self.breakdown
        if kind == "summary":
            breakdown["summaries"] = breakdown.get("summaries", 0) + cost.total
            return
        for category, tokens in cost.parts:
            breakdown[category] = breakdown.get(category, 0) + tokens

    def copy_view(self) -> list[dict[str, Any]]:
        """A new list of new messages: what a request returns."""
        view = list(map(dict.copy, self.messages))
        for position, copy in self.nested:
            view[position] = copy(self.messages[position])
        return view


KINDS = ("kept", "shortened", "summary")

_PLANS_KEPT = 8
"""How many budgets keep a plan at once; a ninth budget evicts the least recently used."""


@dataclass(frozen=True, slots=True)
class Settings:
    """The planner's share of the manager's configuration (validated by the manager)."""

    compact_threshold: float = 0.7
    target_ratio: float = 0.5
    strategies: tuple[str, ...] = ("truncate_outputs", "truncate")
    head_lines: int = 128
    tail_lines: int = 128
    max_bytes: int = 10 * 1024
    summary_max_tokens: int = 1_000
    summary_role: str = "user"
    levels: LevelSettings = field(default_factory=LevelSettings)
    """The ``hierarchical`` strategy's shares and lengths."""


@dataclass(frozen=True, slots=True)
class Recalled:
    """How a recalled unit was shown before the recall, to put it back so."""

    level: int | None
    """Its coarse level, or None if the view had left it out."""
    shortened: bool
    """The recall shows it with outputs shortened (``truncate_outputs``: it did not fit whole)."""


@dataclass(slots=True)
class ViewPlan:
    """What the view for one budget holds: unit indices, shortened units, the summary."""

    budget: int
    generation: int
    scanned: int = 0
    kept: list[int] = field(default_factory=list)
    short: set[int] = field(default_factory=set)
    tokens: int = 0
    """Sum of the costs of the view's messages (without the request's reply priming)."""
    summary: dict[str, Any] | None = None
    summary_cost: MessageCost | None = None
    summarized_units: int = 0
    summarized: list[tuple[int, int]] = field(default_factory=list)
    """The dropped units the summary stands for, as sorted, disjoint unit ranges ``(start,
    stop)``: a dropped unit outside them was left out plainly."""
    skipped_units: int = 0
    compactions: int = 0
    rendered: Rendered | None = None
    """The view's entries as last rendered; extended as units arrive, dropped on compaction."""
    retained: tuple[int, tuple[int | None, int | None]] | None = None
    """The retention horizon and moving pins last applied (see :meth:`Planner.retain`)."""
    levels: dict[int, int] = field(default_factory=dict)
    """Kept units shown coarser than full (``hierarchical``): unit index -> level."""
    level_tokens: dict[int, int] = field(default_factory=dict)
    """What each level of ``levels`` saves: tokens of its units shown full, minus shown."""
    level_units: dict[int, int] = field(default_factory=dict)
    """How many units each level of ``levels`` holds."""
    recalled: dict[int, Recalled] = field(default_factory=dict)
    """Units a recall brought back into the view (also in ``kept``): unit index -> how it was
    shown before and whether the recall shortened it."""
    recall_asked: bool = False
    recall_query: int | None = None
    """The history index of the user message the last recall asked with (when asked)."""

    @property
    def request_tokens(self) -> int:
        """Tokens of the request this view makes: messages plus reply priming."""
        return self.tokens + REPLY_PRIMING if self.kept or self.summary else 0


@dataclass(slots=True)
class Compaction:
    """One decided compaction, before it is applied."""

    shorten: list[int]
    drop: list[int]
    tokens_before: int
    messages_before: int
    summarized: int = 0
    """How many dropped units a new summary stands for (set when applied)."""
    unsummarized: list[int] = field(default_factory=list)
    """Units an earlier summary stood for, left out plainly now that the summary went
    because the view could not fit the budget with it (set when applied)."""
    levels: dict[int, int] | None = None
    """``hierarchical``: the kept units' new levels (coarser than full only); None: unchanged."""
    levelled: list[int] = field(default_factory=list)
    """Units that were shown full and are now shown coarser (for the audit log)."""


@dataclass(slots=True)
class Retained:
    """Units retention newly leaves out of one plan's view, before it is applied."""

    drop: list[int]
    limits: list[str]
    """Which limits moved the horizon past them: ``count``, ``time``, ``size``."""
    tokens_before: int
    messages_before: int
    summarized: int = 0
    """How many of them a new summary stands for (set when applied)."""
    levelled: list[int] = field(default_factory=list)
    """Always empty: retention leaves units out, it never changes a level."""


class Planner:
    """Keeps one :class:`ViewPlan` per budget over a :class:`History` and renders views."""

    def __init__(
        self,
        history: History,
        settings: Settings,
        summarizer: Summarizer,
        limits: Limits | None = None,
        level_summarizer: Summarizer | None = None,
    ) -> None:
        self.history = history
        self.settings = settings
        self.summarizer = summarizer
        self.hierarchical = "hierarchical" in settings.strategies
        self.levels = LevelSummaries(
            level_summarizer or extractive_unit_summary, history.counter, settings.levels
        )
        """The units' coarse texts, kept across views and histories (by content)."""
        self._forms: dict[tuple[int, int], tuple[dict[str, Any], MessageCost]] = {}
        """A unit's coarse message and cost by (unit index, level), for this generation."""
        self.limits = limits or None
        """Retention limits; None when there are none (then nothing here costs anything)."""
        self._horizon: Horizon | None = None
        self._plans: OrderedDict[int, ViewPlan] = OrderedDict()
        self._short: dict[int, tuple[dict[str, Any], MessageCost] | None] = {}
        self._short_generation = history.generation
        self._spans = Spans()

    # -- plans -------------------------------------------------------------------------------

    def plan_for(self, budget: int) -> ViewPlan:
        """The plan for this budget, brought up to date with the history."""
        generation = self.history.generation
        if self._short_generation != generation:
            self._short.clear()
            self._forms.clear()
            self._spans = Spans()
            self._short_generation = generation
        plan = self._plans.get(budget)
        if plan is None or plan.generation != generation:
            plan = ViewPlan(budget=budget, generation=generation)
            self._plans[budget] = plan
            while len(self._plans) > _PLANS_KEPT:
                self._plans.popitem(last=False)
        self._plans.move_to_end(budget)
        self._extend(plan)
        return plan

    def _extend(self, plan: ViewPlan) -> None:
        units = self.history.units
        for index in range(plan.scanned, len(units)):
            unit = units[index]
            if unit.status == "pending":
                break  # a call still waiting for results; look again next time
            plan.scanned = index + 1
            if unit.status == "broken":
                plan.skipped_units += 1
                continue
            plan.kept.append(index)
            plan.tokens += self.history.unit_cost(unit)

    def over_threshold(self, plan: ViewPlan) -> bool:
        return plan.request_tokens > self.settings.compact_threshold * plan.budget

    # -- costs -------------------------------------------------------------------------------

    def _shortened(self, index: int) -> tuple[dict[str, Any], MessageCost] | None:
        """The shortened form of message ``index`` and its cost, or None if it is not long."""
        if index not in self._short:
            message = self.history.messages[index]
            settings = self.settings
            short = None
            if self.history.infos[index].result_ids:
                short = shorten_output(
                    message,
                    head_lines=settings.head_lines,
                    tail_lines=settings.tail_lines,
                    max_bytes=settings.max_bytes,
                )
            self._short[index] = (
                None if short is None else (short, self.history.counter.message_cost(short))
            )
        return self._short[index]

    def _message_cost(self, index: int, short: bool) -> MessageCost:
        if short:
            shortened = self._shortened(index)
            if shortened is not None:
                return shortened[1]
        return self.history.costs[index]

    def _compaction_cost(self, plan: ViewPlan) -> Callable[[int], int]:
        """A unit's cost as a compaction plans it: shortened if it is already, or if
        ``truncate_outputs`` is on and it is not the newest kept unit."""
        newest = plan.kept[-1]
        shortening = "truncate_outputs" in self.settings.strategies

        def cost(unit_index: int) -> int:
            short = unit_index in plan.short or (shortening and unit_index != newest)
            return self.unit_cost(unit_index, short)

        return cost

    def unit_cost(self, unit_index: int, short: bool) -> int:
        unit = self.history.units[unit_index]
        return sum(self._message_cost(i, short).total for i in range(unit.start, unit.stop))

    def shown_cost(self, plan: ViewPlan, unit_index: int) -> int:
        """What a kept unit costs in the plan's view: at its level, or whole (shortened if
        the plan shortens it)."""
        level = plan.levels.get(unit_index)
        if level is not None:
            form = self._forms.get((unit_index, level))
            if form is not None:
                return form[1].total
        return self.unit_cost(unit_index, unit_index in plan.short)

    async def level_form(self, unit_index: int, level: int) -> tuple[dict[str, Any], MessageCost]:
        """The one message that stands for a unit at a coarse level, and its cost: the
        summary's text after the ids of the unit's messages, in the unit's shape."""
        key = (unit_index, level)
        found = self._forms.get(key)
        if found is not None:
            return found
        history = self.history
        unit = history.units[unit_index]
        messages = history.messages[unit.start : unit.stop]
        text = await self.levels.text(fingerprint(messages), level, messages)
        form = history.infos[unit.start].form
        message = text_message(
            form, self.settings.summary_role, f"{marker(unit.start, unit.stop)} {text}"
        )
        found = self._forms[key] = (message, history.counter.message_cost(message))
        return found

    # -- compaction --------------------------------------------------------------------------

    def _pinned(self, plan: ViewPlan) -> set[int]:
        """System units, units marked ``metadata.pin``, the newest user turn, the newest unit."""
        history = self.history
        units = history.units
        pinned: set[int] = set()
        newest_user_found = False
        for unit_index in reversed(plan.kept):
            unit = units[unit_index]
            if not newest_user_found and has_user_turn(history, unit):
                pinned.add(unit_index)
                newest_user_found = True
            elif always_pinned(history, unit):
                pinned.add(unit_index)
        if plan.kept:
            pinned.add(plan.kept[-1])
        return pinned

    async def compaction(self, plan: ViewPlan, reserve: float = 0) -> Compaction | None:
        """The compaction to apply to an over-threshold plan; None when nothing can be
        gained. With ``hierarchical`` the choice needs the summaries' sizes, so it may await
        the summarizer (each unit and level once: see :class:`LevelSummaries`).

        ``reserve``: tokens of the target to keep free (for recalled units)."""
        if self.hierarchical:
            return await self._decide_levels(plan, reserve)
        return self.decide(plan, reserve)

    async def _decide_levels(self, plan: ViewPlan, reserve: float = 0) -> Compaction | None:
        """Pinned units stay full; the others get the finest levels the room allows, coarser
        with age, and the oldest are dropped only when even one line each does not fit
        (:func:`~ctxkit.reference.levels.assign_levels`). ``truncate_outputs`` shortens the
        units shown full; ``summarize`` folds the dropped ones into its summary (its room is
        kept aside, as with ``truncate``)."""
        settings = self.settings
        strategies = settings.strategies
        kept = plan.kept
        if not kept:
            return None
        newest = kept[-1]
        shortening = "truncate_outputs" in strategies
        whole = self._compaction_cost(plan)

        shown: dict[tuple[int, int], int] = {}

        async def cost(unit_index: int, level: int) -> int:
            if level == FULL:
                return whole(unit_index)
            tokens = shown.get((unit_index, level))
            if tokens is None:
                _message, form_cost = await self.level_form(unit_index, level)
                tokens = shown[(unit_index, level)] = form_cost.total
            return tokens

        pinned = self._pinned(plan)
        room = settings.target_ratio * plan.budget - REPLY_PRIMING - reserve
        room -= sum(whole(u) for u in pinned)
        if "summarize" in strategies:
            room -= self.summary_cap(plan.budget) + 8
        elif plan.summary_cost is not None:
            room -= plan.summary_cost.total
        candidates = [u for u in reversed(kept) if u not in pinned]
        levels, drop = await assign_levels(
            candidates, cost, room, settings.levels, floor=plan.levels
        )
        dropped = set(drop)
        shorten: list[int] = []
        if shortening:
            shorten = [
                u
                for u in kept[:-1]
                if u not in dropped
                and u not in levels
                and u not in plan.short
                and self._shortening_saves(u)
            ]
            remaining = REPLY_PRIMING + (plan.summary_cost.total if plan.summary_cost else 0)
            for u in kept:
                if u not in dropped:
                    remaining += shown[(u, levels[u])] if u in levels else whole(u)
            if (
                remaining > plan.budget
                and newest not in plan.short
                and self._shortening_saves(newest)
            ):
                shorten.append(newest)  # it cannot fit whole: better shortened than refused
        if (
            not shorten
            and not drop
            and levels == plan.levels
            and (plan.summary is None or not self.over_budget(plan))
        ):
            return None
        return Compaction(
            shorten=shorten,
            drop=sorted(drop),
            tokens_before=plan.request_tokens,
            messages_before=self.message_count(plan),
            levels=levels,
            levelled=sorted(u for u in levels if u not in plan.levels),
        )

    def decide(self, plan: ViewPlan, reserve: float = 0) -> Compaction | None:
        """Which units to shorten and which to drop; None when nothing can be gained.

        Units are kept by walking from the most deserving (the newest, or the most important)
        until the next one does not fit the target; it and all after it in that order are
        dropped. Only the walked units are ever shortened, so the work follows the view, not
        the history.
        """
        settings = self.settings
        strategies = settings.strategies
        kept = plan.kept
        if not kept:
            return None
        newest = kept[-1]
        shortening = "truncate_outputs" in strategies
        cost = self._compaction_cost(plan)

        drop: list[int] = []
        if {"truncate", "importance", "summarize"} & set(strategies):
            pinned = self._pinned(plan)
            room = settings.target_ratio * plan.budget - REPLY_PRIMING - reserve
            room -= sum(cost(u) for u in pinned)
            if "summarize" in strategies:
                room -= self.summary_cap(plan.budget) + 8
            elif plan.summary_cost is not None:
                room -= plan.summary_cost.total
            candidates = [u for u in reversed(kept) if u not in pinned]
            if "importance" in strategies:
                candidates = self._by_importance(candidates, kept)[::-1]
            for position, unit_index in enumerate(candidates):
                room -= cost(unit_index)
                if room < 0:
                    drop = candidates[position:]
                    break
        dropped = set(drop)
        shorten = []
        if shortening:
            shorten = [
                u
                for u in kept[:-1]
                if u not in dropped and u not in plan.short and self._shortening_saves(u)
            ]
            remaining = sum(cost(u) for u in kept if u not in dropped) + REPLY_PRIMING
            if plan.summary_cost is not None:
                remaining += plan.summary_cost.total
            if (
                remaining > plan.budget
                and newest not in plan.short
                and self._shortening_saves(newest)
            ):
                shorten.append(newest)  # it cannot fit whole: better shortened than refused
        if not shorten and not drop and (plan.summary is None or not self.over_budget(plan)):
            return None  # (else the summary is what keeps the view over: apply drops it)
        return Compaction(
            shorten=shorten,
            drop=sorted(drop),
            tokens_before=plan.request_tokens,
            messages_before=self.message_count(plan),
        )

    def _shortening_saves(self, unit_index: int) -> bool:
        return self.unit_cost(unit_index, True) < self.unit_cost(unit_index, False)

    def _by_importance(self, candidates: list[int], kept: list[int]) -> list[int]:
        """Candidates, least important first; ties go to the older."""
        history = self.history
        units = history.units
        span = max(1, len(kept) - 1)
        position = {unit_index: i for i, unit_index in enumerate(kept)}

        def score(unit_index: int) -> tuple[float, int]:
            unit = units[unit_index]
            value = importance_score(
                history.messages[unit.start : unit.stop],
                history.infos[unit.start : unit.stop],
                position[unit_index] / span,
            )
            return value, position[unit_index]

        return sorted(candidates, key=score)

    def summary_cap(self, budget: int) -> int:
        """Most tokens a summary may take: ``summary_max_tokens``, and never over a tenth of
        the budget, so a small budget is not eaten by its own summary."""
        return min(self.settings.summary_max_tokens, max(16, budget // 10))

    async def apply(self, plan: ViewPlan, compaction: Compaction) -> None:
        """Carry out a decided compaction: shorten, drop, and summarize what was dropped."""
        plan.short.update(compaction.shorten)
        dropped = set(compaction.drop)
        plan.kept = [u for u in plan.kept if u not in dropped]
        if compaction.levels is not None:
            plan.levels = compaction.levels
        if dropped and "summarize" in self.settings.strategies:
            compaction.summarized = await self._summarize(plan, compaction.drop)
        plan.compactions += 1
        plan.rendered = None
        self._count_levels(plan)
        plan.tokens = sum(self.shown_cost(plan, u) for u in plan.kept)
        if plan.summary_cost is not None:
            plan.tokens += plan.summary_cost.total
            if self.over_budget(plan):
                # Only the pinned units and the summary are left, and they do not fit: a
                # summary is never worth a refused request.
                plan.tokens -= plan.summary_cost.total
                compaction.unsummarized = [u for a, b in plan.summarized for u in range(a, b)]
                plan.summary = plan.summary_cost = None
                plan.summarized = []
                plan.summarized_units = 0

    @staticmethod
    def over_budget(plan: ViewPlan) -> bool:
        return plan.request_tokens > plan.budget

    async def _summarize(self, plan: ViewPlan, drop: list[int]) -> int:
        """Fold the dropped units (sorted, already out of ``plan.kept``) into the plan's one
        summary; returns how many it now stands for: 0 when a summary would cost more
        than what it stands for, or would take the view over its budget (a summary is never
        worth a refused request): the units are then dropped plainly and the earlier
        summary, if any, stays."""
        inputs = [plan.summary] if plan.summary else []
        for unit_index in drop:
            inputs.extend(self._unit_messages(unit_index, short=unit_index in plan.short))
        cap = self.summary_cap(plan.budget)
        text = await self.summarizer([copy_message(m) for m in inputs], max_tokens=cap)
        counter = self.history.counter
        form = self.history.infos[self.history.units[drop[0]].start].form if drop else "openai"
        summary = text_message(form, self.settings.summary_role, counter.clip(str(text), cap))
        cost = counter.message_cost(summary)
        replaced = sum(self.unit_cost(u, u in plan.short) for u in drop)
        replaced += plan.summary_cost.total if plan.summary_cost else 0
        if cost.total >= replaced:
            return 0
        rest = sum(self.shown_cost(plan, u) for u in plan.kept)
        if rest + cost.total + REPLY_PRIMING > plan.budget:
            return 0
        plan.summary, plan.summary_cost = summary, cost
        plan.summarized_units += len(drop)
        plan.summarized = _add_ranges(plan.summarized, drop)
        return len(drop)

    def _count_levels(self, plan: ViewPlan) -> None:
        """Bring the plan's per-level unit counts and savings up to date with its levels."""
        shortening = "truncate_outputs" in self.settings.strategies
        units: dict[int, int] = {}
        tokens: dict[int, int] = {}
        for unit_index, level in plan.levels.items():
            units[level] = units.get(level, 0) + 1
            saved = self.unit_cost(unit_index, shortening) - self.shown_cost(plan, unit_index)
            tokens[level] = tokens.get(level, 0) + saved
        plan.level_units, plan.level_tokens = units, tokens

    def level_figures(self, plan: ViewPlan) -> dict[str, dict[str, int]]:
        """Which level the view's units are shown at, and what each coarse level saves:
        ``units_by_level`` (``full``, ``paragraph``, ``line``) and ``tokens_saved_by_level``
        (``paragraph``, ``line``: the units' tokens shown full, with outputs shortened where
        ``truncate_outputs`` is on, minus their tokens as shown)."""
        by_level = {name: plan.level_units.get(level, 0) for level, name in enumerate(LEVELS)}
        by_level["full"] = len(plan.kept) - len(plan.levels)
        saved = {name: plan.level_tokens.get(level, 0) for level, name in enumerate(LEVELS)}
        del saved["full"]
        return {"units_by_level": by_level, "tokens_saved_by_level": saved}

    def level_ranges(self, plan: ViewPlan) -> list[list[Any]]:
        """The view's coarse units as runs ``[start, stop, level]`` of history messages, in
        history order: consecutive units at the same level make one run. A kept unit in no
        run is shown full."""
        units = self.history.units
        runs: list[list[Any]] = []
        last: tuple[int, int] | None = None
        for unit_index in sorted(plan.levels):
            level = plan.levels[unit_index]
            unit = units[unit_index]
            if last is not None and last == (unit_index - 1, level):
                runs[-1][1] = unit.stop
            else:
                runs.append([unit.start, unit.stop, LEVELS[level]])
            last = (unit_index, level)
        return runs

    def shortened_messages(self, unit_indices: Iterable[int]) -> list[int]:
        """History indices of the messages a view shows shortened in these units."""
        units = self.history.units
        return [
            index
            for unit_index in sorted(unit_indices)
            for index in range(units[unit_index].start, units[unit_index].stop)
            if self._shortened(index) is not None
        ]

    # -- recall ------------------------------------------------------------------------------

    def leaves_out(self, plan: ViewPlan) -> bool:
        """The view shows some complete unit less than whole: left out, or coarse."""
        return bool(plan.levels) or plan.scanned - plan.skipped_units > len(plan.kept)

    def choose_recalled(
        self,
        plan: ViewPlan,
        ranked: Sequence[tuple[int, float]],
        share: float,
        limit: int,
        *,
        room: float = math.inf,
        decision: Compaction | None = None,
    ) -> tuple[dict[int, Recalled], int]:
        """Which of the ``ranked`` units (best first) to bring back, at most ``limit``, and
        the tokens they add to the view; as the plan is, or as it would be after ``decision``.

        Two bounds: the units' tokens, as the view would show them, stay within ``share``,
        whatever they replace; and what they add to the view stays within ``room``. A unit
        the view shows coarse (``hierarchical``) replaces its paragraph or line, so it adds
        less than it costs: the share counts it whole (recalled material is never more than
        its share of the budget, as the view's listing shows it), the room counts the
        difference (the view only grows by that).

        A unit qualifies when the view does not show it whole: left out, or coarse; never a
        broken or pending one, nor one retention leaves out. It comes whole, or with outputs
        shortened (``truncate_outputs``) when only that fits; a unit that does not fit is
        passed over for smaller ones after it."""
        if share <= 0 or room <= 0 or limit <= 0 or not ranked:
            return {}, 0
        kept = set(plan.kept)
        levels = plan.levels
        if decision is not None:
            kept.difference_update(decision.drop)
            if decision.levels is not None:
                levels = decision.levels
        horizon = self._horizon.unit if self.limits is not None and self._horizon else 0
        shortening = "truncate_outputs" in self.settings.strategies
        units = self.history.units
        chosen: dict[int, Recalled] = {}
        taken = added = 0
        for unit_index, _score in ranked:
            if len(chosen) >= limit:
                break
            if (
                unit_index >= plan.scanned
                or unit_index < horizon
                or units[unit_index].status != "complete"
            ):
                continue
            level = levels.get(unit_index) if unit_index in kept else None
            if unit_index in kept and level is None:
                continue  # shown whole already
            shown = 0 if level is None else self._form_cost(unit_index, level)
            short = unit_index in plan.short
            cost = self.unit_cost(unit_index, short)
            shortened = False
            # the most this unit may cost: its share of what is left, and what it may add
            most = min(share - taken, room - added + shown)
            if cost > most and shortening and not short and self._shortening_saves(unit_index):
                cost, shortened = self.unit_cost(unit_index, True), True
            if cost > most:
                continue
            taken += cost
            added += cost - shown
            chosen[unit_index] = Recalled(level, shortened)
        return chosen, added

    def projected_tokens(self, plan: ViewPlan, decision: Compaction) -> int:
        """About what the view would cost after ``decision`` (the summary it would make is
        counted at its cap)."""
        dropped = set(decision.drop)
        levels = decision.levels if decision.levels is not None else plan.levels
        short = plan.short.union(decision.shorten)
        total = REPLY_PRIMING
        if dropped and "summarize" in self.settings.strategies:
            total += self.summary_cap(plan.budget) + 8
        elif plan.summary_cost is not None:
            total += plan.summary_cost.total
        for unit_index in plan.kept:
            if unit_index in dropped:
                continue
            level = levels.get(unit_index)
            if level is not None:
                total += self._form_cost(unit_index, level)
            else:
                total += self.unit_cost(unit_index, unit_index in short)
        return total

    def _form_cost(self, unit_index: int, level: int) -> int:
        """What a unit costs shown at a coarse level (its whole cost if the form is unknown)."""
        form = self._forms.get((unit_index, level))
        return form[1].total if form is not None else self.unit_cost(unit_index, False)

    def add_recalled(self, plan: ViewPlan, chosen: dict[int, Recalled]) -> None:
        """Bring the chosen units (from :meth:`choose_recalled`, for this plan as it is) into
        the view, in history order."""
        if not chosen:
            return
        back = []
        levelled = False
        for unit_index, how in chosen.items():
            if how.level is not None:
                plan.tokens -= self.shown_cost(plan, unit_index)
                del plan.levels[unit_index]
                levelled = True
            else:
                back.append(unit_index)
            if how.shortened:
                plan.short.add(unit_index)
            plan.tokens += self.unit_cost(unit_index, unit_index in plan.short)
        if back:
            plan.kept = sorted([*plan.kept, *back])
        plan.recalled = dict(chosen)
        if levelled:
            self._count_levels(plan)
        plan.rendered = None

    def strip_recalled(self, plan: ViewPlan) -> None:
        """Take the recalled units out of the view again, each back to how it was shown."""
        if not plan.recalled:
            return
        gone: set[int] = set()
        levelled = False
        for unit_index, how in plan.recalled.items():
            plan.tokens -= self.shown_cost(plan, unit_index)
            if how.shortened:
                plan.short.discard(unit_index)
            if how.level is None:
                gone.add(unit_index)
            else:
                plan.levels[unit_index] = how.level
                plan.tokens += self.shown_cost(plan, unit_index)
                levelled = True
        if gone:
            plan.kept = [u for u in plan.kept if u not in gone]
        plan.recalled = {}
        if levelled:
            self._count_levels(plan)
        plan.rendered = None

    def recalled_ranges(self, plan: ViewPlan) -> list[list[int]]:
        """The recalled units as runs ``[start, stop)`` of history messages, in history
        order: consecutive units make one run."""
        units = self.history.units
        runs: list[list[int]] = []
        previous = -2
        for unit_index in sorted(plan.recalled):
            unit = units[unit_index]
            if unit_index == previous + 1:
                runs[-1][1] = unit.stop
            else:
                runs.append([unit.start, unit.stop])
            previous = unit_index
        return runs

    # -- retention ---------------------------------------------------------------------------

    def retain(self, plan: ViewPlan) -> Retained | None:
        """The units retention newly leaves out of the plan's view; None when there are none
        (no limits, or nothing moved since the plan last asked: then this costs O(1)).

        Asks the horizon to catch up with the history and the clock, then looks only at the
        plan's units before it: the pinned ones left there earlier and those it just passed.
        """
        if self.limits is None:
            return None
        horizon = self._horizon
        if horizon is None or horizon.generation != self.history.generation:
            horizon = self._horizon = Horizon.over(self.history, self.limits)
        horizon.update(self.history.clock())
        state = (horizon.unit, horizon.pins)
        if plan.retained == state:
            return None
        plan.retained = state
        before = plan.kept[: bisect_left(plan.kept, horizon.unit)]
        always, moving = horizon.always, state[1]
        drop = [u for u in before if u not in always and u not in moving]
        if not drop:
            return None
        mask = 0
        for unit_index in drop:
            mask |= horizon.limits_of(unit_index)
        return Retained(
            drop=drop,
            limits=limit_names(mask),
            tokens_before=plan.request_tokens,
            messages_before=self.message_count(plan),
        )

    async def apply_retention(self, plan: ViewPlan, retained: Retained) -> None:
        """Leave the units out of the plan's view, summarized when so configured."""
        dropped = set(retained.drop)
        plan.kept = [u for u in plan.kept if u not in dropped]
        plan.tokens -= sum(self.shown_cost(plan, u) for u in retained.drop)
        for unit_index in dropped & plan.recalled.keys():
            if plan.recalled.pop(unit_index).shortened:
                plan.short.discard(unit_index)
        if plan.levels and dropped & plan.levels.keys():
            plan.levels = {u: level for u, level in plan.levels.items() if u not in dropped}
            self._count_levels(plan)
        if self.limits is not None and self.limits.summarize:
            had = plan.summary_cost.total if plan.summary_cost else 0
            retained.summarized = await self._summarize(plan, retained.drop)
            if retained.summarized:
                assert plan.summary_cost is not None
                plan.tokens += plan.summary_cost.total - had
        plan.compactions += 1
        plan.rendered = None

    # -- rendering ---------------------------------------------------------------------------

    def _unit_messages(self, unit_index: int, short: bool) -> Iterator[dict[str, Any]]:
        unit: Unit = self.history.units[unit_index]
        for index in range(unit.start, unit.stop):
            shortened = self._shortened(index) if short else None
            yield shortened[0] if shortened else self.history.messages[index]

    def message_count(self, plan: ViewPlan) -> int:
        units = self.history.units
        levels = plan.levels
        count = sum(1 if u in levels else len(units[u]) for u in plan.kept)
        return count + (1 if plan.summary else 0)

    def render(self, plan: ViewPlan) -> Rendered:
        """The view's entries in order, extending the last rendering with new units only.

        The summary goes right after the leading system messages.
        """
        rendered = plan.rendered
        if rendered is None or (plan.summary is not None and not rendered.summary_placed):
            rendered = plan.rendered = Rendered(summary_placed=plan.summary is None)
        history = self.history
        units = history.units
        for unit_index in plan.kept[rendered.units :]:
            unit = units[unit_index]
            if not rendered.summary_placed and history.infos[unit.start].role not in (
                "system",
                "developer",
            ):
                self._add_summary(plan, rendered)
            level = plan.levels.get(unit_index)
            if level is not None:
                message, cost = self._forms[(unit_index, level)]
                rendered.add(("summary", None, message, cost))
                continue
            short = unit_index in plan.short
            for index in range(unit.start, unit.stop):
                shortened = self._shortened(index) if short else None
                if shortened is not None:
                    rendered.add(("shortened", index, shortened[0], shortened[1]))
                else:
                    rendered.add(("kept", index, history.messages[index], history.costs[index]))
        rendered.units = len(plan.kept)
        if not rendered.summary_placed:
            # Only system messages so far: the summary closes the view for now, and the next
            # rendering starts again so it can go before the first non-system message.
            self._add_summary(plan, rendered)
            plan.rendered = None
        return rendered

    @staticmethod
    def _add_summary(plan: ViewPlan, rendered: Rendered) -> None:
        if plan.summary is not None and plan.summary_cost is not None:
            rendered.add(("summary", None, plan.summary, plan.summary_cost))
        rendered.summary_placed = True

    # -- listing -----------------------------------------------------------------------------

    def listing(self, plan: ViewPlan, rendered: Rendered) -> tuple[list[dict[str, Any]], int]:
        """The view's rows, message by message with the history left out between them (the
        format of :data:`ctxkit.events.VIEW`'s ``listing``), newest
        :data:`~ctxkit.events.LISTING_ROWS` only, and how many rows before them were omitted.

        ``rendered``: what :meth:`render` just returned for ``plan``. Its rows up to the
        newest kept unit are kept and extended as units arrive (a compaction starts them
        again), so a request pays for the new units' rows and the runs left out after the
        newest kept unit, plus copying the rows returned. A run of left-out units is found by
        unit ranges and summed with running totals (:class:`Spans`), so its cost does not grow
        with its length: the work follows the view and the runs, never the history (save
        bringing the running totals up to date with the messages added since, once each).
        """
        history = self.history
        spans = self._spans
        spans.update(history.costs, history.infos)
        units = history.units
        kept = plan.kept
        rows = rendered.rows
        previous = kept[rendered.listed - 1] if rendered.listed else -1
        summary = self._summary_row(plan)
        for unit_index in kept[rendered.listed :]:
            self._left_out_rows(plan, previous + 1, unit_index, rows)
            unit = units[unit_index]
            role = history.infos[unit.start].role
            if summary is not None and not rendered.summary_listed and role not in _SYSTEM:
                rows.append(summary)
                rendered.summary_listed = True
            level = plan.levels.get(unit_index)
            if level is not None:
                message, cost = self._forms[(unit_index, level)]
                row = _row(None, 1, message["role"], cost.total, "summary")
                row["level"], row["stands_for"] = LEVELS[level], [unit.start, unit.stop]
                rows.append(row)
                previous = unit_index
                continue
            short = unit_index in plan.short
            recalled = unit_index in plan.recalled
            for index in range(unit.start, unit.stop):
                shortened = self._shortened(index) if short else None
                if shortened is not None:
                    fate, tokens = "truncated", shortened[1].total
                else:
                    fate, tokens = "kept", history.costs[index].total
                if recalled:
                    fate = "recalled"
                rows.append(_row(index, 1, history.infos[index].role, tokens, fate))
            previous = unit_index
        rendered.listed = len(kept)
        # After the newest kept unit: broken or pending units (never summarized), and the
        # summary if only system messages are kept. Found afresh: they change as units arrive.
        tail: list[dict[str, Any]] = []
        self._left_out_rows(plan, previous + 1, len(units), tail)
        if summary is not None and not rendered.summary_listed:
            tail.append(summary)
        room = max(0, LISTING_ROWS - len(tail))
        listing = [*map(dict.copy, rows[max(0, len(rows) - room) :]), *tail[-LISTING_ROWS:]]
        return listing, len(rows) + len(tail) - len(listing)

    @staticmethod
    def _summary_row(plan: ViewPlan) -> dict[str, Any] | None:
        if plan.summary is None or plan.summary_cost is None:
            return None
        return _row(None, 1, plan.summary["role"], plan.summary_cost.total, "summary")

    def _left_out_rows(
        self, plan: ViewPlan, first: int, stop: int, rows: list[dict[str, Any]]
    ) -> None:
        """Rows for units ``[first, stop)``, all left out of the view: one per run of units
        the summary stands for, and one per run between them (dropped, broken or pending)."""
        if first >= stop:
            return
        units = self.history.units
        ranges = plan.summarized
        k = bisect_right(ranges, first, key=itemgetter(1))  # the first range ending after it
        position = first
        while position < stop:
            if k < len(ranges) and ranges[k][0] <= position:
                end, fate = min(ranges[k][1], stop), "summarized"
                k += 1
            else:
                end, fate = (min(ranges[k][0], stop) if k < len(ranges) else stop), "dropped"
            rows.append(self._spans.row(units[position].start, units[end - 1].stop, fate))
            position = end


_SYSTEM = ("system", "developer")


def _row(index: int | None, count: int, role: str, tokens: int, fate: str) -> dict[str, Any]:
    return {"index": index, "count": count, "role": role, "tokens": tokens, "fate": fate}


class Spans:
    """Running totals over a growing list of messages, so that the tokens and the role of any
    run of them take O(1): brought up to date with the messages added since, never rebuilt.
    Used for the listing's rows of left-out runs."""

    __slots__ = ("roles", "starts", "tokens")

    def __init__(self) -> None:
        self.tokens: list[int] = [0]
        """``tokens[i]``: what messages ``[0, i)`` cost, whole."""
        self.starts: list[int] = []
        """``starts[i]``: where the run of messages with message ``i``'s role begins."""
        self.roles: list[str] = []

    def __len__(self) -> int:
        return len(self.roles)

    def update(self, costs: Sequence[MessageCost], infos: Sequence[MessageInfo]) -> None:
        """Take in a history's messages past those already counted (``costs`` and ``infos``
        are its whole lists; only their new tail is read)."""
        known, now = len(self.roles), min(len(costs), len(infos))
        if now > known:
            self.extend(
                (cost.total for cost in costs[known:now]),
                (info.role for info in infos[known:now]),
            )

    def extend(self, totals: Iterable[int], roles: Iterable[str]) -> None:
        """Append messages by their whole cost and their role."""
        tokens, starts, known = self.tokens, self.starts, self.roles
        running = tokens[-1]
        for total, role in zip(totals, roles, strict=True):
            index = len(known)
            starts.append(starts[-1] if index and known[-1] == role else index)
            known.append(role)
            running += total
            tokens.append(running)

    def row(self, start: int, stop: int, fate: str) -> dict[str, Any]:
        """A listing row for messages ``[start, stop)``."""
        role = self.roles[start] if self.starts[stop - 1] <= start else "mixed"
        return _row(start, stop - start, role, self.tokens[stop] - self.tokens[start], fate)


def _add_ranges(ranges: list[tuple[int, int]], added: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted, disjoint ``ranges`` with the sorted unit indices ``added``, merged where they
    touch."""
    merged: list[tuple[int, int]] = []
    for start, stop in sorted([*ranges, *((unit, unit + 1) for unit in added)]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    return merged
