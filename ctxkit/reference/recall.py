"""Recall: a conversation's semantic memory kept in step with its history, and the units a view
left out that the newest user message asks about again.

With ``recall`` configured, the reference manager stores each message it is given in a
:class:`~ctxkit.reference.memory.SemanticMemory` (its text, and for a call its ``name(args)``;
metadata ``conversation``, ``index``, ``unit`` and ``role``), for the roles ``memory_roles``
names. When a view has to leave units out, the newest user message's text is the query, and
a share of the budget brings back the best units it finds: whole units (a call with all its
results), above the threshold, in history order (see :meth:`Planner.choose_recalled
<ctxkit.reference.planner.Planner.choose_recalled>`).

The history is the source of truth; the memory follows it and can always be rebuilt from it:

* Writes never hold up ``add_message``: a writer task on the caller's event loop stores what
  was added since it last ran, on the memory's worker thread, once :data:`WRITE_EVERY`
  messages wait or :data:`FLUSH_SECONDS` passed since the last write (so a fast agent loop pays
  for one transaction per batch, not per message). A write that fails (a full disk) is logged
  once and tried again, in order, with the next message; nothing is skipped, so what is stored
  is always a prefix of the history.
* A view that recalls first waits for the memory to hold what was added before it (normally
  the last few messages, written while the model was answering), at most
  :data:`WAIT_SECONDS`; then it searches what is there.
* ``set_messages``, ``clear`` and ``restore`` make the memory forget the conversation and store
  its new history again. Opening a memory file that misses the history's newest messages (a
  crash came before the writer) finds where the stored prefix ends, by binary search (a few
  searches), and stores the rest in the background; :meth:`RecallMemory.rebuild` stores
  everything again on demand. A hit is used only when the message at its index still holds
  its text, so a stale item can never bring back the wrong message.
* A user turn is searched once: the units it finds are kept for the compactions that follow
  until the next user turn (the messages added meanwhile are in the view anyway).
* A failing embedder (its model, its endpoint) is logged once, and the memory searches and
  stores text only (FTS5) from then on; items stored meanwhile get their vectors when a
  manager next opens the memory with a working embedder.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
import weakref
from bisect import bisect_right
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any, Literal

from ctxkit.messages import MessageInfo, text_of
from ctxkit.reference.memory import EmbedderError, SemanticMemory
from ctxkit.reference.memory.embedders import Embedder
from ctxkit.reference.store import History
from ctxkit.reference.strategies import extractive_unit_summary

__all__ = [
    "DEFAULT_ROLES",
    "MEMORY_SUFFIX",
    "ROLES",
    "WAIT_SECONDS",
    "RecallMemory",
    "RecallSettings",
    "memory_path_for",
    "memory_text",
    "role_of",
]

log = logging.getLogger(__name__)

ROLES = ("system", "user", "assistant", "tool")
"""What ``memory_roles`` can name: ``tool`` is any message carrying tool results (a Chat
Completions ``tool`` message, an Anthropic ``user`` turn of ``tool_result`` blocks...)."""
DEFAULT_ROLES = ("user", "assistant", "tool")
"""Stored unless told otherwise: what the user said, what the model said and called, and what
the tools answered. System prompts are always in the view, so recalling them is pointless."""
MEMORY_SUFFIX = ".memory.sqlite"
"""A history file's memory is ``<history file>.memory.sqlite`` unless ``memory_path`` says."""
WRITE_BATCH = 256
"""Most messages stored per transaction (and per embedder call)."""
WRITE_EVERY = 32
"""The writer wakes once this many messages wait to be stored..."""
FLUSH_SECONDS = 1.0
"""... or this long after it last wrote, whichever comes first."""
WAIT_SECONDS = 5.0
"""How long a view that recalls waits for the memory to catch up with the history."""
HEAD_CHARS, TAIL_CHARS = 24_000, 8_000
"""Of a longer text, the memory keeps the start and the end (a long tool output's summary
line and its error are usually there)."""
_WORD = re.compile(r"[^\W_]")


