"""Repairing a view a provider would refuse: the smallest change that makes it valid.

A pure function over a view in any of the six shapes (and the history it was made from, for
what must travel with a call). It changes nothing it is given: edited messages are new dicts,
untouched ones are the view's own. What it does, rule by rule (``conformance/rules/``):

* **a result no call claims** (an orphan, a second answer, a result the message before it
  does not call): the result is dropped;
* **a call whose result is not right after it**: the call is dropped, and only that call: a
  message with several calls keeps the answered ones, a message left with nothing (no text,
  no other block; thinking, reasoning and cache points alone are nothing) is dropped whole;
  a Responses call item or a Chat Completions ``tool`` message is a call or result itself;
* **Anthropic server tools**: a server result without its ``server_tool_use`` before it in
  the same message, and a server call without its result there, are dropped;
* **Gemini calls without ids** pair with the responses of the next turn by position and
  name: the longest run of calls and responses that pair in order is kept;
* **a Responses ``reasoning`` item the history put before a call, missing from the view**:
  the history's item is put back right before the call run it preceded, when that run
  starts with the item that followed it (else the calls that need it are dropped). A
  reasoning item whose following item is not right after it is dropped;
* **the Anthropic turn whose calls the view's last message answers, without the thinking
  blocks it started with**: the history's thinking blocks are put back at its start.

Nothing is moved and nothing else is changed (a reasoning item in the wrong place is the one
exception: dropped there, and put back before its call). What no repair can keep goes first,
all at once: results no call in the view makes, second answers, calls whose result is nowhere
in the view. Then the first remaining break in view order, one message at a time, so a drop
that makes another unnecessary is seen before the other is made. The guard
(``instrument(on_violation="repair")``) checks the result with the suite's own checks; the
tests check that every part taken had to go.

Why attachments are put back rather than their calls dropped: a manager that strips thinking
or reasoning does it on every view. Dropping the calls that need them would take the newest
tool results from the model on every turn, and an agent that never sees its tool results
calls the tool again, forever. The provider needs these items anyway (a valid request holds
them), and only the history's own copies are put back, unchanged.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxkit.shapes import anthropic, gemini, inspect_message, responses
from ctxkit.shapes.base import InvalidMessage, MessageInfo
from ctxkit.shapes.rules import rule, rule_set

__all__ = ["Change", "Repair", "repair"]

Action = Literal["dropped", "restored"]
What = Literal["call", "result", "reasoning", "thinking"]

_SERVER = "anthropic.server_result_in_message"
_REASONING_WITH_CALL = "responses.reasoning_with_call"
_REASONING_FOLLOWED = "responses.reasoning_followed"
_THINKING = "anthropic.thinking_kept"

for _id in (_SERVER, _REASONING_WITH_CALL, _REASONING_FOLLOWED, _THINKING):
    rule(_id)  # a misspelt id fails at import, not in a repair


@dataclass(frozen=True, slots=True)
class Change:
    """One change a repair made.

    ``index``: the message's index in the view as given (for a reasoning item put back, the
    call item it was put before). ``ids``: the call ids involved. ``rule``: the provider rule
    the view broke (``conformance/rules/``), None for a call id used twice in a shape whose
    rules do not name that. ``whole``: the message went entirely (nothing was left in it)."""

    action: Action
    what: What
    index: int
    ids: tuple[str, ...]
    rule: str | None
    whole: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The change as plain JSON values, for an event."""
        return {
            "action": self.action,
            "what": self.what,
            "index": self.index,
            "ids": list(self.ids),
            "rule": self.rule,
            "whole": self.whole,
        }


@dataclass(frozen=True, slots=True)
class Repair:
    """A repaired view and the changes that made it (none: ``view`` is the view given)."""

    view: list[Any]
    changes: tuple[Change, ...]

    @property
    def rules(self) -> tuple[str, ...]:
        """The provider rules the view broke, each once, in the order first met."""
        return tuple(dict.fromkeys(c.rule for c in self.changes if c.rule))


@dataclass(slots=True)
class _Slot:
    message: Any
    origin: int
    """Index in the view as given (a restored item: the index of the item it precedes)."""
    info: MessageInfo | None


