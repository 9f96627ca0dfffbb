"""Behaviour of the reference manager, one decision at a time."""

from __future__ import annotations

import asyncio
import functools
import json
import re
from importlib.metadata import entry_points
from types import SimpleNamespace
from typing import Any

import pytest

from ctxkit import InvalidMessage, events
from ctxkit.conformance.judge.invariants import check_tool_pairs
from ctxkit.reference import (
    ConfigError,
    ContextBudgetExceeded,
    ReferenceContextManager,
    mount,
)
from ctxkit.reference.manager import COUNT_OFF_LOOP_BYTES, DEFAULT_MAX_MESSAGE_BYTES
from ctxkit.reference.strategies import SUMMARY_HEADER
from tests.chat import call, reply, result, run, user


def words(n: int, seed: str = "w") -> str:
    return " ".join(f"{seed}{i}" for i in range(n))


SYSTEM = {"role": "system", "content": "You are a careful agent."}


def long_history(turns: int) -> list[dict[str, Any]]:
    messages = [SYSTEM]
    for t in range(turns):
        messages += [user(f"task {t}: " + words(40)), call(f"c{t}"), result(f"c{t}", words(200))]
        messages.append(reply(f"done {t}"))
    return messages


class Recorder:
    def __init__(self, manager: ReferenceContextManager) -> None:
        self.events: list[events.Event] = []
        manager.bus.subscribe(self.events.append)

    def names(self) -> list[str]:
        return [e.name for e in self.events]

    def of(self, name: str) -> list[dict[str, Any]]:
        return [dict(e.data) for e in self.events if e.name == name]


# -- budget -----------------------------------------------------------------------------------


class Provider:
    def __init__(self, defaults: dict[str, Any], *, attribute: bool = True) -> None:
        self.defaults = defaults
        self.attribute = attribute

    def get_info(self) -> Any:
        if self.attribute:
            return SimpleNamespace(defaults=self.defaults)
        return {"defaults": self.defaults}


class AsyncProvider(Provider):
    async def get_info(self) -> Any:  # type: ignore[override]
        return SimpleNamespace(defaults=self.defaults)


async def budget_used(manager: ReferenceContextManager, **kwargs: Any) -> int:
    recorder = Recorder(manager)
    await manager.get_messages_for_request(**kwargs)
    return recorder.of(events.VIEW)[-1]["budget"]


@pytest.mark.parametrize("provider_class", [Provider, AsyncProvider])
def test_budget_comes_from_argument_then_provider_then_max_tokens(provider_class):
    manager = ReferenceContextManager(max_tokens=5_000, safety_margin=100)
    provider = provider_class({"context_window": 10_000, "max_output_tokens": 2_000})
    assert run(budget_used(manager, token_budget=777, provider=provider)) == 777
    assert run(budget_used(manager, provider=provider)) == 10_000 - 2_000 - 100
    assert run(budget_used(manager)) == 5_000
    assert run(budget_used(manager, provider=SimpleNamespace())) == 5_000


def test_provider_safety_margin_overrides_config_and_dict_info_works():
    manager = ReferenceContextManager(safety_margin=100)
    provider = Provider(
        {"context_window": 8_000, "max_output_tokens": 1_000, "safety_margin": 500},
        attribute=False,
    )
    assert run(budget_used(manager, provider=provider)) == 6_500


@pytest.mark.parametrize(
    ("budget", "error"), [(0, ValueError), (-5, ValueError), ("100", TypeError), (True, TypeError)]
)
def test_bad_token_budget_is_a_typed_error(budget, error):
    with pytest.raises(error, match="token_budget"):
        run(ReferenceContextManager().get_messages_for_request(token_budget=budget))


def test_provider_budget_that_is_not_positive_is_an_error():
    provider = Provider({"context_window": 1_000, "max_output_tokens": 1_000})
    with pytest.raises(ValueError, match="not a positive integer"):
        run(ReferenceContextManager().get_messages_for_request(provider=provider))