@dataclass(frozen=True, slots=True)
class RecallSettings:
    """The ``recall`` options, checked by the manager."""

    share: float = 0.2
    """Most of the budget recalled units may take."""
    limit: int = 5
    """Most units one view recalls."""
    threshold: float = 0.7
    """Least score (in [0, 1]) a message must reach to bring its unit back."""
    roles: frozenset[str] = frozenset(DEFAULT_ROLES)
    """Which messages are stored (see :data:`ROLES`)."""


def memory_path_for(storage_path: str | os.PathLike[str]) -> Path:
    """Where a history file's memory lives by default: beside it."""
    path = Path(storage_path)
    return path.with_name(path.name + MEMORY_SUFFIX)


def role_of(info: MessageInfo) -> str:
    """A message's role as ``memory_roles`` names it (see :data:`ROLES`)."""
    if info.result_ids:
        return "tool"
    if info.role in ("system", "developer"):
        return "system"
    return "user" if info.role == "user" else "assistant"


async def memory_text(message: dict[str, Any], info: MessageInfo) -> str | None:
    """What the memory keeps of a message: its text, and ``called name(args)`` for its calls;
    None when it holds no word a search could find."""
    parts = [text_of(message).strip()]
    if info.call_ids:
        summary = await extractive_unit_summary([message], max_tokens=400)
        parts += [line for line in summary.splitlines() if line.startswith("called ")]
    text = "\n".join(part for part in parts if part)
    if len(text) > HEAD_CHARS + TAIL_CHARS:
        text = f"{text[:HEAD_CHARS]}\n…\n{text[-TAIL_CHARS:]}"
    return text if _WORD.search(text) else None


def newest_user_turn(history: History) -> int | None:
    """The index of the newest message with words of the user's own."""
    for index in range(len(history.infos) - 1, -1, -1):
        if history.infos[index].user_turn:
            return index
    return None


