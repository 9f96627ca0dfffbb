"""The event bus: inline and deferred delivery, order, context, failures, bounded backlog."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from ctxkit.events import Event, EventBus

CURRENT = contextvars.ContextVar("current", default="none")


class Deferred:
    deferred = True

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __call__(self, event: Event) -> None:
        self.seen.append((event.name, CURRENT.get()))


def test_deferred_subscribers_run_when_the_caller_yields_in_order_and_in_its_context():
    bus = EventBus()
    deferred = Deferred()
    inline: list[str] = []
    bus.subscribe(deferred)
    bus.subscribe(lambda event: inline.append(event.name))

    async def run() -> list[tuple[str, str]]:
        CURRENT.set("first")
        await bus.publish("a", {})
        CURRENT.set("second")
        await bus.publish("b", {})
        assert inline == ["a", "b"], "inline subscribers run in the request"
        assert deferred.seen == [], "deferred ones wait for the caller to yield"
        await asyncio.sleep(0)
        return list(deferred.seen)

    assert asyncio.run(run()) == [("a", "first"), ("b", "second")]


def test_flush_delivers_at_once_and_events_are_not_lost_when_the_loop_ends():
    bus = EventBus()
    deferred = Deferred()
    bus.subscribe(deferred)

    async def publish_and_return() -> None:
        await bus.publish("last", {})

    asyncio.run(publish_and_return())
    assert [name for name, _ in deferred.seen] == ["last"]

    async def publish_and_flush() -> list[str]:
        await bus.publish("now", {})
        bus.flush()
        return [name for name, _ in deferred.seen]

    assert asyncio.run(publish_and_flush()) == ["last", "now"]


def test_a_backlog_is_delivered_by_the_publisher_so_memory_stays_bounded(monkeypatch):
    monkeypatch.setattr(EventBus, "MAX_PENDING", 5)
    bus = EventBus()
    deferred = Deferred()
    bus.subscribe(deferred)

    async def never_yield() -> int:
        for number in range(12):
            await bus.publish(str(number), {})
        return len(deferred.seen)

    assert asyncio.run(never_yield()) == 10  # two full batches delivered without yielding
    assert len(deferred.seen) == 12


def test_a_raising_subscriber_is_counted_and_the_rest_still_run(caplog):
    bus = EventBus()
    deferred = Deferred()

    def broken(event: Event) -> None:
        raise RuntimeError("boom")

    bus.subscribe(broken)
    bus.subscribe(broken, deferred=True)
    bus.subscribe(deferred)

    async def run() -> None:
        await bus.publish("x", {})
        await asyncio.sleep(0)

    asyncio.run(run())
    assert bus.failures == 2
    assert deferred.seen == [("x", "none")]
    assert "boom" in caplog.text


def test_unsubscribe_and_async_subscribers():
    bus = EventBus()
    deferred = Deferred()
    remove = bus.subscribe(deferred)
    remove()

    async def handler(event: Event) -> None: ...

    with pytest.raises(TypeError, match="async"):
        bus.subscribe(handler, deferred=True)

    async def run() -> None:
        await bus.publish("x", {})
        await asyncio.sleep(0)

    asyncio.run(run())
    assert deferred.seen == []