# -- compaction, hysteresis, events -------------------------------------------------------------


def test_no_compaction_below_threshold_returns_the_whole_history():
    manager = ReferenceContextManager(max_tokens=100_000)
    recorder = Recorder(manager)
    history = long_history(3)
    run(manager.set_messages(history))
    assert run(manager.get_messages_for_request()) == history
    assert events.PRE_COMPACT not in recorder.names()


def test_compaction_reports_pre_then_post_with_exact_counts():
    manager = ReferenceContextManager(max_tokens=3_000)
    recorder = Recorder(manager)
    run(manager.set_messages(long_history(20)))
    view = run(manager.get_messages_for_request())
    names = [n for n in recorder.names() if n.startswith("context:")]
    assert names == [events.PRE_COMPACT, events.POST_COMPACT]
    (pre,) = recorder.of(events.PRE_COMPACT)
    (post,) = recorder.of(events.POST_COMPACT)
    assert pre["message_count"] == 81
    assert pre["token_count"] > 3_000
    assert post["message_count"] == len(view)
    assert post["token_count"] == manager.counter.count_messages(view)
    assert post["token_count"] <= 0.5 * 3_000
    assert post["tokens_saved"] == pre["token_count"] - post["token_count"]
    assert post["units_dropped"] > 0
    assert post["strategy"] == "truncate_outputs+truncate"
    assert post["budget"] == 3_000
    assert isinstance(post["duration_s"], float)
    assert pre["conversation_id"] == post["conversation_id"] == manager.conversation_id


def test_between_compactions_the_view_grows_and_its_prefix_stays():
    manager = ReferenceContextManager(max_tokens=4_000)
    recorder = Recorder(manager)
    run(manager.set_messages(long_history(20)))
    first = run(manager.get_messages_for_request())
    compactions = len(recorder.of(events.POST_COMPACT))
    grown = first
    for t in range(40):
        run(manager.add_message(user(f"more {t} " + words(20))))
        run(manager.add_message(reply("fine")))
        view = run(manager.get_messages_for_request())
        if len(recorder.of(events.POST_COMPACT)) > compactions:
            break
        assert view[: len(grown)] == grown  # same prefix: prompt-cache friendly
        grown = view
    else:
        pytest.fail("the view never reached the threshold again")
    assert len(grown) > len(first)
    assert manager.counter.count_messages(grown) <= 0.7 * 4_000


def test_a_failing_subscriber_or_hook_never_breaks_a_request():
    manager = ReferenceContextManager(max_tokens=3_000)

    def broken(event: events.Event) -> None:
        raise RuntimeError("subscriber bug")

    manager.bus.subscribe(broken)
    run(manager.set_messages(long_history(20)))
    view = run(manager.get_messages_for_request())
    assert check_tool_pairs(view) == []
    assert manager.bus.failures >= 3  # pre, post, view


# -- pins -------------------------------------------------------------------------------------


def test_system_messages_newest_user_and_newest_unit_stay():
    mid_system = {"role": "system", "content": "Reminder: plan mode."}
    history = [SYSTEM, *long_history(10)[1:], mid_system, user("the question that matters")]
    for t in range(12):
        history += [call(f"late{t}"), result(f"late{t}", words(150))]
    manager = ReferenceContextManager(max_tokens=2_500)
    run(manager.set_messages(history))
    view = run(manager.get_messages_for_request())
    assert view[0] == SYSTEM
    assert mid_system in view
    assert user("the question that matters") in view
    assert view[-2:] == history[-2:]
    assert check_tool_pairs(view) == []


def test_metadata_pin_keeps_an_old_message():
    pinned = {"role": "user", "content": "remember: deploy to eu-west", "metadata": {"pin": True}}
    history = [SYSTEM, pinned, reply("noted"), *long_history(20)[1:]]
    manager = ReferenceContextManager(max_tokens=3_000)
    run(manager.set_messages(history))
    view = run(manager.get_messages_for_request())
    assert pinned in view
    assert reply("noted") not in view