@dataclass(frozen=True, slots=True)
class _Drop:
    slot: int
    what: Literal["call", "result", "server"]
    position: int
    """The k-th call or result of the message (as its shape reader lists them), or for a
    server tool block, its position in ``content``."""
    call_id: str
    rule: str | None
    forced: bool
    """No repair that only removes can keep it (an orphan): dropped before any other."""


def _read(message: Any) -> MessageInfo | None:
    if not isinstance(message, Mapping):
        return None
    try:
        return inspect_message(message)
    except InvalidMessage:
        return None  # not read here: left as it is


def repair(view: Sequence[Any], history: Sequence[Any] = ()) -> Repair:
    """The smallest change that makes ``view`` pass the provider's per-view rules (tool pair
    integrity, and what travels with a call, found in ``history`` by call id); see the
    module's docstring for what is changed and why. A valid view comes back as given (the
    same list object when it is a list), with no changes."""
    slots = [_Slot(m, i, _read(m)) for i, m in enumerate(view)]
    found: list[Change] = []
    lookup = _History(history)
    parts = sum(len(s.info.call_ids) + len(s.info.result_ids) for s in slots if s.info)
    for _ in range(2 * (len(slots) + parts) + 16):  # each round changes something
        drops = _pair_drops(slots)
        if drops:
            forced = [d for d in drops if d.forced]
            if not forced:  # the first break in view order, alone: it may mend the others
                first = min(d.slot for d in drops)
                forced = [d for d in drops if d.slot == first]
            _apply(slots, forced, found)
            continue
        if not _fix_attachments(slots, lookup, found):
            break
    if not found:
        return Repair(view if isinstance(view, list) else list(view), ())
    return Repair([s.message for s in slots], tuple(found))


# -- tool pairs ------------------------------------------------------------------------------


def _is_call_item(message: Any) -> bool:
    return isinstance(message, Mapping) and message.get("type") in responses.CALLS


def _is_reasoning(message: Any) -> bool:
    return isinstance(message, Mapping) and message.get("type") == "reasoning"


def _is_result_message(slot: _Slot) -> bool:
    """A message that only answers, as ``following`` shapes answer: a ``tool`` message, a
    ``*_output`` item."""
    message, info = slot.message, slot.info
    if info is None or not info.result_ids:
        return False
    return message.get("type") in responses.OUTPUTS or message.get("role") == "tool"


