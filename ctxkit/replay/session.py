"""A replay from recording to figures: conversations read and keyed as the audit keys them,
then each replayed through each manager, in this process or in ``jobs`` worker processes."""

from __future__ import annotations

import atexit
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import astuple, dataclass, field
from typing import Any

from ctxkit.audit.auditor import Auditor
from ctxkit.audit.checks import fingerprint
from ctxkit.audit.files import Reading
from ctxkit.audit.in_flight import Ends
from ctxkit.audit.request import Problem
from ctxkit.replay.candidate import Candidate, CannotLoad, Limits
from ctxkit.replay.conversation import Conversation
from ctxkit.replay.run import RECORDED, ManagerSpec, Options, Replayed, replay_conversation
from ctxkit.replay.spool import Spool
from ctxkit.tokens import DEFAULT_ENCODING, TokenCounter

__all__ = [
    "Options",
    "Outcome",
    "Recording",
    "check_candidates",
    "close_candidates",
    "first_breaks",
    "replay",
    "shard_of",
]


@dataclass
class Outcome:
    """Every manager's figures, conversation by conversation (the same order for each)."""

    managers: list[ManagerSpec]
    results: Mapping[str, Sequence[Replayed] | Spool]
    conversations: int
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    shard: str | None = None
    """``I/N`` when one shard of the recording was replayed."""


class Recording:
    """A recording's conversations, keyed as ``ctxkit audit`` keys them, each given once its
    last request has been read.

    The files are read twice: first (when made) to learn where each conversation ends (noted
    on disk, then one bit a request: :class:`~ctxkit.audit.in_flight.Ends`, as the audit
    notes them), then (when iterated) to rebuild each one and let it go at its end. What is
    held is the conversations in flight, whatever the recording's length, plus what keys a
    request without a recorded key. ``shard``: ``(index, count)``, only the conversations of
    that shard (:func:`shard_of`, 0-based index)."""

    def __init__(
        self,
        paths: Sequence[str],
        form: str = "auto",
        windows: Mapping[str, int] | None = None,
        *,
        shard: tuple[int, int] | None = None,
        advance: Callable[[str, int], None] | None = None,
    ) -> None:
        self.paths, self.form, self.windows = list(paths), form, dict(windows or {})
        self.shard = shard
        read = Reading(self.paths, form, advance)
        first = Auditor(windows=self.windows)
        self._ends = Ends()
        for request in read:
            key, _ = first.key_of(request)
            request.messages = []
            self._ends.saw(key)
        self.problems, self.notes = read.problems, sorted(read.notes)
        self.requests = first.requests
        self.conversations = self._ends.close(self._wanted)

    def _wanted(self, key: str) -> bool:
        return self.shard is None or shard_of(key, self.shard[1]) == self.shard[0]

    def __iter__(self) -> Iterator[Conversation]:
        building: dict[str, Conversation] = {}
        second = Auditor(windows=self.windows)
        for request in Reading(self.paths, self.form):
            prints = [fingerprint(m) for m in request.messages]
            key, keyed_by = second.key_of(request, prints)
            if self._wanted(key):
                conversation = building.get(key)
                if conversation is None:
                    conversation = building[key] = Conversation(key, keyed_by)
                conversation.add(request, prints)
                if second.requests - 1 in self._ends:
                    yield building.pop(key)
            request.messages = []
        yield from building.values()  # none, unless the files changed between the readings


def shard_of(key: str, shards: int) -> int:
    """The shard a conversation belongs to (0-based): a hash of its key that every machine
    computes alike (Python's own ``hash`` of a string differs between processes)."""
    import zlib

    return zlib.crc32(key.encode("utf-8")) % shards