def test_pending_call_is_left_out_until_its_results_arrive():
    manager = ReferenceContextManager()
    run(manager.add_message(user("go")))
    run(manager.add_message(call("a", "b")))
    run(manager.add_message(result("a")))
    assert run(manager.get_messages_for_request()) == [user("go")]
    run(manager.add_message(result("b")))
    assert run(manager.get_messages_for_request()) == [
        user("go"),
        call("a", "b"),
        result("a"),
        result("b"),
    ]


def test_orphan_results_and_interrupted_calls_never_reach_a_view():
    history = [user("go"), result("ghost"), call("x"), user("stop!"), reply("ok")]
    manager = ReferenceContextManager()
    run(manager.set_messages(history))
    assert run(manager.get_messages_for_request()) == [user("go"), user("stop!"), reply("ok")]
    assert run(manager.get_messages()) == history


# -- strategies -------------------------------------------------------------------------------


def test_long_tool_outputs_are_shortened_in_the_view_only():
    big = "\n".join(f"row {i}" for i in range(2_000))
    history = [SYSTEM, user("scan"), call("s"), result("s", big), reply("scanned")]
    history += [user("next " + words(300)), reply("ok")]
    manager = ReferenceContextManager(max_tokens=4_000)
    run(manager.set_messages(history))
    view = run(manager.get_messages_for_request())
    (shortened,) = [m for m in view if m.get("tool_call_id") == "s"]
    assert "[... omitted 1744 of 2000 lines ...]" in shortened["content"]
    assert shortened["content"].startswith("row 0\n")
    assert shortened["content"].endswith("row 1999")
    assert run(manager.get_messages())[3]["content"] == big


def test_summary_goes_after_system_messages_and_is_made_once_per_compaction():
    calls: list[list[dict[str, Any]]] = []

    async def summarizer(messages: list[dict[str, Any]], *, max_tokens: int) -> str:
        assert max_tokens == 300  # a tenth of the budget, under summary_max_tokens
        calls.append(messages)
        return f"summary #{len(calls)} of {len(messages)} messages"

    manager = ReferenceContextManager(
        max_tokens=3_000, strategies=["truncate", "summarize"], summarizer=summarizer
    )
    recorder = Recorder(manager)
    run(manager.set_messages(long_history(20)))
    view = run(manager.get_messages_for_request())
    assert view[0] == SYSTEM
    assert view[1] == {
        "role": "user",
        "content": "summary #1 of " + str(len(calls[0])) + " messages",
    }
    assert run(manager.get_messages_for_request()) == view
    assert len(calls) == 1
    (include,) = recorder.of(events.INCLUDE)
    assert include["source"] == "summary"
    assert include["content"] == view[1]["content"]
    (post,) = recorder.of(events.POST_COMPACT)
    assert post["units_summarized"] == post["units_dropped"] > 0
    # The next compaction summarizes the earlier summary together with what it drops now.
    for t in range(60):
        run(manager.add_message(user(f"more {t} " + words(30))))
        run(manager.get_messages_for_request())
        if len(calls) == 2:
            break
    assert calls[1][0]["content"].startswith("summary #1")


def test_a_summary_that_would_not_fit_the_budget_is_not_used():
    """Found by ``ctxkit conformance --config '{"strategies": ["truncate_outputs", "truncate",
    "summarize"]}'``: a summary clipped to its 16-token floor took a view whose pinned unit
    alone filled the budget over it, and the request was refused."""
    history = []
    for call_id in ("call_1", "call_2"):
        asking = call(call_id)
        asking["tool_calls"][0]["function"]["arguments"] = '{"n": 0}'
        history += [asking, result(call_id, "")]
    manager = ReferenceContextManager(strategies=["truncate_outputs", "truncate", "summarize"])
    run(manager.set_messages(history))
    budget = manager.counter.count_messages(history[2:])
    assert budget == 21  # the summary (16 tokens at least) costs less than what it replaces
    assert run(manager.get_messages_for_request(token_budget=budget)) == history[2:]


