"""The guard: instrument(manager, on_violation="log" | "raise" | "repair"), and the repair it
uses (ctxkit.shapes.repair), in every shape, against the suite's own checks."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from ctxkit import events
from ctxkit.conformance.judge.invariants import check_attachments, check_tool_pairs
from ctxkit.conformance.judge.parts import is_result
from ctxkit.conformance.search.conversations import SHAPES, RoundTemplate, conversation_plans
from ctxkit.shapes import group_units, validate_history
from ctxkit.shapes.repair import repair
from ctxkit.telemetry import PrometheusMetrics, ViewRefused, guard, instrument
from tests.telemetry_cases import Recorder
from tests.zoo.forms import LimitSession, keep_last_messages
from tests.zoo.shapes import DropsReasoning, DropsThinking


def _broken(history: Sequence[Any], view: Sequence[Any]) -> list[Any]:
    return check_tool_pairs(view) + check_attachments(history, view)


# -- broken views in every shape ---------------------------------------------------------------

_THINKING = ("thinking", "redacted_thinking")


@st.composite
def broken_views(draw: st.DrawFn) -> tuple[str, list[Any], list[Any]]:
    """A history in one shape (cut where an agent asks for a view: often right after a
    round's results), and a view of it a careless manager could return: messages left out,
    single calls, results and blocks left out, a message repeated, two swapped, thinking
    and reasoning stripped."""
    shape = draw(st.sampled_from(SHAPES))
    history = draw(conversation_plans()).messages((shape,))
    assume(history)  # a plan of no turns is its system prompt alone, which some shapes leave out
    rounds = [i + 1 for i, m in enumerate(history) if is_result(m)]
    if rounds and draw(st.booleans()):
        history = history[: draw(st.sampled_from(rounds))]
    else:
        history = history[: draw(st.integers(1, len(history)))]
    kept = draw(st.lists(st.booleans(), min_size=len(history), max_size=len(history)))
    view = [copy.deepcopy(m) for m, keep in zip(history, kept, strict=True) if keep]
    for message in view:
        if draw(st.integers(0, 4)) == 0:
            for key in ("tool_calls", "content", "parts"):
                if isinstance(message.get(key), list) and message[key]:
                    del message[key][draw(st.integers(0, len(message[key]) - 1))]
                    break
    if draw(st.integers(0, 3)) == 0:  # a manager that saves tokens on what it cannot read
        view = [m for m in view if m.get("type") != "reasoning"]
        for message in view:
            if isinstance(message.get("content"), list):
                message["content"] = [
                    b for b in message["content"] if b.get("type") not in _THINKING
                ]
    if view and draw(st.integers(0, 5)) == 0:
        at = draw(st.integers(0, len(view) - 1))
        view.insert(at, copy.deepcopy(view[at]))
    if len(view) > 1 and draw(st.integers(0, 5)) == 0:
        at = draw(st.integers(0, len(view) - 2))
        view[at], view[at + 1] = view[at + 1], view[at]
    return shape, history, view


# -- what a repair may take away ---------------------------------------------------------------

_CALL_ITEMS = {"function_call", "custom_tool_call", "computer_call", "shell_call"}
_TOOL_BLOCKS = {"tool_use", "tool_result", "server_tool_use", "mcp_tool_use", "tool_call"}
_TOOL_KEYS = ("toolUse", "toolResult", "functionCall", "functionResponse")


def _tool_part(item: Any) -> bool:
    """A call or a result inside a message (a Chat Completions tool call, a block, a part)."""
    if not isinstance(item, dict):
        return False
    kind = str(item.get("type"))
    if "function" in item and "id" in item:
        return True
    if kind in _TOOL_BLOCKS or kind == "tool_call_response" or kind.endswith("_tool_result"):
        return True
    return any(key in item for key in _TOOL_KEYS)


def _whole_part(message: dict[str, Any]) -> bool:
    """A message that is one call or result itself."""
    kind = str(message.get("type"))
    return (
        kind in _CALL_ITEMS
        or kind.endswith("_output")
        or (message.get("role") == "tool" and "parts" not in message)
    )


def _nothing(item: Any) -> bool:
    """What is left of a message that had only calls and results: thinking, reasoning."""
    if not isinstance(item, dict):
        return False
    if item.get("type") in (*_THINKING, "reasoning") or "reasoningContent" in item:
        return True
    text = item.get("text", item.get("content") if item.get("type") == "text" else None)
    return isinstance(text, str) and not text.strip() and len(item) <= 2


def _droppable(message: dict[str, Any]) -> int | None:
    """The tool parts of a message a repair may drop whole (None if it may not): a call or a
    result itself, a reasoning item (0), or a message of nothing but calls and results."""
    if _whole_part(message):
        return 1
    if message.get("type") == "reasoning":
        return 0
    if isinstance(message.get("content"), str) and message["content"].strip():
        return None
    items = [
        item
        for key in ("tool_calls", "content", "parts")
        if isinstance(message.get(key), list)
        for item in message[key]
    ]
    parts = sum(map(_tool_part, items))
    if parts == 0 or not all(_tool_part(i) or _nothing(i) for i in items):
        return None
    return parts


def _empty(message: dict[str, Any]) -> bool:
    """Nothing of the message's own is left: no text, no block or part but thinking."""
    if message.get("tool_calls") or (
        isinstance(message.get("content"), str) and message["content"].strip()
    ):
        return False
    return all(
        _nothing(item)
        for key in ("content", "parts")
        if isinstance(message.get(key), list)
        for item in message[key]
    )


def _leading(blocks: Any) -> list[Any]:
    found = []
    for block in blocks if isinstance(blocks, list) else ():
        if not isinstance(block, dict) or block.get("type") not in _THINKING:
            break
        found.append(block)
    return found


def _minus(kept: dict[str, Any], sent: dict[str, Any], restored: list[Any] | None) -> Any:
    """The positions of the parts ``sent`` lacks of ``kept`` (``(key, position)`` each), if
    ``sent`` is ``kept`` with nothing but calls and results taken away (and, where
    ``restored`` is given, with those thinking blocks put back first); else None."""
    if set(kept) - {"tool_calls"} != set(sent) - {"tool_calls"}:
        return None
    removed = []
    for key, value in kept.items():
        if key not in ("tool_calls", "content", "parts") or not isinstance(value, list):
            if sent.get(key) != value:
                return None
            continue
        mine, theirs = list(value), list(sent.get(key) or [])
        if key == "content" and restored is not None and _leading(theirs) != _leading(mine):
            if _leading(theirs) != restored:
                return None
            theirs = theirs[len(restored) :]
            mine = mine[len(_leading(mine)) :]
            removed.append(("thinking", 0))
        at = 0
        for position, item in enumerate(mine):
            if at < len(theirs) and theirs[at] == item:
                at += 1
            elif _tool_part(item):
                removed.append((key, position))
            else:
                return None
        if at != len(theirs):
            return None
    return removed


def _thinking_of(history: Sequence[Any]) -> dict[str, list[Any]]:
    """Each Anthropic call id's turn's leading thinking blocks, as the history has them."""
    found: dict[str, list[Any]] = {}
    for message in history:
        for block in message.get("content") if isinstance(message.get("content"), list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_use":
                found.setdefault(block["id"], _leading(message["content"]))
    return found


Plan = list[tuple[int, int | None, list[Any]]]
"""For each broken message: its index, where it went in the repaired view (None: dropped),
and the parts taken from it (``(key, position)``)."""


def _removal(
    broken: list[Any], sent: list[Any], history: Sequence[Any]
) -> tuple[Plan, int, int, int]:
    """How ``sent`` comes from ``broken`` with the fewest changes: the plan, the tool parts
    dropped, reasoning items dropped and attachments put back. Fails the test where ``sent``
    comes from ``broken`` in no such way: a message changed, moved or added, a part taken
    that is not a call or result."""
    thinking = _thinking_of(history)
    memo: dict[tuple[int, int], Any] = {}

    def best(i: int, j: int) -> Any:
        """(changes, plan, parts, reasoning, restored) for broken[i:] onto sent[j:]."""
        if (i, j) in memo:
            return memo[i, j]
        found = None

        def offer(cost: int, rest: Any, step: Any, counts: tuple[int, int, int]) -> None:
            nonlocal found
            if rest is None:
                return
            total = (
                cost + rest[0],
                step + rest[1],
                *(a + b for a, b in zip(counts, rest[2:], strict=True)),
            )
            if found is None or total[0] < found[0]:
                found = total

        if i == len(broken) and j == len(sent):
            found = (0, [], 0, 0, 0)
        if i < len(broken) and j < len(sent):
            message, kept = broken[i], sent[j]
            if message == kept:
                offer(0, best(i + 1, j + 1), [(i, j, [])], (0, 0, 0))
            else:
                calls = (
                    [b["id"] for b in kept.get("content") or () if _tool_use(b)]
                    if isinstance(kept.get("content"), list)
                    else []
                )
                removed = _minus(message, kept, thinking.get(calls[0]) if calls else None)
                if removed and not _empty(kept):  # a repair never keeps a message it emptied
                    taken = [r for r in removed if r[0] != "thinking"]
                    back = len(removed) - len(taken)
                    offer(len(removed), best(i + 1, j + 1), [(i, j, taken)], (len(taken), 0, back))
        if (
            j + 1 < len(sent)
            and sent[j].get("type") == "reasoning"
            and sent[j] in history
            and sent[j + 1].get("type") in _CALL_ITEMS
        ):  # the history's reasoning item, put back before its call
            offer(1, best(i, j + 1), [], (0, 0, 1))
        if i < len(broken):
            gone = _droppable(broken[i])
            if gone is not None:
                reasoning = int(broken[i].get("type") == "reasoning")
                offer(max(1, gone), best(i + 1, j), [(i, None, [])], (gone, reasoning, 0))
        memo[i, j] = found
        return found

    found = best(0, 0)
    assert found is not None, "the repaired view is not the broken view minus calls and results"
    _, plan, parts, reasoning, restored = found
    return plan, parts, reasoning, restored


def _tool_use(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_use"


def _with_one_back(broken: list[Any], sent: list[Any], plan: Plan) -> list[list[Any]]:
    """For each part the repair took away, the repaired view with that one part back."""
    views = []
    for index, where, taken in plan:
        message = broken[index]
        if where is None:
            before = next((w for i, w, _ in plan if i > index and w is not None), len(sent))
            views.append([*sent[:before], message, *sent[before:]])
            continue
        for key, position in taken:
            back = copy.deepcopy(sent[where])
            others = [p for k, p in taken if k == key and p != position]
            back[key] = [x for p, x in enumerate(message[key]) if p not in others]
            views.append([*sent[:where], back, *sent[where + 1 :]])
    return views


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=broken_views())
def test_a_repaired_view_passes_and_is_the_broken_view_minus_what_had_to_go(case):
    """Every shape: what comes back passes the suite's pair and attachment checks, and is the
    broken view with calls and results taken away (and the history's thinking or reasoning
    put back where a kept call needs it), nothing moved, nothing else changed; putting back
    any one part it took breaks the view again. The view given is not touched."""
    _, history, view = case
    given_view = copy.deepcopy(view)
    fixed = repair(view, history)
    assert view == given_view
    assert _broken(history, fixed.view) == []
    plan, parts, reasoning, restored = _removal(view, fixed.view, history)
    dropped = [c for c in fixed.changes if c.action == "dropped"]
    assert parts == sum(c.what in ("call", "result") for c in dropped)
    assert reasoning == sum(c.what == "reasoning" for c in dropped)
    assert restored == sum(c.action == "restored" for c in fixed.changes)
    assert all(c.rule or (c.action, c.what) == ("dropped", "call") for c in fixed.changes)
    if _broken(history, view):
        assert fixed.changes
    else:
        assert fixed.view is view
        assert fixed.changes == ()
    if not restored and not reasoning:  # smallest: each part taken had to go
        for candidate in _with_one_back(view, fixed.view, plan):
            assert _broken(history, candidate), candidate


@settings(max_examples=150, deadline=None)
@given(plan=conversation_plans(), shape=st.sampled_from(SHAPES), data=st.data())
def test_a_valid_view_comes_back_as_it_was(plan, shape, data):
    """Any choice of whole units is a valid view: the repair returns that very list."""
    history = plan.messages((shape,))
    units = group_units(validate_history(history))
    keep = data.draw(st.lists(st.booleans(), min_size=len(units), max_size=len(units)))
    view = [m for u, k in zip(units, keep, strict=True) if k for m in history[u.start : u.stop]]
    fixed = repair(view, history)
    assert fixed.view is view
    assert fixed.changes == ()
    assert fixed.rules == ()


# -- the guard in instrument() ----------------------------------------------------------------


class Fixed:
    """A manager whose view is whatever the test sets, whatever was added."""

    def __init__(self, view: list[Any]) -> None:
        self.view = view
        self.history: list[Any] = []

    async def add_message(self, message: dict[str, Any]) -> None:
        self.history.append(copy.deepcopy(message))

    async def get_messages_for_request(self, token_budget: int | None = None) -> list[Any]:
        return copy.deepcopy(self.view)

    async def get_messages(self) -> list[Any]:
        return copy.deepcopy(self.history)


async def _ask(mode: str, history: list[Any], view: list[Any]) -> tuple[Any, Recorder]:
    wrapped = instrument(
        Fixed(view),
        on_violation=mode,
        check_invariants=["tool_pair_integrity"],
        conversation_id="c",
    )
    recorder = Recorder(wrapped.bus)
    for message in history:
        await wrapped.add_message(message)
    try:
        return await wrapped.get_messages_for_request(100_000), recorder
    except ViewRefused as refused:
        return refused, recorder


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=broken_views())
def test_raise_refuses_exactly_what_log_reports_and_repair_sends_the_repair(case):
    _, history, view = case
    logging.disable(logging.WARNING)
    try:
        logged, seen = asyncio.run(_ask("log", history, view))
        raised, refusing = asyncio.run(_ask("raise", history, view))
        sent, repairing = asyncio.run(_ask("repair", history, view))
    finally:
        logging.disable(logging.NOTSET)
    reported = seen.of(events.INVARIANT_VIOLATION)
    assert logged == view
    assert isinstance(raised, ViewRefused) == bool(reported)
    assert refusing.of(events.INVARIANT_VIOLATION) == reported
    assert repairing.of(events.INVARIANT_VIOLATION) == reported
    assert sent == repair(view, history).view
    assert _broken(history, sent) == []
    if reported:
        assert raised.violations == tuple(_broken(history, view))
        assert raised.rule == next((v.rule for v in raised.violations if v.rule), "")
        assert set(raised.ids) == {i for v in reported for i in v["ids"]}
        assert [g["action"] for g in refusing.of(events.VIEW_GUARDED)] == ["refused"]
        assert [g["action"] for g in repairing.of(events.VIEW_GUARDED)] == ["repaired"]
        assert refusing.of(events.VIEW) == []  # no view went out
    else:
        assert raised == view
        assert repairing.of(events.VIEW_GUARDED) == []


# -- real managers that break pairs, wrapped in each mode --------------------------------------


class DropsOldest:
    """A deliberately broken manager: keeps the newest ``keep`` messages by count, whatever
    pair the cut splits."""

    def __init__(self, keep: int = 4) -> None:
        self.keep = keep
        self.history: list[dict[str, Any]] = []

    async def add_message(self, message: dict[str, Any]) -> None:
        self.history.append(copy.deepcopy(message))

    async def get_messages_for_request(self, token_budget: int | None = None) -> list[Any]:
        return copy.deepcopy(self.history[-self.keep :])

    async def get_messages(self) -> list[Any]:
        return copy.deepcopy(self.history)

    async def set_messages(self, messages: list[dict[str, Any]]) -> None:
        self.history = copy.deepcopy(messages)

    async def clear(self) -> None:
        self.history = []


def _agent_steps() -> list[list[dict[str, Any]]]:
    """What an agent adds before each view: a turn, then rounds of parallel calls with all
    their results. Keeping the newest 4 messages splits the third and the last round."""
    import itertools

    ids = itertools.count(1)
    return [
        [
            {"role": "system", "content": "You are a careful agent."},
            {"role": "user", "content": "fix the test"},
        ],
        RoundTemplate("openai", ("ok", "1 failed"), (0, 1)).messages(ids),
        RoundTemplate("openai", ("done",), (0,)).messages(ids),
        [{"role": "assistant", "content": "Fixed."}, {"role": "user", "content": "and the docs"}],
        RoundTemplate("openai", ("a", "b", "c"), (2, 0, 1)).messages(ids),
        RoundTemplate("openai", ("ok",), (0,)).messages(ids),
    ]


FORMS = {
    "contract": lambda: DropsOldest(keep=4),
    "function": lambda: lambda messages: keep_last_messages(messages)[-4:],
    "session": lambda: LimitSession(limit=4),
}


async def _drive(wrapped: Any, registry: CollectorRegistry) -> list[Any]:
    """Add each step and ask for a view after it; the view counter is read right after every
    call, before anything yields."""
    views = []
    for step in _agent_steps():
        for message in step:
            await wrapped.add_message(message)
        views.append(await wrapped.get_messages_for_request(8_000))
        assert registry.get_sample_value("ctxkit_views_total") == len(views)
    return views


@pytest.mark.parametrize("form", list(FORMS))
def test_a_manager_that_splits_pairs_wrapped_in_each_mode(form, caplog):
    messages = [m for step in _agent_steps() for m in step]
    plain_views = asyncio.run(_plain(FORMS[form]()))
    assert any(_broken(messages, v) for v in plain_views), "the manager must split a pair"

    # log: the views as the manager made them, each break published and counted
    registry = CollectorRegistry()
    logged = instrument(FORMS[form](), check_invariants=True)
    logged.bus.subscribe(PrometheusMetrics(registry))
    recorder = Recorder(logged.bus)
    with caplog.at_level(logging.WARNING, logger="ctxkit.telemetry.instrument"):
        assert asyncio.run(_drive(logged, registry)) == plain_views
    assert recorder.of(events.INVARIANT_VIOLATION)
    assert recorder.of(events.VIEW_GUARDED) == []

    # repair: no view breaks a rule; each is the manager's minus what had to go
    registry = CollectorRegistry()
    repaired = instrument(FORMS[form](), on_violation="repair")
    repaired.bus.subscribe(PrometheusMetrics(registry))
    recorder = Recorder(repaired.bus)
    views = asyncio.run(_drive(repaired, registry))
    for plain, view in zip(plain_views, views, strict=True):
        assert _broken(messages, view) == []
        if not _broken(messages, plain):
            assert view == plain
        else:
            _removal(plain, view, messages)
    guarded = recorder.of(events.VIEW_GUARDED)
    assert len(guarded) == repaired.repaired == sum(bool(_broken(messages, v)) for v in plain_views)
    assert repaired.refused == 0
    assert {g["action"] for g in guarded} == {"repaired"}
    assert {r for g in guarded for r in g["rules"]} == {"openai.result_has_call"}
    assert all(g["dropped_results"] >= 1 and g["changes"] for g in guarded)
    counted = registry.get_sample_value(
        "ctxkit_invariant_violations_total", {"property": "tool_pair_integrity"}
    )
    assert counted == len(recorder.of(events.INVARIANT_VIOLATION)) > 0

    # raise: the first broken view is refused, naming the rule, the error and the call ids;
    # the manager keeps what it had
    refusing = instrument(FORMS[form](), on_violation="raise")

    async def ask() -> ViewRefused | None:
        try:
            await refusing.get_messages_for_request(8_000)
        except ViewRefused as refused:
            return refused
        return None

    async def until_refused() -> ViewRefused:
        added: list[Any] = []
        for step in _agent_steps():
            for message in step:
                await refusing.add_message(message)
            added += step
            first = await ask()
            if first is None:
                continue
            assert await refusing.get_messages() == added  # the manager kept it all
            again = await ask()  # asked again, the same answer
            assert again is not None
            assert again.violations == first.violations
            return first
        raise AssertionError("no view was refused")

    refused = asyncio.run(until_refused())
    assert refusing.refused == 2
    assert refused.rule == "openai.result_has_call"
    assert "messages with role 'tool' must be a response" in refused.provider_error
    assert refused.ids
    assert refused.ids[0] in str(refused)
    assert "openai.result_has_call" in str(refused)
    assert isinstance(refused, RuntimeError)


async def _plain(manager: Any) -> list[Any]:
    from ctxkit.forms import as_manager

    manager = as_manager(manager)
    views = []
    for step in _agent_steps():
        for message in step:
            await manager.add_message(message)
        views.append(await manager.get_messages_for_request(8_000))
    return views


# -- what travels with a call ------------------------------------------------------------------


def _round(shape: str) -> list[dict[str, Any]]:
    import itertools

    calls = RoundTemplate(shape, ("ok", "2 passed"), (1, 0), extras=True)
    return [{"role": "user", "content": "go"}, *calls.messages(itertools.count(1))]


@pytest.mark.parametrize(
    ("manager", "shape", "rule", "what"),
    [
        (DropsReasoning, "responses", "responses.reasoning_with_call", "reasoning"),
        (DropsThinking, "anthropic", "anthropic.thinking_kept", "thinking"),
    ],
)
def test_stripped_thinking_and_reasoning_are_put_back_from_the_history(manager, shape, rule, what):
    """A manager that strips what a call needs gets the history's own copy put back, so the
    model keeps its newest tool results (dropping the calls instead would take them away on
    every turn)."""
    history = _round(shape)
    wrapped = instrument(manager(), on_violation="repair")
    recorder = Recorder(wrapped.bus)

    async def run() -> list[Any]:
        for message in history:
            await wrapped.add_message(message)
        return await wrapped.get_messages_for_request(100_000)

    view = asyncio.run(run())
    assert view == history
    (guarded,) = recorder.of(events.VIEW_GUARDED)
    assert guarded["rules"] == [rule]
    assert guarded["restored"] == 1
    assert [c["what"] for c in guarded["changes"]] == [what]
    assert guarded["dropped_calls"] == guarded["dropped_results"] == 0


def test_a_reasoning_item_whose_call_is_gone_is_dropped_and_a_call_without_its_is_kept():
    history = _round("responses")
    reasoning, _, second, *outputs = history[1:]
    without_calls = [history[0], reasoning]  # the calls and their outputs were cut
    fixed = repair(without_calls, history)
    assert fixed.view == [history[0]]
    assert [(c.action, c.what, c.rule) for c in fixed.changes] == [
        ("dropped", "reasoning", "responses.reasoning_followed")
    ]
    # the second call alone cannot take the reasoning item back (it must precede the first)
    only_second = [
        history[0],
        second,
        next(o for o in outputs if o["call_id"] == second["call_id"]),
    ]
    fixed = repair(only_second, history)
    assert fixed.view == [history[0]]
    assert {c.rule for c in fixed.changes} == {
        "responses.reasoning_with_call",
        "responses.output_has_call",
    }


# -- parts of a message ------------------------------------------------------------------------


def test_only_the_unanswered_calls_of_a_message_go_and_an_empty_message_goes_whole():
    call = {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            for n in (1, 2, 3)
        ],
    }
    answer = {"role": "tool", "tool_call_id": "c2", "content": "ok"}
    fixed = repair([{"role": "user", "content": "go"}, call, answer])
    assert fixed.view[1]["tool_calls"] == [call["tool_calls"][1]]
    assert fixed.view[1]["content"] == "Let me look."
    assert [(c.what, c.ids, c.rule, c.whole) for c in fixed.changes] == [
        ("call", ("c1",), "openai.calls_answered", False),
        ("call", ("c3",), "openai.calls_answered", False),
    ]
    silent = dict(call, content=None)
    fixed = repair([{"role": "user", "content": "go"}, silent])
    assert fixed.view == [{"role": "user", "content": "go"}]
    assert all(c.whole for c in fixed.changes)
    # nothing given was changed
    assert len(call["tool_calls"]) == 3


