"""A replay from recording to figures: conversations read and keyed as the audit keys them,
then each replayed through each manager, in this process or in ``jobs`` worker processes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ctxkit.audit.auditor import Auditor
from ctxkit.audit.request import Problem, Request
from ctxkit.replay.conversation import Conversation
from ctxkit.replay.run import RECORDED, ManagerSpec, Options, Replayed, replay_conversation
from ctxkit.tokens import DEFAULT_ENCODING, TokenCounter

__all__ = ["Options", "Outcome", "conversations_of", "first_breaks", "replay", "shard_of"]


@dataclass
class Outcome:
    """Every manager's figures, conversation by conversation (the same order for each)."""

    managers: list[ManagerSpec]
    results: dict[str, list[Replayed]]
    conversations: list[Conversation]
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    shard: str | None = None
    """``I/N`` when one shard of the recording was replayed."""


def conversations_of(
    requests: Iterable[Request], windows: Mapping[str, int] | None = None
) -> list[Conversation]:
    """The recording's conversations, keyed as ``ctxkit audit`` keys them, in the order they
    began."""
    found: dict[str, Conversation] = {}

    def rebuild(audit: Any, request: Request, _: Any) -> None:
        conversation = found.get(audit.key)
        if conversation is None:
            conversation = found[audit.key] = Conversation(audit.key, audit.keyed_by)
        conversation.add(request)

    auditor = Auditor(windows=windows, listener=rebuild, check=False)
    for request in requests:
        auditor.add(request)
        request.messages = []
    return list(found.values())


def shard_of(key: str, shards: int) -> int:
    """The shard a conversation belongs to: a hash of its key that every machine computes
    alike (Python's own ``hash`` of a string differs between processes)."""
    import zlib

    return zlib.crc32(key.encode("utf-8")) % shards


def replay(
    conversations: Sequence[Conversation],
    managers: Sequence[ManagerSpec],
    options: Options,
    *,
    jobs: int = 1,
    progress: Callable[[int], None] | None = None,
) -> dict[str, list[Replayed]]:
    """Each conversation through each manager. ``jobs`` > 1 replays conversations in that many
    worker processes (conversations are independent); ``progress`` is told each one done."""
    results: dict[str, list[Replayed]] = {spec.name: [] for spec in managers}

    def take(chunk: list[list[Replayed]]) -> None:
        for replayed in chunk:
            for spec, one in zip(managers, replayed, strict=True):
                results[spec.name].append(one)
        if progress is not None:
            progress(len(chunk))

    if jobs <= 1 or len(conversations) < 2:
        for conversation in conversations:
            take(_some([conversation], managers, options))
        return results
    import multiprocessing

    # spawned, not forked: a fork copies the locks of the parent's threads (tiktoken's among
    # them) in whatever state they are, and a worker can wait on one forever
    spawn = multiprocessing.get_context("spawn")
    size = max(1, len(conversations) // (jobs * CHUNKS_PER_JOB))
    chunks = [conversations[at : at + size] for at in range(0, len(conversations), size)]
    with ProcessPoolExecutor(max_workers=jobs, mp_context=spawn) as pool:
        for chunk in [pool.submit(_some, list(c), managers, options) for c in chunks]:
            take(chunk.result())
    return results


CHUNKS_PER_JOB = 8
"""Conversations go to workers in about this many batches each: few enough that sending them
costs little, many enough that a slow batch does not leave the other workers idle."""


def _some(
    conversations: Sequence[Conversation], managers: Sequence[ManagerSpec], options: Options
) -> list[list[Replayed]]:
    """Conversations through every manager, one after another (what a worker runs)."""
    return [_one(conversation, managers, options) for conversation in conversations]


def _one(
    conversation: Conversation, managers: Sequence[ManagerSpec], options: Options
) -> list[Replayed]:
    """One conversation through every manager."""
    counter = _counter()

    async def every() -> list[Replayed]:
        return [
            await replay_conversation(
                conversation,
                spec,
                counter=counter,
                options=options,
            )
            for spec in managers
        ]

    return asyncio.run(every())


_COUNTER: TokenCounter | None = None


def _counter() -> TokenCounter:
    """One token counter per process: its caches serve every conversation it replays."""
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = TokenCounter(DEFAULT_ENCODING)
    return _COUNTER


def first_breaks(
    conversations: Sequence[Conversation],
    managers: Sequence[ManagerSpec],
    results: Mapping[str, Sequence[Replayed]],
    options: Options,
) -> dict[tuple[str, str], tuple[int, list[Any]]]:
    """For each candidate with a required finding, the exact view it would have sent at its
    first one: ``(manager, conversation key) -> (request, view)``. The conversation is
    replayed again through that manager alone, keeping its views (a manager is expected to
    answer the same history the same way; one that does not shows its second answer)."""
    from dataclasses import replace

    found: dict[tuple[str, str], tuple[int, list[Any]]] = {}
    by_key = {c.key: c for c in conversations}
    for spec in managers:
        if spec.target == RECORDED:
            continue
        first = next(
            (
                (r.key, f.request)
                for r in results[spec.name]
                for f in r.findings
                if f.level == "required"
            ),
            None,
        )
        if first is None:
            continue
        key, request = first
        (again,) = _one(by_key[key], [spec], replace(options, keep_views=True))
        if again.views is not None and request < len(again.views):
            found[(spec.name, key)] = (request, again.views[request])
    return found