def test_default_summarizer_is_extractive_and_clipped_to_a_tenth_of_small_budgets():
    manager = ReferenceContextManager(max_tokens=2_000, strategies=["truncate", "summarize"])
    run(manager.set_messages(long_history(30)))
    view = run(manager.get_messages_for_request())
    summary = view[1]["content"]
    assert summary.startswith(SUMMARY_HEADER)
    assert manager.counter.count_text(summary) <= 200
    summarized = [int(n) for n in re.findall(r"^- user asked: task (\d+):", summary, re.M)]
    kept = [
        int(n)
        for n in re.findall(r"^task (\d+):", "\n".join(str(m["content"]) for m in view), re.M)
    ]
    assert summarized
    assert kept
    assert max(summarized) + 1 == min(kept)  # the summary reaches up to what the view keeps
    assert 0 not in summarized  # with little room, the oldest lines go first


def test_importance_keeps_an_error_unit_over_plainer_ones_of_the_same_age():
    history = [SYSTEM, user("start")]
    for t in range(12):
        text = "Traceback (most recent call last):\nValueError: bad" if t == 2 else words(120)
        history += [call(f"c{t}"), result(f"c{t}", text)]
    history.append(reply("done"))
    manager = ReferenceContextManager(max_tokens=2_500, strategies=["importance"])
    run(manager.set_messages(history))
    view = run(manager.get_messages_for_request())
    kept_ids = {m["tool_call_id"] for m in view if m["role"] == "tool"}
    assert "c2" in kept_ids
    assert "c1" not in kept_ids
    assert check_tool_pairs(view) == []


# -- overflow ---------------------------------------------------------------------------------


def test_pinned_content_over_budget_raises_with_the_numbers():
    manager = ReferenceContextManager(max_tokens=50)
    recorder = Recorder(manager)
    run(manager.set_messages([SYSTEM, user(words(200))]))
    with pytest.raises(ContextBudgetExceeded) as caught:
        run(manager.get_messages_for_request())
    assert caught.value.budget == 50
    assert caught.value.tokens > 50
    assert "budget of 50" in str(caught.value)
    assert recorder.of(events.BUDGET_EXCEEDED)[0]["raised"] is True


def test_best_effort_returns_the_smallest_view_anyway():
    manager = ReferenceContextManager(max_tokens=50, on_overflow="best_effort")
    history = [SYSTEM, user("old"), reply("old reply"), user(words(200))]
    run(manager.set_messages(history))
    assert run(manager.get_messages_for_request()) == [SYSTEM, user(words(200))]


# -- contract ---------------------------------------------------------------------------------


def test_invalid_messages_are_rejected_and_change_nothing():
    manager = ReferenceContextManager()
    run(manager.add_message(user("hi")))
    run(manager.add_message(call("dup")))
    run(manager.add_message(result("dup")))
    before = run(manager.get_messages())
    with pytest.raises(InvalidMessage, match=r"message\[3\]\.role"):
        run(manager.add_message({"content": "no role"}))
    with pytest.raises(InvalidMessage, match="duplicate call id 'dup'"):
        run(manager.add_message(call("dup")))
    with pytest.raises(InvalidMessage, match=r"message\[1\]"):
        run(manager.set_messages([user("a"), "not a dict"]))
    with pytest.raises(TypeError, match="list of messages"):
        run(manager.set_messages("not a list"))
    assert run(manager.get_messages()) == before
    assert run(manager.get_messages_for_request()) == before


def test_set_messages_and_clear():
    manager = ReferenceContextManager()
    history = long_history(2)
    run(manager.set_messages(history))
    assert run(manager.get_messages()) == history
    run(manager.clear())
    assert run(manager.get_messages()) == []
    assert run(manager.get_messages_for_request()) == []
    run(manager.add_message(call("c0")))  # ids from the cleared history are free again
    assert run(manager.get_messages()) == [call("c0")]