def replay(
    conversations: Iterable[Conversation],
    managers: Sequence[ManagerSpec],
    options: Options,
    *,
    jobs: int = 1,
    total: int = 0,
    progress: Callable[[int], None] | None = None,
    spooled: bool = False,
) -> tuple[dict[str, Any], dict[str, tuple[Conversation, int]]]:
    """Each conversation through each manager, as the conversations come; ``jobs`` > 1
    replays them in that many worker processes (conversations are independent), in batches
    sized from ``total`` (how many will come), at most two batches a worker in flight.
    Returns each manager's figures, in the order the conversations came (a list of
    :class:`Replayed`; ``spooled``: a :class:`Spool` of their JSON objects, so that a long
    recording's figures are not all held), and for each candidate the first conversation
    where it broke a required property and the request where it did (to show the view it
    sent there: :func:`first_breaks`). ``progress`` is told each batch done."""
    results: dict[str, Any] = {spec.name: Spool() if spooled else [] for spec in managers}
    firsts: dict[str, tuple[Conversation, int]] = {}

    def take(batch: Sequence[Conversation], replayed: list[list[Replayed]]) -> None:
        for conversation, figures in zip(batch, replayed, strict=True):
            for spec, one in zip(managers, figures, strict=True):
                results[spec.name].append(one.as_json() if spooled else one)
                broke = next((f.request for f in one.findings if f.level == "required"), None)
                if broke is not None and spec.target != RECORDED and spec.name not in firsts:
                    firsts[spec.name] = (conversation, broke)
        if progress is not None:
            progress(len(batch))

    if jobs <= 1:
        for conversation in conversations:
            take([conversation], _some([conversation], managers, options))
        return results, firsts
    import multiprocessing
    from collections import deque

    # spawned, not forked: a fork copies the locks of the parent's threads (tiktoken's among
    # them) in whatever state they are, and a worker can wait on one forever
    spawn = multiprocessing.get_context("spawn")
    size = max(1, total // (jobs * CHUNKS_PER_JOB))
    pending: deque[tuple[list[Conversation], Any]] = deque()
    with ProcessPoolExecutor(max_workers=jobs, mp_context=spawn) as pool:
        batch: list[Conversation] = []
        for conversation in [*conversations, None]:
            if conversation is not None:
                batch.append(conversation)
            if batch and (len(batch) >= size or conversation is None):
                pending.append((batch, pool.submit(_some, batch, managers, options)))
                batch = []
            while pending and (len(pending) > 2 * jobs or conversation is None):
                done, future = pending.popleft()
                take(done, future.result())
    return results, firsts


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
    return [
        replay_conversation(
            conversation,
            spec,
            counter=counter,
            options=options,
            candidate=candidate_of(spec, options.limits),
        )
        for spec in managers
    ]


_CANDIDATES: dict[str, Candidate] = {}
"""This process's worker for each candidate (by what builds it): one serves every
conversation."""


def candidate_of(spec: ManagerSpec, limits: Limits) -> Candidate | None:
    """The worker that holds ``spec``'s manager in this process (None for ``recorded``)."""
    if spec.target == RECORDED:
        return None
    key = json.dumps([spec.target, spec.config, spec.form, list(astuple(limits))], default=repr)
    found = _CANDIDATES.get(key)
    if found is None:
        if not _CANDIDATES:
            atexit.register(close_candidates)
        found = _CANDIDATES[key] = Candidate(spec.target, dict(spec.config), spec.form, limits)
    return found


def check_candidates(managers: Sequence[ManagerSpec], limits: Limits) -> None:
    """Load and build every candidate once before any replay: :class:`CannotLoad` names the
    first that cannot be (a typo in a TARGET or ``--config`` is the user's, said at once)."""
    for spec in managers:
        candidate = candidate_of(spec, limits)
        if candidate is not None:
            try:
                candidate.check()
            except CannotLoad as exc:
                raise CannotLoad(f"--manager {spec.target}: {exc}") from None


def close_candidates() -> None:
    """End this process's candidate workers (each closes its last manager first)."""
    while _CANDIDATES:
        _, candidate = _CANDIDATES.popitem()
        candidate.close()


_COUNTER: TokenCounter | None = None


def _counter() -> TokenCounter:
    """One token counter per process: its caches serve every conversation it replays."""
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = TokenCounter(DEFAULT_ENCODING)
    return _COUNTER


def first_breaks(
    firsts: Mapping[str, tuple[Conversation, int]],
    managers: Sequence[ManagerSpec],
    options: Options,
) -> dict[tuple[str, str], tuple[int, list[Any]]]:
    """For each candidate that broke a required property, the exact view it would have sent
    at its first break: ``(manager, conversation key) -> (request, view)``. The conversation
    (``firsts``, from :func:`replay`) is replayed again through that manager alone, keeping
    its views (a manager is expected to answer the same history the same way; one that does
    not shows its second answer)."""
    from dataclasses import replace

    found: dict[tuple[str, str], tuple[int, list[Any]]] = {}
    for spec in managers:
        if spec.name not in firsts:
            continue
        conversation, request = firsts[spec.name]
        (again,) = _one(conversation, [spec], replace(options, keep_views=True))
        if again.views is not None and request < len(again.views):
            found[(spec.name, conversation.key)] = (request, again.views[request])
    return found