def test_gemini_calls_without_ids_keep_the_longest_run_that_pairs_by_position_and_name():
    model = {
        "role": "model",
        "parts": [
            {"functionCall": {"name": "read", "args": {}}},
            {"functionCall": {"name": "grep", "args": {}}},
            {"functionCall": {"name": "ls", "args": {}}},
        ],
    }
    answer = {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "grep", "response": {"output": "x"}}},
            {"functionResponse": {"name": "ls", "response": {"output": "y"}}},
        ],
    }
    view = [{"role": "user", "parts": [{"text": "go"}]}, model, answer]
    fixed = repair(view)
    assert fixed.view[1]["parts"] == model["parts"][1:]
    assert fixed.view[2] == answer
    assert check_tool_pairs(fixed.view) == []
    assert [c.rule for c in fixed.changes] == ["gemini.responses_match_calls"]


def test_an_anthropic_server_result_without_its_call_is_dropped_from_its_message():
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Searching."},
            {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": []},
        ],
    }
    fixed = repair([{"role": "user", "content": "go"}, message])
    assert fixed.view[1]["content"] == [{"type": "text", "text": "Searching."}]
    assert [(c.what, c.rule) for c in fixed.changes] == [
        ("result", "anthropic.server_result_in_message")
    ]


# -- choices and errors ------------------------------------------------------------------------