def _pair_drops(slots: list[_Slot]) -> list[_Drop]:
    """What breaks tool pair integrity, read as the suite's check reads it: each calling
    message followed at once by all its results, no result elsewhere, no call id twice."""
    drops: list[_Drop] = []
    where_called: dict[str, tuple[int, int]] = {}
    for index, slot in enumerate(slots):
        drops += _server_drops(index, slot.message)
        info = slot.info
        if info is None or info.positional:
            continue
        for position, call_id in enumerate(info.call_ids):
            if call_id not in where_called:
                where_called[call_id] = (index, position)
                continue
            unique = rule_set(info.shape or "openai").breaking("duplicate") or None
            first, first_position = where_called[call_id]
            if _answered_in_place(slots, index, call_id):
                # the later one is the call its result answers (the nearer, where both are
                # in one run of call items): the earlier one goes
                drops.append(_Drop(first, "call", first_position, call_id, unique, False))
                where_called[call_id] = (index, position)
            else:
                drops.append(_Drop(index, "call", position, call_id, unique, False))
    answered: set[str] = set()
    anywhere = {
        result_id
        for slot in slots
        if slot.info is not None and not slot.info.positional
        for result_id in slot.info.result_ids
    }
    """Results in the view: a call whose result is nowhere in it cannot be kept."""

    def stray(index: int, position: int, result_id: str) -> None:
        shape = slots[index].info.shape  # type: ignore[union-attr]
        second = result_id in answered
        rules = rule_set(shape or "openai")
        reason = (second and rules.breaking("duplicate")) or rules.breaking("stray")
        forced = second or result_id not in where_called
        drops.append(_Drop(index, "result", position, result_id, reason, forced))
        answered.add(result_id)

    index = 0
    while index < len(slots):
        info = slots[index].info
        if info is None:
            index += 1
            continue
        for position, result_id in enumerate(info.result_ids):
            if info.positional:  # answers by place: nothing but the turn before may claim it
                rule_id = rule_set(info.shape or "gemini").breaking("stray")
                drops.append(_Drop(index, "result", position, result_id, rule_id, True))
            else:
                stray(index, position, result_id)
        if not info.call_ids:
            index += 1
            continue
        expected: dict[str, tuple[int, int]] = {
            call_id: (index, k) for k, call_id in enumerate(info.call_ids)
        }
        following = index + 1
        if _is_call_item(slots[index].message):
            while following < len(slots) and (
                _is_call_item(slots[following].message) or _is_reasoning(slots[following].message)
            ):
                later = slots[following].info
                for k, call_id in enumerate(later.call_ids if later else ()):
                    expected.setdefault(call_id, (following, k))
                following += 1
        shape = info.shape or "openai"
        if shape in ("openai", "responses", "genai"):
            while following < len(slots) and _is_result_message(slots[following]):
                after = slots[following].info
                assert after is not None
                if after.shape != info.shape:
                    break
                for position, result_id in enumerate(after.result_ids):
                    if result_id in expected:
                        del expected[result_id]
                        answered.add(result_id)
                    else:
                        stray(following, position, result_id)
                following += 1
        elif following < len(slots):
            after = slots[following].info
            if after is not None and after.result_ids and after.shape == info.shape:
                if info.positional or after.positional:
                    drops += _align(slots, index, following, expected, answered)
                else:
                    for position, result_id in enumerate(after.result_ids):
                        if result_id in expected:
                            del expected[result_id]
                            answered.add(result_id)
                        else:
                            stray(following, position, result_id)
                following += 1
        for call_id, (where, position) in expected.items():
            lost = call_id not in anywhere and not info.positional
            drops.append(
                _Drop(
                    where, "call", position, call_id, rule_set(shape).breaking("unanswered"), lost
                )
            )
        index = following
    return drops


def _answered_in_place(slots: list[_Slot], index: int, call_id: str) -> bool:
    """Whether the calling message at ``index`` is followed at once by ``call_id``'s result,
    past the call items and reasoning that go with it, as the pair check reads a view."""
    following = index + 1
    if _is_call_item(slots[index].message):
        while following < len(slots) and (
            _is_call_item(slots[following].message) or _is_reasoning(slots[following].message)
        ):
            following += 1
    while following < len(slots):
        info = slots[following].info
        if info is None or not info.result_ids:
            return False
        if call_id in info.result_ids:
            return True
        if not _is_result_message(slots[following]):
            return False
        following += 1
    return False


def _server_drops(index: int, message: Any) -> list[_Drop]:
    """Anthropic server tools: each result after its call, in the same message."""
    if not isinstance(message, Mapping) or not isinstance(message.get("content"), list):
        return []
    drops = []
    open_calls: dict[str, int] = {}
    for position, block in enumerate(message["content"]):
        if not isinstance(block, Mapping):
            continue
        kind = str(block.get("type"))
        if kind in anthropic.SERVER_CALLS:
            open_calls[str(block.get("id"))] = position
        elif anthropic.is_server_result(kind):
            tool_id = str(block.get("tool_use_id"))
            if open_calls.pop(tool_id, None) is None:
                drops.append(_Drop(index, "server", position, tool_id, _SERVER, True))
    drops += [_Drop(index, "server", at, i, _SERVER, False) for i, at in open_calls.items()]
    return drops


def _tokens(message: Mapping[str, Any], calls: bool) -> list[tuple[str, Any]]:
    """Gemini calls (or responses) as what pairs them: an id, else a name by position."""
    found = []
    for part in message.get("parts") or ():
        if not isinstance(part, Mapping):
            continue
        body = gemini.call_of(part) if calls else gemini.response_of(part)
        if isinstance(body, Mapping):
            call_id = body.get("id")
            found.append(
                ("id", call_id)
                if isinstance(call_id, str) and call_id
                else ("name", body.get("name"))
            )
    return found


