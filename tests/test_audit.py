"""The truncation audit log: one entry per decision to leave messages out or shorten them."""

from __future__ import annotations

import json
from typing import Any

from ctxkit.messages import group_units, validate_history
from ctxkit.reference import ReferenceContextManager
from ctxkit.reference.audit import message_ranges
from tests.chat import call, reply, result, run, user

KEYS = {
    "at",
    "reason",
    "limits",
    "budget",
    "dropped",
    "summarized",
    "truncated",
    "tokens_before",
    "tokens_after",
    "history_messages",
}


SYSTEM = {"role": "system", "content": "You are a careful agent."}
BIG = "\n".join(f"row {i} of a long listing" for i in range(600))


def history(turns: int) -> list[dict[str, Any]]:
    messages = [SYSTEM]
    for t in range(turns):
        messages += [user(f"task {t}"), call(f"c{t}"), result(f"c{t}", BIG), reply(f"done {t}")]
    return messages


class Clock:
    def __init__(self) -> None:
        self.now = 5_000.0

    def __call__(self) -> float:
        return self.now


def test_a_compaction_records_one_entry_and_asking_again_none():
    clock = Clock()
    manager = ReferenceContextManager(max_tokens=6_000, clock=clock)
    messages = history(10)
    run(manager.set_messages(messages))
    view = run(manager.get_messages_for_request())
    (entry,) = manager.audit()
    assert set(entry) == KEYS
    assert json.loads(json.dumps(entry)) == entry  # plain JSON
    assert entry["at"] == 5_000.0
    assert entry["reason"] == "budget"
    assert entry["limits"] == []
    assert entry["budget"] == 6_000
    assert entry["summarized"] == []
    assert entry["history_messages"] == len(messages) == 41
    assert entry["tokens_after"] == manager.counter.count_messages(view)
    assert entry["tokens_before"] > 6_000 > entry["tokens_after"]
    # The oldest turns went whole; the outputs of the rest were shortened.
    ((start, stop),) = entry["dropped"]
    assert start == 1
    assert view[1] == messages[stop]
    kept_outputs = [i for i in range(stop, len(messages)) if messages[i]["role"] == "tool"]
    assert kept_outputs
    assert entry["truncated"] == kept_outputs
    run(manager.get_messages_for_request())
    run(manager.get_messages_for_request())
    assert len(manager.audit()) == 1


def test_each_budget_has_its_own_decision():
    manager = ReferenceContextManager(max_tokens=6_000)
    run(manager.set_messages(history(10)))
    run(manager.get_messages_for_request())
    run(manager.get_messages_for_request(token_budget=9_000))
    run(manager.get_messages_for_request())
    assert [entry["budget"] for entry in manager.audit()] == [6_000, 9_000]


def test_summarized_units_are_recorded_as_summarized():
    manager = ReferenceContextManager(max_tokens=12_000, strategies=["truncate", "summarize"])
    messages = history(10)
    run(manager.set_messages(messages))
    view = run(manager.get_messages_for_request())
    (entry,) = manager.audit()
    assert entry["dropped"] == []
    assert entry["truncated"] == []
    ((start, stop),) = entry["summarized"]
    assert (start, view[2]) == (1, messages[stop])  # view[1] is the summary


def test_a_later_compaction_records_only_what_it_newly_decided():
    manager = ReferenceContextManager(max_tokens=6_000, strategies=["truncate"])
    messages = history(6)
    run(manager.set_messages(messages))
    run(manager.get_messages_for_request())
    for t in range(6, 30):
        for message in (user(f"task {t}"), call(f"c{t}"), result(f"c{t}", BIG)):
            run(manager.add_message(message))
        run(manager.get_messages_for_request())
        if len(manager.audit()) > 1:
            break
    first, second = manager.audit()[:2]

    def indices(entry: dict[str, Any]) -> set[int]:
        return {i for start, stop in entry["dropped"] for i in range(start, stop)}

    assert indices(first)
    assert indices(second)
    assert not indices(first) & indices(second)
    assert second["history_messages"] > first["history_messages"]


def test_ranges_are_merged_where_they_touch_and_in_order():
    messages = [SYSTEM, user("a"), call("x"), result("x", "1"), reply("b"), user("c")]
    units = group_units(validate_history(messages))
    assert message_ranges(units, [4, 2, 1, 3]) == [[1, 6]]
    assert message_ranges(units, [4, 2]) == [[2, 4], [5, 6]]
    assert message_ranges(units, [1, 3]) == [[1, 2], [4, 5]]
    assert message_ranges(units, []) == []


def test_retention_entries_name_their_limits():
    clock = Clock()
    manager = ReferenceContextManager(retain_seconds=30, retain_bytes=100_000, clock=clock)
    run(manager.add_message(SYSTEM))
    for t in range(3):
        run(manager.add_message(user(f"task {t}")))
        run(manager.add_message(reply(f"done {t}")))
        clock.now += 20
    run(manager.get_messages_for_request())
    (entry,) = manager.audit()
    assert entry["reason"] == "retention"
    assert entry["limits"] == ["time"]
    assert entry["dropped"] == [[1, 5]]  # turns 0 and 1 arrived at 5000 and 5020: now is 5060
    assert entry["truncated"] == []
    assert entry["at"] == 5_060.0


def test_audit_returns_copies():
    manager = ReferenceContextManager(max_tokens=6_000)
    run(manager.set_messages(history(10)))
    run(manager.get_messages_for_request())
    manager.audit()[0]["dropped"].append([0, 1])
    assert [0, 1] not in manager.audit()[0]["dropped"]


def test_audit_entries_survive_a_restart(tmp_path):
    path = tmp_path / "c.jsonl"
    manager = ReferenceContextManager(
        storage_path=path, max_tokens=6_000, retain_messages=30, fsync="never"
    )
    for message in history(10):
        run(manager.add_message(message))
    run(manager.get_messages_for_request())
    run(manager.get_messages_for_request(token_budget=5_000))
    entries = manager.audit()
    assert [e["reason"] for e in entries] == ["retention", "budget", "retention", "budget"]
    manager.close()
    reopened = ReferenceContextManager(storage_path=path, max_tokens=6_000, retain_messages=30)
    try:
        assert reopened.audit() == entries
    finally:
        reopened.close()