def test_cl100k_encoding_counts_differently_but_exactly():
    text = "Déjà vu: 東京タワー is 333 m tall."
    o200k = ReferenceContextManager()
    cl100k = ReferenceContextManager(encoding="cl100k_base")
    assert o200k.counter.count_text(text) != cl100k.counter.count_text(text)
    assert cl100k.usage()["encoding"] == "cl100k_base"


# -- usage ------------------------------------------------------------------------------------


def test_usage_snapshot_is_json_and_counts_turns_left():
    manager = ReferenceContextManager(max_tokens=10_000)
    run(manager.add_message(SYSTEM))
    for t in range(3):
        run(manager.add_message(user(words(50, f"t{t}"))))
        run(manager.add_message(reply(words(50, f"r{t}"))))
        view = run(manager.get_messages_for_request())
        manager.record_usage(input_tokens=100 * (t + 1), output_tokens=60)
    snapshot = json.loads(json.dumps(manager.usage()))
    tokens = manager.counter.count_messages(view)
    assert snapshot["tokens"] == tokens
    assert snapshot["budget"] == 10_000
    assert snapshot["ratio"] == pytest.approx(tokens / 10_000)
    assert snapshot["compact_at_tokens"] == 7_000
    assert snapshot["hard_limit_tokens"] == 9_500
    assert snapshot["room_until_compaction"] == 7_000 - tokens
    breakdown = snapshot["breakdown"]
    assert breakdown["system"] + breakdown["user"] + breakdown["assistant"] == tokens - 3
    # The same two rows as the inspector's: room below the threshold, then the rest.
    assert (breakdown["room"], breakdown["reserved"]) == (7_000 - tokens, 3_000)
    turns = snapshot["turns"]
    assert turns["recorded"] == 3
    average = turns["average_tokens"]
    assert average > 0
    assert turns["left_before_compaction"] == int((7_000 - tokens) // average)
    assert turns["last_input_tokens"] == 300


def test_record_usage_rejects_nonsense():
    manager = ReferenceContextManager()
    with pytest.raises(ValueError, match="input_tokens"):
        manager.record_usage(-1, 5)
    with pytest.raises(ValueError, match="output_tokens"):
        manager.record_usage(5, "many")  # type: ignore[arg-type]


# -- configuration and mount ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"compact_threshold": 1.5}, "compact_threshold"),
        ({"target_ratio": 0.9, "compact_threshold": 0.7}, "must not exceed"),
        ({"strategies": ["drop_everything"]}, "unknown strategies"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"on_overflow": "ignore"}, "on_overflow"),
        ({"encoding": "p50k_base"}, "unknown encoding"),
        ({"max_tokns": 1000}, "unknown config keys"),
        ({"view_listing": "yes"}, "view_listing"),
    ],
)
def test_bad_config_is_rejected_with_the_key_named(config, fragment):
    with pytest.raises((ConfigError, RuntimeError), match=fragment):
        ReferenceContextManager.from_config(config)


class Hooks:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    async def emit(self, name: str, data: dict[str, Any]) -> None:
        self.seen.append((name, data))


class Coordinator:
    def __init__(self) -> None:
        self.hooks = Hooks()
        self.mounted: dict[str, Any] = {}

    async def mount(self, point: str, module: Any) -> None:
        self.mounted[point] = module


def test_mount_registers_the_manager_and_forwards_contract_events_to_hooks():
    coordinator = Coordinator()
    run(mount(coordinator, {"max_tokens": 3_000, "strategies": ["truncate", "summarize"]}))
    manager = coordinator.mounted["context"]
    assert isinstance(manager, ReferenceContextManager)
    assert manager.max_tokens == 3_000
    run(manager.set_messages(long_history(20)))
    run(manager.get_messages_for_request())
    names = [name for name, _ in coordinator.hooks.seen]
    assert names == [events.PRE_COMPACT, events.INCLUDE, events.POST_COMPACT]
    assert all(
        isinstance(data["message_count"], int)
        for name, data in coordinator.hooks.seen
        if name != events.INCLUDE
    )