def _align(
    slots: list[_Slot],
    caller: int,
    answer: int,
    expected: dict[str, tuple[int, int]],
    answered: set[str],
) -> list[_Drop]:
    """Gemini calls and responses paired by position and name: keep the longest sequence
    that pairs in order (a longest common subsequence), drop the rest of both turns."""
    calls = _tokens(slots[caller].message, calls=True)
    answers = _tokens(slots[answer].message, calls=False)
    rows, cols = len(calls), len(answers)
    best = [[0] * (cols + 1) for _ in range(rows + 1)]
    for i in range(rows - 1, -1, -1):
        for j in range(cols - 1, -1, -1):
            if calls[i] == answers[j]:
                best[i][j] = best[i + 1][j + 1] + 1
            else:
                best[i][j] = max(best[i + 1][j], best[i][j + 1])
    kept_calls, kept_answers = set(), set()
    i = j = 0
    while i < rows and j < cols:
        if calls[i] == answers[j]:
            kept_calls.add(i)
            kept_answers.add(j)
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    call_ids = slots[caller].info.call_ids  # type: ignore[union-attr]
    result_ids = slots[answer].info.result_ids  # type: ignore[union-attr]
    drops = []
    for k, call_id in enumerate(call_ids):
        expected.pop(call_id, None)
        if k in kept_calls:
            answered.add(call_id)
        else:
            drops.append(_Drop(caller, "call", k, call_id, "gemini.responses_match_calls", False))
    for k, result_id in enumerate(result_ids):
        if k not in kept_answers:
            drops.append(
                _Drop(answer, "result", k, result_id, "gemini.responses_match_calls", False)
            )
    return drops


# -- removing parts --------------------------------------------------------------------------


def _apply(slots: list[_Slot], drops: list[_Drop], found: list[Change]) -> None:
    by_slot: dict[int, dict[tuple[str, int], _Drop]] = {}
    for drop in drops:  # one drop per part, however many breaks name it
        by_slot.setdefault(drop.slot, {}).setdefault((drop.what, drop.position), drop)
    changes: list[Change] = []
    for index in sorted(by_slot, reverse=True):  # from the end: nothing shifts
        slot, mine = slots[index], list(by_slot[index].values())
        edited = _without(
            slot.message,
            {d.position for d in mine if d.what == "call"},
            {d.position for d in mine if d.what == "result"},
            {d.position for d in mine if d.what == "server"},
        )
        whole = edited is None
        for drop in sorted(mine, key=lambda d: (d.what != "call", d.position)):
            what: What = "call" if drop.what == "call" else "result"
            if drop.what == "server":
                kind = slot.message["content"][drop.position].get("type")
                what = "call" if kind in anthropic.SERVER_CALLS else "result"
            changes.append(Change("dropped", what, slot.origin, (drop.call_id,), drop.rule, whole))
        if whole:
            del slots[index]
        else:
            slot.message, slot.info = edited, _read(edited)
    found.extend(sorted(changes, key=lambda c: c.index))


def _without(
    message: Mapping[str, Any], calls: set[int], results: set[int], blocks: set[int]
) -> Any:
    """``message`` without its ``calls``-th calls, ``results``-th results and server tool
    ``blocks``; None when nothing is left of it."""
    if message.get("type") in responses.CALLS | responses.OUTPUTS:
        return None  # a Responses call or output item is the call or result itself
    if message.get("role") == "tool" and "parts" not in message:
        return None  # a Chat Completions tool message answers one call
    edited = dict(message)
    tool_calls = message.get("tool_calls")
    if calls and isinstance(tool_calls, list) and tool_calls:
        kept = [call for k, call in enumerate(tool_calls) if k not in calls]
        if kept:
            edited["tool_calls"] = kept
        else:
            del edited["tool_calls"]
        calls = set()
    if isinstance(message.get("content"), list):
        edited["content"] = _filter(message["content"], calls, results, blocks, _block_kind)
    if isinstance(message.get("parts"), list):
        edited["parts"] = _filter(message["parts"], calls, results, set(), _part_kind)
    return edited if _has_substance(edited) else None


