"""Levels of detail for the ``hierarchical`` strategy: every unit can be shown full, as a
paragraph, or as one line.

A unit shown at a coarser level becomes **one plain text message** that stands for the whole
unit (a call with all its results, or a message alone), never a shortened copy of its tool
messages. That is the form that keeps every provider rule in every shape at once: a message
with no tool call and no result cannot leave a call unanswered, answer a call that is not
there, separate a Responses reasoning item from its call or an Anthropic turn from its
thinking; a synthetic tool message would have to invent outputs in six shapes and would
still carry ids (the suite's ``ordering`` property refuses a message that comes from no history
message and carries tool ids). It is written in the unit's own shape
(:func:`ctxkit.messages.text_message`: Gemini parts, Bedrock blocks, ...) with the manager's
``summary_role``, ``user`` by default: a user turn is what may stand before any turn in every
shape (Gemini wants a model turn with calls right after a user turn or a function response,
which a ``model`` text would break).

Its text starts with the ids of what it stands for, ``[recall m12-m14]``: the history messages
12 to 14 (indices in the manager's stored history, so nothing a provider would reject rides in
another field). :func:`ctxkit.reference.recall_tool` gives the model a tool that takes these
ids and returns the unit in full from the stored history.

Summaries come from the configured summarizer, once per unit content and level: they are kept
by a fingerprint of the unit's messages (:class:`LevelSummaries`), so neither a later view nor
a history replaced by the same messages summarises a unit at a level twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxkit.messages import copy_message
from ctxkit.reference.strategies import SUMMARY_HEADER, Summarizer
from ctxkit.tokens import TokenCounter

__all__ = [
    "FULL",
    "LEVELS",
    "LINE",
    "PARAGRAPH",
    "LevelSettings",
    "LevelSummaries",
    "assign_levels",
    "fingerprint",
    "parse_ids",
    "unit_ids",
]

FULL, PARAGRAPH, LINE = 0, 1, 2
LEVELS = ("full", "paragraph", "line")
"""Level names by number: what events and listings call them."""


@dataclass(frozen=True, slots=True)
class LevelSettings:
    """How a compaction shares its room between levels, and how long coarse forms are.

    The newest units are shown full while they fit in ``full_share`` of the room a compaction
    brings the view down to, the next ones as paragraphs while the running total fits in
    ``full_share + paragraph_share`` of it, older ones as one line while anything fits; room
    left over then brings coarse units back to full, then to paragraphs, newest first. So a
    long conversation keeps its recent work in full and an outline of all it can before
    dropping anything, and a short one is shown as finely as it fits.
    """

    full_share: float = 0.5
    paragraph_share: float = 0.25
    paragraph_tokens: int = 160
    """Most tokens of a paragraph's text (the ids marker comes on top)."""
    line_tokens: int = 40
    """Most tokens of a one-line text (the ids marker comes on top)."""


# -- ids ---------------------------------------------------------------------------------------


def unit_ids(start: int, stop: int) -> str:
    """The ids of history messages ``[start, stop)``: ``m12`` or ``m12-m14`` (inclusive)."""
    return f"m{start}" if stop - start <= 1 else f"m{start}-m{stop - 1}"


_ID = re.compile(r"^\s*m?(\d+)\s*(?:-\s*m?(\d+))?\s*$")


def parse_ids(text: str) -> tuple[int, int] | None:
    """The message range ``[start, stop)`` an id like ``m12`` or ``m12-m14`` names; None if
    it is not one."""
    match = _ID.match(text)
    if match is None:
        return None
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first
    return (first, last + 1) if last >= first else None


def marker(start: int, stop: int) -> str:
    """What a coarse form's text starts with."""
    return f"[recall {unit_ids(start, stop)}]"


# -- summaries ---------------------------------------------------------------------------------


def fingerprint(messages: Sequence[Any]) -> str:
    """A digest of a unit's messages, so equal units share their summaries."""
    text = json.dumps(
        list(messages), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
    )
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