def test_mount_is_registered_as_an_amplifier_module_entry_point():
    (entry,) = entry_points(group="amplifier.modules", name="ctxkit-reference")
    assert entry.load() is mount


def test_a_misspelt_option_names_the_options_and_the_likeliest_meant():
    with pytest.raises(TypeError, match="did you mean 'max_tokens'") as caught:
        ReferenceContextManager(max_token=5)
    assert "compact_threshold" in str(caught.value)  # the whole list, not a bare TypeError


# -- large messages (issue 14, item 9) and summarizers checked up front (item 12) -------------


def test_a_message_over_max_message_bytes_is_refused_and_nothing_is_stored():
    async def scenario() -> None:
        manager = ReferenceContextManager(max_message_bytes=1_000)
        # 1,000 bytes: "role", "user", "content" and 985 in two-byte characters
        await manager.add_message({"role": "user", "content": "é" * 492 + "x"})
        with pytest.raises(InvalidMessage, match=r"message\[1\]: holds 1,001 bytes .*1,000"):
            await manager.add_message({"role": "user", "content": "é" * 493})
        with pytest.raises(InvalidMessage, match=r"message\[0\]: holds"):
            await manager.set_messages([{"role": "tool", "tool_call_id": "x" * 1_001}])
        assert len(await manager.get_messages()) == 1
        assert manager.usage()["history_messages"] == 1

    run(scenario())
    assert ReferenceContextManager().max_message_bytes == DEFAULT_MAX_MESSAGE_BYTES == 16 << 20
    with pytest.raises(ConfigError, match="max_message_bytes must be an integer >= 1 or None"):
        ReferenceContextManager(max_message_bytes=0)
    assert ReferenceContextManager(max_message_bytes=None).max_message_bytes is None


def test_a_large_message_is_counted_off_the_loop_and_keeps_its_place():
    """A large tool output is counted in a thread while the loop serves others; messages
    added after it, without waiting for it, are still stored after it."""
    large = {"role": "user", "content": "word " * (COUNT_OFF_LOOP_BYTES // 5 + 1)}
    small = {"role": "user", "content": "after"}

    async def scenario() -> None:
        manager = ReferenceContextManager()
        exact = ReferenceContextManager().counter.message_cost(large).total
        await asyncio.gather(manager.add_message(large), manager.add_message(small))
        assert await manager.get_messages() == [large, small]
        assert (
            manager.usage()["history_tokens"] == exact + manager.counter.message_cost(small).total
        )

    run(scenario())


async def _async_summary(messages: list[dict[str, Any]], *, max_tokens: int) -> str:
    return "summary"


def _sync_summary(messages: list[dict[str, Any]], *, max_tokens: int) -> str:
    return "summary"


async def _no_max_tokens(messages: list[dict[str, Any]]) -> str:
    return "summary"


class _AsyncCallable:
    async def __call__(self, messages: list[dict[str, Any]], *, max_tokens: int) -> str:
        return "summary"


@pytest.mark.parametrize(
    ("summarizer", "problem"),
    [
        (_sync_summary, "must be an async function"),
        ("not callable", "must be an async callable"),
        (_no_max_tokens, r"cannot be called as \(messages, \*, max_tokens\)"),
    ],
)
def test_a_summarizer_that_could_not_work_is_refused_at_construction(summarizer, problem):
    with pytest.raises(ConfigError, match=problem):
        ReferenceContextManager(strategies=["summarize"], summarizer=summarizer)


@pytest.mark.parametrize(
    "summarizer", [_async_summary, _AsyncCallable(), functools.partial(_async_summary)]
)
def test_async_summarizers_of_every_kind_are_accepted(summarizer):
    ReferenceContextManager(strategies=["summarize"], summarizer=summarizer)
