"""The JSON Lines event stream (what ``ctxkit inspect`` tails) and the bus's promise that no
subscriber can hurt the manager: a full disk, a closed stream or a raising subscriber cost the
agent a log line, never a request."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxkit import events
from ctxkit.events import Event
from ctxkit.reference import ReferenceContextManager
from ctxkit.telemetry import instrument
from ctxkit.telemetry.stream import SCHEMA_VERSION, EventStream, encode_event
from tests.telemetry_cases import MARKER, Recorder, drive, marked_conversation
from tests.zoo.history import SetMessagesAppends

"""Put in the conversation; a summary carries it, so its presence in a line means text."""


def manager(**overrides: Any) -> ReferenceContextManager:
    """A summarizing manager with a small budget, so a short conversation compacts."""
    options: dict[str, Any] = {
        "max_tokens": 4_000,
        "strategies": ["truncate_outputs", "truncate", "summarize"],
        "conversation_id": "conv-stream-test",
    }
    return ReferenceContextManager(**(options | overrides))


conversation = marked_conversation


def plain_views(messages: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """What a manager with nothing subscribed returns: the baseline a subscriber must not move."""
    return asyncio.run(drive(manager(), messages))


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- the format ---------------------------------------------------------------------------------


def test_one_json_line_per_event_with_version_time_name_and_data(tmp_path: Path):
    """The inspector and any jq pipeline parse this; the envelope must never vary."""
    target = manager()
    recorder = Recorder(target.bus)
    path = tmp_path / "deep" / "dir" / "events.jsonl"  # the directory is created
    with EventStream(path) as stream:
        target.bus.subscribe(stream)
        asyncio.run(drive(target, conversation(40)))
        target.bus.flush()
        assert stream.written == len(recorder.events)
        assert stream.dropped == 0
    lines = read_lines(path)
    assert len(lines) == len(recorder.events) > 40  # views and compactions
    for line, event in zip(lines, recorder.events, strict=True):
        assert set(line) == {"v", "ts", "event", "data"}
        assert line["v"] == SCHEMA_VERSION
        assert line["event"] == event.name
        assert line["ts"] == pytest.approx(event.time, abs=1e-6)
        if event.name != events.INCLUDE:
            assert line["data"] == json.loads(json.dumps(dict(event.data)))
    names = {line["event"] for line in lines}
    assert {events.VIEW, events.PRE_COMPACT, events.POST_COMPACT, events.INCLUDE} <= names


def test_each_event_is_readable_while_the_writer_is_open(tmp_path: Path):
    """``ctxkit inspect`` tails the file live: every event must be on disk, whole, as soon as it
    is delivered, not when the writer closes."""
    path = tmp_path / "events.jsonl"
    target = manager()
    recorder = Recorder(target.bus)
    stream = EventStream(path)
    target.bus.subscribe(stream)
    try:
        with path.open(encoding="utf-8") as reader:

            async def tail() -> None:
                seen = 0
                for message in conversation(30):
                    await target.add_message(message)
                    await target.get_messages_for_request()
                    target.bus.flush()
                    chunk = reader.read()
                    assert chunk.endswith("\n"), "a line must be written whole"
                    new = [json.loads(line) for line in chunk.splitlines()]
                    assert [n["event"] for n in new] == [e.name for e in recorder.events[seen:]]
                    seen = len(recorder.events)

            asyncio.run(tail())
    finally:
        stream.close()


@pytest.mark.parametrize("include_text", [False, True])
def test_summary_text_is_written_only_when_asked(tmp_path: Path, include_text: bool):
    """A summary holds what users and tools said: by default only its length is written."""
    path = tmp_path / "events.jsonl"
    target = manager()
    recorder = Recorder(target.bus)
    with EventStream(path, include_text=include_text) as stream:
        target.bus.subscribe(stream)
        asyncio.run(drive(target, conversation()))
        target.bus.flush()
    summaries = [d["content"] for d in recorder.of(events.INCLUDE)]
    assert any(MARKER in text for text in summaries)
    included = [line["data"] for line in read_lines(path) if line["event"] == events.INCLUDE]
    assert len(included) == len(summaries)
    for data, text in zip(included, summaries, strict=True):
        assert data["source"] == "summary"
        if include_text:
            assert data["content"] == text
        else:
            assert "content" not in data
            assert data["content_chars"] == len(text)
    assert (MARKER in path.read_text(encoding="utf-8")) is include_text


@pytest.mark.parametrize("include_text", [False, True])
def test_violation_messages_are_text_too(tmp_path: Path, include_text: bool):
    """An invariant violation's message quotes the messages it compares (here a user's
    password): like a summary, it is written only when asked, its length otherwise."""
    path = tmp_path / "events.jsonl"
    target = instrument(SetMessagesAppends(), check_invariants=True, max_tokens=50_000)
    recorder = Recorder(target.bus)
    with EventStream(path, include_text=include_text) as stream:
        target.bus.subscribe(stream)

        async def session() -> None:
            await target.add_message({"role": "user", "content": f"{MARKER} password hunter2"})
            await target.get_messages_for_request()
            await target.set_messages([{"role": "user", "content": "start again"}])

        asyncio.run(session())
        target.bus.flush()
    messages = [d["message"] for d in recorder.of(events.INVARIANT_VIOLATION)]
    assert any(MARKER in m for m in messages)
    lines = read_lines(path)
    written = [line["data"] for line in lines if line["event"] == events.INVARIANT_VIOLATION]
    assert [d["property"] for d in written] == ["lifecycle"]
    for data, message in zip(written, messages, strict=True):
        if include_text:
            assert data["message"] == message
        else:
            assert "message" not in data
            assert data["message_chars"] == len(message)
    assert (MARKER in path.read_text(encoding="utf-8")) is include_text


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(
    data=st.dictionaries(st.text(), json_values, max_size=6),
    content=st.none() | st.text() | st.just(42),
    message=st.none() | st.text(),
    name=st.text(min_size=1),
    when=st.floats(0, 4e9),
    include_text=st.booleans(),
)
def test_any_event_encodes_to_exactly_one_line_that_decodes_back(
    data: dict[str, Any],
    content: Any,
    message: str | None,
    name: str,
    when: float,
    include_text: bool,
):
    """Whatever text a payload holds (newlines, U+2028, quotes), an event is one line, so a
    reader splitting on any line break never sees half an event."""
    if content is not None:
        data = data | {"content": content}
    if message is not None:
        data = data | {"message": message}
    line = encode_event(Event(name, data, when), include_text=include_text)
    assert len(line.splitlines()) == 1
    assert line == line.strip()
    decoded = json.loads(line)
    expected = dict(data)
    for key in ("content", "message"):
        if not include_text and key in expected:
            original = expected.pop(key)
            expected[f"{key}_chars"] = len(original) if isinstance(original, str) else None
    assert decoded == {"v": SCHEMA_VERSION, "ts": round(when, 6), "event": name, "data": expected}
    assert math.isclose(decoded["ts"], when, abs_tol=1e-6)


# -- failures cost the manager nothing ----------------------------------------------------------


def test_a_full_disk_drops_events_warns_once_and_the_manager_goes_on(
    caplog: pytest.LogCaptureFixture,
):
    """/dev/full fails every write with ENOSPC, as a full disk does: requests must return the
    same views, the loss must be counted, and the log must not get a line per event."""
    messages = conversation(40)
    target = manager()
    recorder = Recorder(target.bus)
    stream = EventStream("/dev/full")
    target.bus.subscribe(stream)
    with caplog.at_level(logging.WARNING, logger="ctxkit.telemetry.stream"):
        views = asyncio.run(drive(target, messages))
        target.bus.flush()
    stream.close()
    assert views == plain_views(messages)
    assert stream.dropped == len(recorder.events) > 40
    assert stream.written == 0
    assert target.bus.failures == 0  # the stream handled it; nothing reached the bus
    warnings = [r for r in caplog.records if r.name == "ctxkit.telemetry.stream"]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    (warning,) = warnings
    assert warning.levelno == logging.WARNING
    assert "/dev/full" in warning.getMessage()
    assert "No space left" in warning.getMessage()


def test_after_close_events_are_ignored(tmp_path: Path):
    """A closed stream must neither write nor raise (nor reopen the file behind the user)."""
    path = tmp_path / "events.jsonl"
    target = manager()
    stream = EventStream(path)
    target.bus.subscribe(stream)
    messages = conversation(30)
    asyncio.run(drive(target, messages[:10]))
    target.bus.flush()
    stream.close()
    before, written = path.read_bytes(), stream.written
    assert written > 0
    path.unlink()
    asyncio.run(drive(target, messages[10:]))
    target.bus.flush()
    assert not path.exists()
    assert stream.written == written
    assert stream.dropped == 0
    assert target.bus.failures == 0
    assert before.count(b"\n") == written


class Broken:
    """A subscriber that always raises; ``deferred`` as ctxkit's telemetry subscribers say it."""

    def __init__(self, deferred: bool) -> None:
        self.deferred = deferred
        self.calls = 0

    def __call__(self, event: Event) -> None:
        self.calls += 1
        raise RuntimeError(f"subscriber bug on {event.name}")


@pytest.mark.parametrize("deferred", [False, True], ids=["inline", "deferred"])
def test_a_raising_subscriber_costs_the_manager_only_a_logged_warning(
    deferred: bool, caplog: pytest.LogCaptureFixture
):
    """Telemetry code is not the agent's code: its bugs must not fail or change a request,
    whether it runs in the request or later on the event loop."""
    messages = conversation(30)
    target = manager()
    recorder = Recorder(target.bus)
    broken = Broken(deferred)
    target.bus.subscribe(broken)
    with caplog.at_level(logging.WARNING, logger="ctxkit.events"):
        views = asyncio.run(drive(target, messages))
        target.bus.flush()
    assert views == plain_views(messages)
    assert broken.calls == target.bus.failures == len(recorder.events) > 0
    warnings = [r for r in caplog.records if r.name == "ctxkit.events"]
    assert len(warnings) == len(recorder.events)
    assert all(r.exc_info and isinstance(r.exc_info[1], RuntimeError) for r in warnings)