def _filter(
    items: list[Any], calls: set[int], results: set[int], at: set[int], kind_of: Any
) -> list[Any]:
    kept, counts = [], {"call": 0, "result": 0}
    for position, item in enumerate(items):
        kind = kind_of(item)
        if kind is not None:
            ordinal = counts[kind]
            counts[kind] += 1
            if ordinal in (calls if kind == "call" else results):
                continue
        if position in at:
            continue
        kept.append(item)
    return kept


def _block_kind(block: Any) -> str | None:
    """A content block as a client call or result (Anthropic, Bedrock), else None."""
    if not isinstance(block, Mapping):
        return None
    if block.get("type") == "tool_use" or "toolUse" in block:
        return "call"
    if block.get("type") == "tool_result" or "toolResult" in block:
        return "result"
    return None


def _part_kind(part: Any) -> str | None:
    """A part as a call or result (Gemini, GenAI), else None."""
    if not isinstance(part, Mapping):
        return None
    if gemini.call_of(part) is not None or part.get("type") == "tool_call":
        return "call"
    if gemini.response_of(part) is not None or part.get("type") == "tool_call_response":
        return "result"
    return None


def _has_substance(message: Mapping[str, Any]) -> bool:
    """Something is left that a provider would read as the message's own: text, a call, an
    image. Thinking, reasoning and cache points alone are not: they travel with calls."""
    if message.get("tool_calls"):
        return True
    content = message.get("content")
    if isinstance(content, str):
        return bool(content.strip())
    if isinstance(content, list) and any(map(_substantial, content)):
        return True
    parts = message.get("parts")
    return isinstance(parts, list) and any(map(_substantial, parts))


def _substantial(block: Any) -> bool:
    if not isinstance(block, Mapping):
        return True
    kind = block.get("type")
    if kind in anthropic.THINKING or kind == "reasoning" or block.get("thought") is True:
        return False
    if kind is None and ("reasoningContent" in block or "cachePoint" in block):
        return False
    if kind == "text":
        text = block.get("text", block.get("content"))
    elif kind is None and "text" in block:
        text = block["text"]
    else:
        return True  # an image, a document, a server tool block: the message's own
    return not isinstance(text, str) or bool(text.strip())


# -- what travels with a call ----------------------------------------------------------------


class _History:
    """The history's call positions and reasoning items, read once, when first needed."""

    def __init__(self, history: Sequence[Any]) -> None:
        self.messages = history
        self._called_at: dict[str, int] | None = None
        self._reasoning_at: dict[str, int] | None = None

    @property
    def called_at(self) -> dict[str, int]:
        if self._called_at is None:
            self._called_at = {}
            for position, message in enumerate(self.messages):
                info = _read(message)
                if info is not None and not info.positional:
                    for call_id in info.call_ids:
                        self._called_at.setdefault(call_id, position)
        return self._called_at

    def reasoning_at(self, item: Mapping[str, Any]) -> int | None:
        if self._reasoning_at is None:
            self._reasoning_at = {
                str(m["id"]): k
                for k, m in enumerate(self.messages)
                if _is_reasoning(m) and m.get("id")
            }
        if item.get("id") and str(item["id"]) in self._reasoning_at:
            return self._reasoning_at[str(item["id"])]
        return next((k for k, m in enumerate(self.messages) if _same_item(item, m)), None)

    def reasoning_before(self, position: int) -> int | None:
        """The reasoning item that preceded the call item at ``position`` in the model's
        output (through the call items of the same output), if any."""
        at = position - 1
        while at >= 0 and _is_call_item(self.messages[at]):
            at -= 1
        return at if at >= 0 and _is_reasoning(self.messages[at]) else None


def _same_item(first: Any, second: Any) -> bool:
    """The same Responses item: by id where the history's has one, else equal (``metadata``
    aside)."""
    if not isinstance(first, Mapping) or not isinstance(second, Mapping):
        return False
    if second.get("id"):
        return first.get("id") == second.get("id")
    return {k: v for k, v in first.items() if k != "metadata"} == {
        k: v for k, v in second.items() if k != "metadata"
    }


def _follows(item: Any, wanted: Any) -> bool:
    """``item`` is the history's ``wanted`` item (or calls what it calls)."""
    if _same_item(item, wanted):
        return True
    mine, theirs = _read(item), _read(wanted)
    return bool(mine and theirs and set(mine.call_ids) & set(theirs.call_ids))