def test_an_unknown_mode_names_the_choices():
    with pytest.raises(ValueError, match=r"'log', 'raise', 'repair'.*'fix'"):
        instrument(DropsOldest(), on_violation="fix")  # type: ignore[arg-type]


def test_a_guard_checks_pairs_with_check_invariants_unset_and_only_pairs():
    wrapped = instrument(DropsOldest(keep=1), on_violation="raise")
    assert wrapped.checked == {"tool_pair_integrity"}
    assert instrument(DropsOldest()).checked == frozenset()

    async def run() -> None:
        for message in _agent_steps()[1]:
            await wrapped.add_message(message)
        await wrapped.get_messages_for_request(1_000)

    with pytest.raises(ViewRefused, match=r"openai\.result_has_call"):
        asyncio.run(run())


def test_a_view_that_is_not_a_list_of_messages_is_refused_without_a_rule():
    wrapped = instrument(
        Fixed([{"role": "user", "content": "hi"}, "not a message"]), on_violation="repair"
    )

    async def run() -> None:
        await wrapped.add_message({"role": "user", "content": "hi"})
        await wrapped.get_messages_for_request(1_000)

    with pytest.raises(ViewRefused, match="could not repair") as refused:
        asyncio.run(run())
    assert refused.value.rule == ""
    assert refused.value.provider_error == ""