class RecallMemory:
    """A conversation's memory, written behind its history and searched for a view.

    ``path`` None keeps the memory in memory. Opening a file checks it (a damaged one raises
    :class:`~ctxkit.reference.memory.MemoryFileCorrupt`, leaving it as it was). ``memory``: one
    opened already, with SemanticMemory's methods (a database's: a store's recall memory).
    """

    def __init__(
        self,
        history: History,
        settings: RecallSettings,
        *,
        conversation_id: str,
        path: Path | None,
        embedder: Embedder | None,
        fsync: Literal["always", "never"],
        memory: Any = None,
    ) -> None:
        self.history = history
        self.settings = settings
        self.conversation_id = conversation_id
        existed = path is not None and path.exists() and path.stat().st_size > 0
        if memory is not None:  # opened elsewhere (a database's), and may hold the history
            existed = True
        else:
            memory = SemanticMemory(
                path, embedder, threshold=settings.threshold, fsync=fsync, background=True
            )
        self.memory = memory
        self.newest_user = newest_user_turn(history)
        """The query's index: the newest message with words of the user's own."""
        self._next = 0
        """The next history index to store: messages before it are in the memory."""
        self._check = existed and len(history) > 0
        """Whether the memory file may already hold the history (see :meth:`_holds_newest`)."""
        self._forget = False
        self._epoch = 0
        """Moves with every reset, so a write begun for an older history changes nothing."""
        self._writer: asyncio.Task[bool] | None = None
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._warned: set[str] = set()
        self._closed = False
        self.stored = 0
        """Messages stored since the last reset (for :meth:`rebuild`)."""
        self._last_error: Exception | None = None
        self._written = 0.0
        """When the writer last woke (``time.monotonic``)."""
        self._ranked: tuple[int, int, list[tuple[int, float]]] | None = None
        """The last search: (epoch, query index, units found)."""

    # -- following the history ---------------------------------------------------------------

    def added(self, index: int) -> None:
        """A message was added at ``index``: note a user turn, and have it written soon."""
        if self.history.infos[index].user_turn:
            self.newest_user = index
        if (
            len(self.history) - self._next >= WRITE_EVERY
            or time.monotonic() - self._written >= FLUSH_SECONDS
        ):
            self.kick()

    def reset(self) -> None:
        """The history was replaced, cleared or restored: forget it and store it again."""
        self._epoch += 1
        self._next, self._check, self._forget, self.stored = 0, False, True, 0
        self.newest_user = newest_user_turn(self.history)
        self.kick()

    def pending(self) -> bool:
        """Something the history holds is not in the memory yet."""
        return self._check or self._forget or self._next < len(self.history)

    def kick(self) -> None:
        """Make sure a writer runs on this event loop while there is something to write."""
        if self._closed or not self.pending():
            return
        loop = asyncio.get_running_loop()
        task = self._writer
        if task is not None and not task.done() and task.get_loop() is loop:
            return
        self._written = time.monotonic()
        self._writer = loop.create_task(self._write(), name="ctxkit-recall-writer")

    async def synced(self, seconds: float | None = None) -> bool:
        """Wait until the memory holds the whole history (True), a write fails or ``seconds``
        pass (False). The writer goes on either way."""
        loop = asyncio.get_running_loop()
        deadline = None if seconds is None else loop.time() + seconds
        while self.pending() and not self._closed:
            self.kick()
            task = self._writer
            assert task is not None
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return False
            try:
                ok = await asyncio.wait_for(asyncio.shield(task), left)
            except TimeoutError:
                return False
            if not ok:
                return False
        return not self.pending()

    async def rebuild(self) -> int:
        """Forget what the memory holds of this conversation and store its history again;
        returns how many messages are stored. Raises what the memory raises."""
        self.reset()
        if not await self.synced():
            raise self._last_error or RuntimeError("the memory could not be rebuilt")
        return self.stored

    async def _write(self) -> bool:
        """Store what the history holds past ``_next``, batch by batch, in order."""
        history, cid = self.history, self.conversation_id
        try:
            while not self._closed:
                epoch = self._epoch
                if self._check:
                    size = len(history)
                    missing = await self._first_missing(size)
                    if epoch == self._epoch:
                        self._check = False
                        self._next = missing
                        if missing < size:
                            log.info(
                                "%s holds the history up to message %d of %d; storing the rest",
                                self.memory.path,
                                missing,
                                size,
                            )
                    continue
                if self._forget:
                    await self._call(self.memory.forget_where, {"conversation": cid})
                    if epoch == self._epoch:
                        self._forget = False
                    continue
                start = self._next
                stop = min(len(history), start + WRITE_BATCH)
                if start >= stop:
                    return True
                items = await self._items(start, stop)
                if items:
                    await self._call(self.memory.store_many, items)
                if epoch == self._epoch:
                    self._next = stop
                    self.stored += len(items)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the history is safe; the memory catches up later
            self._last_error = exc
            if not self._closed:
                self._warn(
                    "write",
                    "the recall memory could not store messages (%s); they stay in the "
                    "history and are stored with the next message",
                    exc,
                )
            return False
        return True

    async def _items(self, start: int, stop: int) -> list[tuple[str, dict[str, Any]]]:
        """``(text, metadata)`` of the messages ``[start, stop)`` the roles say to store."""
        history, roles = self.history, self.settings.roles
        items = []
        for index in range(start, stop):
            info = history.infos[index]
            role = role_of(info)
            if role not in roles:
                continue
            text = await memory_text(history.messages[index], info)
            if text is None:
                continue
            metadata = {
                "conversation": self.conversation_id,
                "index": index,
                "unit": self.unit_of(index),
                "role": role,
            }
            items.append((text, metadata))
        return items

    async def _first_missing(self, size: int) -> int:
        """Where the stored part of the first ``size`` messages ends. Writes keep to history
        order, so the memory holds a prefix of what it should: found by binary search, a
        search per step, from the newest message it should hold."""
        history, roles = self.history, self.settings.roles

        async def stored_from(start: int, stop: int) -> bool | None:
            """Whether the first message in ``[start, stop)`` that is stored is there; None
            if there is none to store."""
            for index in range(start, stop):
                info = history.infos[index]
                if role_of(info) not in roles:
                    continue
                text = await memory_text(history.messages[index], info)
                if text is None:
                    continue
                where = {"conversation": self.conversation_id, "index": index}
                hits = await self._call(self.memory.retrieve, text, 5, threshold=1.0, where=where)
                return any(hit.content == text for hit in hits)
            return None

        newest = size - 1
        while newest >= 0:  # the newest message there is to store
            info = history.infos[newest]
            if role_of(info) in roles and await memory_text(history.messages[newest], info):
                break
            newest -= 1
        if newest < 0 or await stored_from(newest, newest + 1):
            return size
        low, high = 0, newest  # stored: every one before low; missing: every one from high
        while low < high:
            middle = (low + high) // 2
            if await stored_from(middle, high + 1):
                low = middle + 1
            else:  # missing, or none to store before high (which is missing)
                high = middle
        return low

    # -- searching ---------------------------------------------------------------------------

    def unit_of(self, index: int) -> int:
        """The index of the unit holding history message ``index``."""
        return bisect_right(self.history.units, index, key=attrgetter("start")) - 1

    async def ranked(self, query: int) -> list[tuple[int, float]]:
        """The complete units the newest user message (history index ``query``) finds, best
        first, each once with its best message's score: at most a few times the limit, since
        some are in the view already. Empty when the memory cannot be searched (logged)."""
        history = self.history
        text = text_of(history.messages[query]).strip()
        if not text or self._closed:
            return []
        known = self._ranked
        if known is not None and known[:2] == (self._epoch, query):
            return known[2]
        whole = await self.synced(WAIT_SECONDS)
        depth = max(2 * self.settings.limit, 8)
        try:
            hits = await self._call(
                self.memory.retrieve,
                text,
                depth,
                threshold=self.settings.threshold,
                where={"conversation": self.conversation_id},
            )
        except Exception as exc:
            self._warn("read", "the recall memory could not be searched (%s); no recall", exc)
            return []
        units = history.units
        ranked: dict[int, float] = {}
        for hit in hits:
            index = hit.metadata.get("index")
            if type(index) is not int or not 0 <= index < len(history) or index == query:
                continue
            unit = self.unit_of(index)
            if unit in ranked or units[unit].status != "complete":
                continue
            if await memory_text(history.messages[index], history.infos[index]) != hit.content:
                continue  # a stale item: that index holds another message now
            ranked[unit] = hit.score
        found = list(ranked.items())
        if whole:
            self._ranked = (self._epoch, query, found)
        return found

    # -- plumbing ----------------------------------------------------------------------------

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def _call(self, method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        """One memory call at a time; on an embedder's failure, text only from then on."""
        async with self._lock():
            try:
                return await method(*args, **kwargs)
            except EmbedderError as exc:
                if self.memory.embedder is None:
                    raise
                self._warn(
                    "embedder",
                    "%s; recall searches and stores text only (FTS5) from now on, and the "
                    "items stored meanwhile get vectors when the memory is next opened",
                    exc,
                )
                self.memory.embedder = None
                return await method(*args, **kwargs)

    def _warn(self, kind: str, text: str, *args: Any) -> None:
        """Log a kind of trouble once per manager (the rest at debug level)."""
        if kind in self._warned:
            log.debug(text, *args)
            return
        self._warned.add(kind)
        log.warning(text, *args)

    def close(self) -> None:
        """Close the memory (what is not yet written is caught up when it is next opened)."""
        if self._closed:
            return
        self._closed = True
        # At interpreter exit its thread takes no new work; SQLite's own closing keeps the
        # file whole then (what a WAL holds is replayed on opening).
        with contextlib.suppress(RuntimeError):
            self.memory.close()