def _fix_attachments(slots: list[_Slot], history: _History, found: list[Change]) -> bool:
    """Fix what breaks what travels with a call, everywhere in the view as it stands (each
    fix touches its own call run, so they are made in one pass); False when nothing does."""
    if not history.messages:
        return False
    unfollowed: list[int] = []
    restores: dict[int, int] = {}
    """Call run start -> the history position of the reasoning item put back before it."""
    orphaned: list[int] = []
    for index, slot in enumerate(slots):
        message = slot.message
        if _is_reasoning(message):
            source = history.reasoning_at(message)
            if source is None or source + 1 >= len(history.messages):
                continue
            after = slots[index + 1].message if index + 1 < len(slots) else None
            if not _follows(after, history.messages[source + 1]):
                unfollowed.append(index)
        elif _is_call_item(message) and slot.info is not None:
            source = history.called_at.get(slot.info.call_ids[0])
            wanted = None if source is None else history.reasoning_before(source)
            if wanted is None:
                continue
            start = index
            while start > 0 and _is_call_item(slots[start - 1].message):
                start -= 1
            if start > 0 and _same_item(slots[start - 1].message, history.messages[wanted]):
                continue
            if restores.get(start) == wanted:
                continue
            if start not in restores and _follows(
                slots[start].message, history.messages[wanted + 1]
            ):
                restores[start] = wanted
            else:
                orphaned.append(index)
    changes: list[Change] = []
    actions = [(i, "unfollowed") for i in unfollowed] + [(i, "orphaned") for i in orphaned]
    actions += [(start, "restore") for start in restores]
    for index, action in sorted(actions, reverse=True):  # from the end: nothing shifts
        slot = slots[index]
        if action == "restore":
            item = history.messages[restores[index]]
            slots.insert(index, _Slot(copy.deepcopy(item), slot.origin, _read(item)))
            ids = slot.info.call_ids if slot.info else ()
            changes.append(Change("restored", "reasoning", slot.origin, ids, _REASONING_WITH_CALL))
        elif action == "unfollowed":
            del slots[index]
            ids = (str(slot.message["id"]),) if slot.message.get("id") else ()
            changes.append(
                Change("dropped", "reasoning", slot.origin, ids, _REASONING_FOLLOWED, True)
            )
        else:
            call_id = slot.info.call_ids[0] if slot.info else ""
            drop = _Drop(index, "call", 0, call_id, _REASONING_WITH_CALL, False)
            _apply(slots, [drop], changes)
    found.extend(sorted(changes, key=lambda c: c.index))
    return bool(changes) or _restore_thinking(slots, history, found)


def _leading_thinking(message: Mapping[str, Any]) -> list[Any]:
    found = []
    for block in message.get("content") if isinstance(message.get("content"), list) else ():
        if not isinstance(block, Mapping) or block.get("type") not in anthropic.THINKING:
            break
        found.append(dict(block))
    return found


def _restore_thinking(slots: list[_Slot], history: _History, found: list[Change]) -> bool:
    """The Anthropic turn whose calls the last message answers starts with the thinking
    blocks it started with in the history: put them back if they are missing or changed."""
    if len(slots) < 2:
        return False
    last, caller = slots[-1], slots[-2]
    if last.info is None or last.info.shape != "anthropic" or not last.info.result_ids:
        return False
    if caller.info is None or not caller.info.call_ids:
        return False
    source = history.called_at.get(caller.info.call_ids[0])
    if source is None:
        return False
    wanted = _leading_thinking(history.messages[source])
    if not wanted or _leading_thinking(caller.message)[: len(wanted)] == wanted:
        return False
    content = caller.message["content"]
    rest = content[len(_leading_thinking(caller.message)) :]
    edited = dict(caller.message)
    edited["content"] = copy.deepcopy(history.messages[source]["content"][: len(wanted)]) + rest
    caller.message, caller.info = edited, _read(edited)
    found.append(Change("restored", "thinking", caller.origin, caller.info.call_ids, _THINKING))  # type: ignore[union-attr]
    return True