# -- guard(): the same guard for a function, returned as a function --------------------------


def _histories() -> list[list[dict[str, Any]]]:
    """The history after each step of the agent above: what a framework passes a function."""
    histories, history = [], []
    for step in _agent_steps():
        history = history + step
        histories.append(copy.deepcopy(history))
    return histories


def _last_four(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A deliberately broken trimmer: the newest four messages, whatever pair that splits."""
    return copy.deepcopy(messages[-4:])


async def _last_four_async(
    messages: list[dict[str, Any]], token_budget: int | None = None
) -> list[dict[str, Any]]:
    await asyncio.sleep(0)
    return _last_four(messages)


def test_a_guarded_function_repairs_what_it_splits_and_counts_it_in_prometheus():
    registry = CollectorRegistry()
    safe = guard(_last_four, on_violation="repair")
    safe.bus.subscribe(PrometheusMetrics(registry))
    recorder = Recorder(safe.bus)
    assert safe.__name__ == "_last_four"
    assert safe.__wrapped__ is _last_four
    broken = 0
    for history in _histories():
        plain, view = _last_four(history), safe(history)
        assert _broken(history, view) == []
        if _broken(history, plain):
            broken += 1
            _removal(plain, view, history)
        else:
            assert view == plain
    assert broken >= 2
    assert safe.repaired == broken
    assert safe.refused == 0
    assert registry.get_sample_value("ctxkit_views_guarded_total", {"action": "repaired"}) == broken
    assert len(recorder.of(events.VIEW_GUARDED)) == broken
    assert {v["conversation_id"] for v in recorder.of(events.INVARIANT_VIOLATION)} == {
        safe.conversation_id
    }


def test_a_guarded_async_function_refuses_naming_the_rule_and_keeps_its_arguments():
    safe = guard(_last_four_async, on_violation="raise", conversation_id="c-1")
    histories = _histories()
    clean = next(h for h in histories if not _broken(h, _last_four(h)))
    assert asyncio.run(safe(clean, token_budget=100)) == _last_four(clean)
    split = next(h for h in histories if _broken(h, _last_four(h)))
    with pytest.raises(ViewRefused) as refused:
        asyncio.run(safe(split, token_budget=100))
    assert refused.value.rule == "openai.result_has_call"
    assert refused.value.ids
    assert "_last_four_async" in str(refused.value)
    assert safe.refused == 1


def test_a_sync_guard_inside_a_running_event_loop_delivers_its_events_before_returning():
    """LangGraph and pydantic-ai call sync hooks from async code: the guard must not need
    the loop (no asyncio.run inside it) and its sync subscribers see the events at once."""
    safe = guard(_last_four, on_violation="log")
    recorder = Recorder(safe.bus)
    split = next(h for h in _histories() if _broken(h, _last_four(h)))

    async def agent() -> list[dict[str, Any]]:
        view = safe(split)
        assert recorder.of(events.INVARIANT_VIOLATION), "delivered before the call returned"
        return view

    assert asyncio.run(agent()) == _last_four(split)  # log: the view as the function made it
    assert recorder.of(events.VIEW_GUARDED) == []


def test_guard_refuses_a_wrong_mode_or_something_that_is_not_a_function():
    with pytest.raises(ValueError, match="'log', 'raise', 'repair'"):
        guard(_last_four, on_violation="fix")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="function over the message list"):
        guard([1, 2])  # type: ignore[arg-type]