class LevelSummaries:
    """The coarse texts of units, made by ``summarizer`` once per (fingerprint, level) and
    kept. ``made`` counts the summarizer's calls and ``made_by_key`` each key's, so a test can
    hold the promise that no unit is summarised at a level twice."""

    def __init__(
        self, summarizer: Summarizer, counter: TokenCounter, settings: LevelSettings
    ) -> None:
        self.summarizer = summarizer
        self.counter = counter
        self.settings = settings
        self._texts: dict[tuple[str, int], str] = {}
        self.made = 0
        self.made_by_key: Counter[tuple[str, int]] = Counter()

    def __len__(self) -> int:
        return len(self._texts)

    def known(self, key: str, level: int) -> str | None:
        return self._texts.get((key, level))

    async def text(self, key: str, level: int, messages: Sequence[dict[str, Any]]) -> str:
        """The unit's text at ``level`` (paragraph or line), summarised on first asking."""
        found = self._texts.get((key, level))
        if found is not None:
            return found
        cap = self.settings.paragraph_tokens if level == PARAGRAPH else self.settings.line_tokens
        self.made += 1
        self.made_by_key[(key, level)] += 1
        raw = await self.summarizer([copy_message(m) for m in messages], max_tokens=cap)
        text = _tidy(str(raw), one_line=level == LINE)
        text = self.counter.clip(text, cap) if text else "(no text)"
        self._texts[(key, level)] = text
        return text


def _tidy(text: str, *, one_line: bool) -> str:
    """A summarizer's text without the running summary's header (a unit's text needs none),
    its bullets, and for a one-line level, on one line."""
    if text.startswith(SUMMARY_HEADER):
        text = text[len(SUMMARY_HEADER) :]
    lines = [line.strip() for line in text.strip().splitlines()]
    lines = [line[2:] if line.startswith("- ") else line for line in lines if line]
    return "; ".join(lines) if one_line else "\n".join(lines)


# -- choosing levels ---------------------------------------------------------------------------

Cost = Callable[[int, int], Awaitable[int]]
"""``async (unit, level) -> tokens`` of the unit shown at that level."""


async def assign_levels(
    candidates: Sequence[int],
    cost: Cost,
    room: float,
    settings: LevelSettings,
    floor: Mapping[int, int] | None = None,
) -> tuple[dict[int, int], list[int]]:
    """Levels for ``candidates`` (unit indices, newest first) within ``room`` tokens, and the
    units that do not fit even as one line (the oldest, from the first that does not fit).

    Walks from the newest, each at the finest level whose running total fits that level's
    share of the room (a level with no share is skipped); once a level is passed it is never
    used again for older units, so the view grows coarser with age. A coarse form that is not
    smaller than the unit whole is not used (a short message stays as it is). Room left at the
    end is given back, newest first, to every coarse unit whose whole form fits in it (so one
    huge tool output cannot keep all older units coarse when there is room for them), then
    to one-line units as paragraphs while the next one fits.

    ``floor``: the levels units already had; a unit never comes back finer than it was, so
    a unit leaves full detail once, and what a view shows of its past stays as it was
    between compactions, save for what ages.

    Only the levels walked are asked for (``cost``), so summaries are made for the units the
    view holds and the one after, never for the whole history.
    """
    floor = floor or {}
    shares = (settings.full_share, settings.paragraph_share, 1.0)
    limits = (shares[0] * room, (shares[0] + shares[1]) * room, room)
    levels: dict[int, int] = {}
    shown: dict[int, int] = {}
    full: dict[int, int] = {}
    used = 0
    tier = FULL if shares[FULL] else PARAGRAPH if shares[PARAGRAPH] else LINE
    drop: list[int] = []
    for position, unit in enumerate(candidates):
        whole = full[unit] = await cost(unit, FULL)
        while True:
            level, tokens = FULL, whole
            wanted = max(tier, floor.get(unit, FULL))
            if wanted != FULL:
                coarse = await cost(unit, wanted)
                if coarse < whole:
                    level, tokens = wanted, coarse
            if used + tokens <= limits[tier]:
                break
            if tier == LINE:
                drop = list(candidates[position:])
                break
            tier = PARAGRAPH if tier == FULL and shares[PARAGRAPH] else LINE
        if drop:
            break
        used += tokens
        levels[unit], shown[unit] = level, tokens
    slack = room - used
    for target in (FULL, PARAGRAPH):
        if not shares[target]:
            continue
        for unit in candidates[: len(levels)]:
            if levels[unit] <= target or floor.get(unit, FULL) > target:
                continue
            tokens = full[unit] if target == FULL else await cost(unit, PARAGRAPH)
            if target == PARAGRAPH and tokens >= full[unit]:
                continue  # a paragraph no smaller than the whole is never shown
            if tokens - shown[unit] > slack:
                if target == FULL:
                    continue  # a smaller one further on may still fit (costs are known)
                break  # a paragraph is a summary to make: only for those that fit
            slack -= tokens - shown[unit]
            levels[unit], shown[unit] = target, tokens
    return {unit: level for unit, level in levels.items() if level != FULL}, drop
