"""The reference context manager: stores everything, returns views that fit, never destroys.

It follows the Amplifier context contract (``add_message``, ``get_messages_for_request``,
``get_messages``, ``set_messages``, ``clear``, all async) and plans views in units, so a tool
call and its results can never be split. See :mod:`ctxkit.reference.planner` for how and when
it compacts.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import gc
import inspect
import logging
import math
import os
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ctxkit import events
from ctxkit.events import EventBus
from ctxkit.messages import InvalidMessage, copy_message, text_of
from ctxkit.prefix import PrefixTracker
from ctxkit.reference.audit import audit_entry
from ctxkit.reference.journal import (
    FSYNC_POLICIES,
    FsyncPolicy,
    HistoryFile,
    HistoryFileError,
    Torn,
)
from ctxkit.reference.levels import LevelSettings
from ctxkit.reference.memory import Embedder, SemanticMemory
from ctxkit.reference.planner import (
    Compaction,
    Planner,
    Rendered,
    Retained,
    Settings,
    ViewPlan,
)
from ctxkit.reference.recall import (
    DEFAULT_ROLES,
    ROLES,
    RecallMemory,
    RecallSettings,
    memory_path_for,
)
from ctxkit.reference.retention import Limits
from ctxkit.reference.store import History
from ctxkit.reference.strategies import STRATEGIES, Summarizer, extractive_summary
from ctxkit.reference.timeline import Timeline
from ctxkit.reference.usage import TurnTracker, ViewStats, usage_snapshot
from ctxkit.reference.working_state import WorkingState
from ctxkit.tokens import DEFAULT_ENCODING, TokenCounter

if TYPE_CHECKING:
    from ctxkit.reference.postgres.history import DatabaseHistory

__all__ = [
    "COUNT_OFF_LOOP_BYTES",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "ConfigError",
    "ContextBudgetExceeded",
    "ReferenceContextManager",
    "provider_budget",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The largest message (UTF-8 bytes of its keys and strings) a manager stores by default:
far above any real chat message or tool output, far below what stalls a process (a 50 MB
text takes minutes and gigabytes to count)."""
COUNT_OFF_LOOP_BYTES = 64 * 1024
"""Messages from this size on are counted in a worker thread (tiktoken releases the GIL):
a few milliseconds of counting on the loop at most, for any text."""


class ConfigError(ValueError):
    """A configuration value is out of range or unknown."""


class ContextBudgetExceeded(RuntimeError):
    """Even the content that must stay (pinned) does not fit the budget."""

    def __init__(self, *, budget: int, tokens: int, messages: int) -> None:
        self.budget = budget
        self.tokens = tokens
        self.messages = messages
        super().__init__(
            f"the pinned content alone needs {tokens} tokens in {messages} messages, over the "
            f"budget of {budget} by {tokens - budget}: system messages, the newest user "
            "message and the newest unit always stay. Raise the budget, shorten them, or "
            "pass on_overflow='best_effort' to get the over-budget view anyway."
        )


def _unknown_options(unknown: Mapping[str, Any]) -> TypeError:
    """A misspelt option named with the ones that exist (and the likeliest meant)."""
    import difflib

    known = [
        name
        for name, parameter in inspect.signature(
            ReferenceContextManager.__init__
        ).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    said = []
    for name in sorted(unknown):
        close = difflib.get_close_matches(name, known, n=1)
        said.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return TypeError(
        f"ReferenceContextManager has no option {', '.join(said)}; the options are: "
        + ", ".join(known)
    )


def _ratio(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ConfigError(f"{name} must be a number in (0, 1], got {value!r}")
    return float(value)


def _positive(name: str, value: Any, *, zero_ok: bool = False) -> int:
    low = 0 if zero_ok else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


def _optional_positive(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1 or None, got {value!r}")
    return value


def _optional_seconds(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigError(f"{name} must be a positive number of seconds or None, got {value!r}")
    return float(value)


class ReferenceContextManager:
    """A context manager that is correct by construction, exact, and observable.

    Parameters (all keyword-only; the same names are the ``mount()`` config keys):

    max_tokens: budget when a request names none and no provider tells one.
    compact_threshold: compact when a view would pass this share of the budget.
    target_ratio: a compaction brings the view down to this share of the budget.
    strategies: any of ``truncate_outputs``, ``truncate``, ``importance``, ``hierarchical``,
        ``summarize``, applied in that order (see
        :data:`~ctxkit.reference.strategies.STRATEGIES`); ``hierarchical`` and ``importance``
        exclude each other.
    hierarchical: options of the ``hierarchical`` strategy (:mod:`ctxkit.reference.levels`),
        all optional: ``full_share`` (0.5) and ``paragraph_share`` (0.25), the shares of the
        room a compaction keeps where the newest units are shown full and then as paragraphs
        (the rest is one-line units); ``paragraph_tokens`` (160) and ``line_tokens`` (40), the
        longest paragraph and line. Summaries come from ``summarizer`` when given, else from
        an offline extractive one (:func:`~ctxkit.reference.strategies.extractive_unit_summary`).
    encoding: ``o200k_base`` or ``cl100k_base``.
    tool_output_head_lines, tool_output_tail_lines, tool_output_max_bytes: how long tool
        outputs are shortened in a compacted view.
    summarizer: an async callable ``(messages, *, max_tokens) -> str``, checked when the
        manager is built; default: an offline extractive one.
    summary_max_tokens: a summary is clipped to this many tokens.
    summary_role: the role of the summary message (``user`` suits every provider); it is written
        in the shape of the history it stands for (Gemini parts for a Gemini history).
    safety_margin: tokens kept free when the budget comes from a provider.
    hard_limit_ratio: where usage snapshots put the hard limit (for "turns left").
    on_overflow: ``raise`` :class:`ContextBudgetExceeded` when pinned content cannot fit, or
        ``best_effort`` to return the smallest view anyway (with a ``ctxkit:budget_exceeded``
        event).
    conversation_id: carried in every event; a random one by default.
    view_listing: also list each view message by message in the ``ctxkit:view`` event
        (``listing`` and ``listing_omitted``, see :data:`~ctxkit.events.VIEW`), for
        ``ctxkit inspect``. Off by default: it costs work per request that follows the view
        (the rows are kept between requests; a request copies the newest
        :data:`~ctxkit.events.LISTING_ROWS` of them), once per message a running total, and
        up to that many rows of bytes in every view event.
    storage_path: keep the whole history in this JSON Lines file, and load it from there
        when it exists (see :mod:`ctxkit.reference.journal`). The file is locked while the
        manager is open: :meth:`close` it, or use ``async with``. When the history came from
        the file, ``set_messages`` is ignored (and logged), so a filtered transcript cannot
        overwrite the complete one; after ``clear()`` it is accepted again.
    fsync: ``always`` (every call that changed the history returns once the change is on
        disk, surviving a power loss) or ``never`` (once it is in the operating system:
        survives the process being killed, not the machine failing; many times faster).
        With a ``store``: ``never`` commits without waiting for the server's disk.
    store: keep the history in a PostgreSQL database instead of a file,
        ``"postgresql://USER@HOST:PORT/DATABASE"`` (the ``postgres`` extra), as the
        conversation named ``conversation``: the same records as a history file, one row
        each, one writer at a time across processes and hosts
        (:mod:`ctxkit.reference.postgres.history`). Everything said of ``storage_path``
        holds; a change is committed when its call returns, and the event loop never waits
        on the network (changes are written from a worker thread).
    conversation: the conversation's name in ``store`` (and the default ``conversation_id``).
    lock_wait: seconds a manager opening a history another manager has open (its
        ``storage_path``, or its ``store`` conversation, on any host) waits for it to close
        before raising :class:`~ctxkit.reference.journal.HistoryFileLocked` (0: at once).
    clock: the time source for arrival times, checkpoints, ``retain_seconds`` and the audit
        log.
    max_message_bytes: a message whose keys and strings hold more UTF-8 bytes than this is
        refused with :class:`~ctxkit.messages.InvalidMessage` (default
        :data:`DEFAULT_MAX_MESSAGE_BYTES`, 16 MiB; None for no limit). Below it, a message
        over :data:`COUNT_OFF_LOOP_BYTES` is counted in a worker thread, so one large tool
        output does not stall the other conversations the event loop serves.
    hooks: an object with ``async emit(name, data)`` (Amplifier's ``coordinator.hooks``).

    Recall (off unless ``recall`` is given; see :mod:`ctxkit.reference.recall`):

    recall: ``{"share": 0.2, "limit": 5, "threshold": 0.7}`` (each optional). Messages are
        stored in a semantic memory as they are added, and when a view leaves units out (or,
        with ``hierarchical``, shows them coarse), the newest user message's text finds the
        most relevant of them again: at most ``limit`` whole units, each with a message scoring
        at least ``threshold`` (in [0, 1]), together at most ``share`` of the budget, put back
        in history order. A compaction keeps their room aside, so the view still lands on
        ``target_ratio``; ``share`` must be below it.
    memory_path: the memory's SQLite file; by default ``<storage_path>.memory.sqlite``, or
        in memory when there is no ``storage_path`` (``":memory:"`` asks for that).
    memory_roles: which messages are stored: any of ``user``, ``assistant``, ``tool`` (tool
        results, in any shape) and ``system``; default ``user``, ``assistant``, ``tool``.
    embedder: a callable from texts to vectors (see :mod:`ctxkit.reference.memory`), passed
        in code, never in a JSON config; without one the memory searches text (SQLite FTS5,
        no model). A failing embedder is logged once and the memory goes on with text only.

    Retention (all off by default; then nothing of it costs anything). Old units leave every
    view, whatever the budget, before the budget logic sees the view; pinned units always
    stay (system messages, ``metadata.pin``, the newest user turn, the newest unit), and a
    unit leaves whole or not at all. The limits combine: a unit stays only within all.

    retain_messages: a view holds at most this many history messages, newest first (more only
        when the pinned units alone hold more).
    retain_seconds: units whose newest message arrived more than this many seconds ago (by
        ``clock``) leave the view.
    retain_bytes: a view's history messages take at most this many bytes, each counted as its
        compact JSON (``json.dumps(m, separators=(",", ":"))``), encoded once.
    summarize_on_truncate: the units retention leaves out go into the view's one summary
        message (the ``summarize`` strategy's, made by ``summarizer``) instead of being
        dropped plainly. Each time retention moves, the summary is made again.

    Each time retention newly leaves units out of a view, ``context:pre_compact`` and
    ``context:post_compact`` are published with ``strategy="retention"``.

    Audit: every decision that leaves messages out of a view or shortens them (a budget
    compaction, or retention moving) adds one entry to :meth:`audit`, and to the history file
    when there is one; views that reuse a decision add none. See
    :mod:`ctxkit.reference.audit` for the entry format.

    Example::

        manager = ReferenceContextManager(max_tokens=8_000)
        await manager.add_message({"role": "user", "content": "hi"})
        view = await manager.get_messages_for_request()
    """

    ctxkit_shapes = "all"
    """It takes every message shape (:mod:`ctxkit.shapes.spoken`)."""

    def __init__(
        self,
        *,
        max_tokens: int = 128_000,
        compact_threshold: float = 0.7,
        target_ratio: float = 0.5,
        strategies: Sequence[str] = ("truncate_outputs", "truncate"),
        hierarchical: Mapping[str, Any] | None = None,
        encoding: str = DEFAULT_ENCODING,
        tool_output_head_lines: int = 128,
        tool_output_tail_lines: int = 128,
        tool_output_max_bytes: int = 10 * 1024,
        summarizer: Summarizer | None = None,
        summary_max_tokens: int = 1_000,
        summary_role: str = "user",
        safety_margin: int = 0,
        hard_limit_ratio: float = 0.95,
        on_overflow: Literal["raise", "best_effort"] = "raise",
        conversation_id: str | None = None,
        view_listing: bool = False,
        storage_path: str | os.PathLike[str] | None = None,
        fsync: FsyncPolicy = "always",
        store: str | None = None,
        conversation: str | None = None,
        lock_wait: float = 0.0,
        clock: Callable[[], float] = time.time,
        retain_messages: int | None = None,
        retain_seconds: float | None = None,
        retain_bytes: int | None = None,
        summarize_on_truncate: bool = False,
        max_message_bytes: int | None = DEFAULT_MAX_MESSAGE_BYTES,
        recall: Mapping[str, Any] | None = None,
        memory_path: str | os.PathLike[str] | None = None,
        memory_roles: Sequence[str] | None = None,
        embedder: Embedder | None = None,
        hooks: Any = None,
        bus: EventBus | None = None,
        **unknown: Any,
    ) -> None:
        if unknown:
            raise _unknown_options(unknown)
        threshold = _ratio("compact_threshold", compact_threshold)
        target = _ratio("target_ratio", target_ratio)
        if target > threshold:
            raise ConfigError(
                f"target_ratio ({target}) must not exceed compact_threshold ({threshold})"
            )
        if isinstance(strategies, str):
            strategies = [strategies]
        unknown = [s for s in strategies if s not in STRATEGIES]
        if unknown:
            raise ConfigError(f"unknown strategies {unknown}; choose from {', '.join(STRATEGIES)}")
        levels = _level_settings(strategies, hierarchical)
        recalling = _recall_settings(recall, memory_path, memory_roles, embedder, target)
        if on_overflow not in ("raise", "best_effort"):
            raise ConfigError(f"on_overflow must be 'raise' or 'best_effort', got {on_overflow!r}")
        if summary_role not in ("user", "assistant", "system"):
            raise ConfigError(f"summary_role must be user, assistant or system: {summary_role!r}")
        if not isinstance(view_listing, bool):
            raise ConfigError(f"view_listing must be true or false, got {view_listing!r}")
        if fsync not in FSYNC_POLICIES:
            raise ConfigError(f"fsync must be {' or '.join(FSYNC_POLICIES)}, got {fsync!r}")
        if storage_path is not None and not isinstance(storage_path, str | os.PathLike):
            raise ConfigError(f"storage_path must be a file path, got {storage_path!r}")
        _check_store(store, conversation, storage_path, lock_wait)
        if not isinstance(summarize_on_truncate, bool):
            raise ConfigError(
                f"summarize_on_truncate must be true or false, got {summarize_on_truncate!r}"
            )
        self.retention = Limits(
            messages=_optional_positive("retain_messages", retain_messages),
            seconds=_optional_seconds("retain_seconds", retain_seconds),
            size=_optional_positive("retain_bytes", retain_bytes),
            summarize=summarize_on_truncate,
        )
        self.max_tokens = _positive("max_tokens", max_tokens)
        self.safety_margin = _positive("safety_margin", safety_margin, zero_ok=True)
        self.hard_limit_ratio = _ratio("hard_limit_ratio", hard_limit_ratio)
        self.on_overflow = on_overflow
        self.conversation_id = conversation_id or uuid.uuid4().hex[:12]
        self.view_listing = view_listing
        self.settings = Settings(
            compact_threshold=threshold,
            target_ratio=target,
            strategies=tuple(s for s in STRATEGIES if s in strategies),
            head_lines=_positive("tool_output_head_lines", tool_output_head_lines, zero_ok=True),
            tail_lines=_positive("tool_output_tail_lines", tool_output_tail_lines, zero_ok=True),
            max_bytes=_positive("tool_output_max_bytes", tool_output_max_bytes),
            summary_max_tokens=_positive("summary_max_tokens", summary_max_tokens),
            summary_role=summary_role,
            levels=levels,
        )
        if summarizer is not None:
            _check_summarizer(summarizer)
        self.counter = TokenCounter(encoding)
        self.bus = bus or EventBus()
        self._timeline = Timeline()
        self.max_message_bytes = _optional_positive("max_message_bytes", max_message_bytes)
        self._history = History(
            self.counter,
            clock=clock,
            recorder=self._timeline,
            max_message_bytes=self.max_message_bytes,
        )
        self._planner = Planner(
            self._history,
            self.settings,
            summarizer or extractive_summary,
            self.retention,
            level_summarizer=summarizer,
        )
        self._turns = TurnTracker()
        self._last_view: ViewStats | None = None
        self._prefix = PrefixTracker()
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        """Per event loop: views are built one at a time."""
        self._add_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        """Per event loop: messages are stored in the order add_message was called, even when
        a large one is counted in a thread."""
        self._audit: list[dict[str, Any]] = []
        self._publishing: set[asyncio.Task[None]] = set()
        """Events published from synchronous methods, until their task has run."""
        self._file: HistoryFile | DatabaseHistory | None = None
        self._off_loop = store is not None
        """Changes are written from a worker thread (a database: the loop never waits on
        the network), one at a time per event loop (``_add_locks``)."""
        self._work = WorkingState()
        """The working state and tasks (AdCP), written to the history file when there is one."""
        self.loaded_from_file = False
        """The history was read from ``storage_path`` (so ``set_messages`` is ignored)."""
        self.torn: Torn | None = None
        """The incomplete last line found in ``storage_path`` on opening, if any."""
        if storage_path is not None:
            path = Path(storage_path)
            with _collector_paused():
                self._open(
                    HistoryFile(
                        path,
                        conversation_id=conversation_id or path.stem,
                        encoding=self.counter.encoding,
                        fsync=fsync,
                        lock_wait=float(lock_wait),
                    ),
                    path.stem,
                    conversation_id,
                )
        elif store is not None:
            assert conversation is not None
            with _collector_paused():
                self._open(
                    _database_history(store, conversation, conversation_id, self, fsync, lock_wait),
                    conversation,
                    conversation_id,
                )
        self._recall: RecallMemory | None = None
        if recalling is not None:
            self._recall = self._open_memory(
                recalling, storage_path, memory_path, embedder, fsync, store
            )
        if hooks is not None:
            self.bus.subscribe(_forward_to_hooks(hooks))

    def _open(
        self, file: HistoryFile | DatabaseHistory, name: str, conversation_id: str | None
    ) -> None:
        """Rebuild the history from a history file or a database's rows, opened and locked
        (``name``: the conversation's id when neither the caller nor the header gives one)."""
        path = file.path
        try:
            loaded = file.loaded
            header = loaded.header or {}
            self.conversation_id = conversation_id or str(header.get("conversation_id", name))
            recount = None
            if header.get("encoding") != self.counter.encoding:
                log.info(
                    "%s counts tokens in %s; counting them again in %s",
                    path,
                    header.get("encoding"),
                    self.counter.encoding,
                )
                recount = self.counter.message_cost
            self._audit = self._timeline.replay(path, loaded.records, recount=recount)
            self._work.replay(path, loaded.records)
            messages, costs, times = self._timeline.current()
            try:
                self._history.load(messages, costs, times)
            except InvalidMessage as exc:
                raise HistoryFileError(f"{path}: the stored history is not valid: {exc}") from None
        except BaseException:
            file.close()
            raise
        self._timeline.file = self._file = file
        self._work.write = self._timeline.write
        weakref.finalize(self, file.close)
        self.loaded_from_file = bool(messages)
        if loaded.torn is not None:
            self.torn = loaded.torn
            log.warning("%s", loaded.torn.describe(path))

    def _open_memory(
        self,
        settings: RecallSettings,
        storage_path: str | os.PathLike[str] | None,
        memory_path: str | os.PathLike[str] | None,
        embedder: Embedder | None,
        fsync: FsyncPolicy,
        store: str | None,
    ) -> RecallMemory:
        """The recall memory: its file checked (damage raises, leaving it as it was), its
        history to catch up with, closed with the manager. A ``store``'s is in its database
        (the conversation's collection) unless ``memory_path`` says otherwise."""
        path: Path | None
        if memory_path is not None:
            path = None if str(memory_path) == ":memory:" else Path(memory_path)
        else:
            path = None if storage_path is None else memory_path_for(storage_path)
        try:
            memory = None
            if store is not None and memory_path is None:
                from ctxkit.reference.postgres.memory import DatabaseMemory

                collection = self._file.conversation  # type: ignore[union-attr]
                memory = DatabaseMemory(store, collection, embedder, threshold=settings.threshold)
            recall = RecallMemory(
                self._history,
                settings,
                conversation_id=self.conversation_id,
                path=path,
                embedder=embedder,
                fsync=fsync,
                memory=memory,
            )
        except BaseException:
            if self._file is not None:
                self._file.close()
            raise
        weakref.finalize(self, recall.close)
        return recall

    @classmethod
    async def open(cls, **options: Any) -> ReferenceContextManager:
        """The same as the constructor, run in a worker thread: opening reads the whole
        history (a file, a database's rows over the network), which an event loop serving
        other conversations should not wait for."""
        return await asyncio.to_thread(functools.partial(cls, **options))

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None, **extra: Any) -> ReferenceContextManager:
        """Build from a config mapping (the ``mount()`` config), rejecting unknown keys."""
        config = dict(config or {})
        if "embedder" in config:
            raise ConfigError(
                "embedder is not a config key: it is code (a callable from texts to vectors), "
                "so pass it to the constructor, ReferenceContextManager(..., embedder=...), or "
                "to from_config(config, embedder=...)"
            )
        allowed = set(inspect.signature(cls.__init__).parameters) - {
            "self",
            "hooks",
            "bus",
            "embedder",
        }
        unknown = sorted(set(config) - allowed)
        if unknown:
            raise ConfigError(
                f"unknown config keys {unknown}; known keys: {', '.join(sorted(allowed))}"
            )
        return cls(**config, **extra)

    # -- the contract ------------------------------------------------------------------------

    async def add_message(self, message: dict[str, Any]) -> None:
        """Store a message. Raises :class:`~ctxkit.messages.InvalidMessage`, storing nothing,
        if it is not a valid message in either shape; with a history file,
        :class:`~ctxkit.reference.journal.HistoryFileError` if it cannot be written, and
        ``TypeError`` if it is not JSON. When it returns, the message is in the file.

        A message larger than ``max_message_bytes`` is refused; one over
        :data:`COUNT_OFF_LOOP_BYTES` is counted in a worker thread (the event loop goes on).
        """
        info, stored = self._history.prepare(message)
        async with _loop_lock(self._add_locks):
            if info.size < COUNT_OFF_LOOP_BYTES:
                cost = self.counter.message_cost(stored)
            else:
                cost = await asyncio.to_thread(self.counter.message_cost, stored)
            index = await self._changing(self._history.add, info, stored, cost)
        self._sync()
        if self._recall is not None:
            self._recall.added(index)

    async def get_messages(self) -> list[dict[str, Any]]:
        """Every message as added, in order (a copy)."""
        return [copy_message(m) for m in self._history.messages]

    async def set_messages(self, messages: list[dict[str, Any]]) -> None:
        """Replace the whole history (all or nothing).

        Ignored, with a warning in the log, when the history was loaded from its file (see
        ``storage_path``): the file holds the complete history, a caller's list may not.
        """
        if self.loaded_from_file:
            log.warning(
                "set_messages ignored: the history of %s was loaded from %s, which holds it "
                "whole; clear() first to replace it",
                self.conversation_id,
                self._file.path if self._file else "its file",
            )
            return
        async with _loop_lock(self._add_locks):
            await self._changing(self._history.replace, messages)
        self._sync()
        self._forget_views()
        if self._recall is not None:
            self._recall.reset()

    async def clear(self) -> None:
        """Forget everything: history, working state and tasks, plans, usage. A history file
        keeps what was there (``checkpoint()`` first to be able to restore it)."""
        async with _loop_lock(self._add_locks):
            await self._changing(self._history.clear)
        self._work.clear()
        self._sync()
        self.loaded_from_file = False
        self._forget_views()
        if self._recall is not None:
            self._recall.reset()

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict[str, Any]]:
        """A new list of messages that fits the budget, compacting if needed.

        Budget: ``token_budget``, else the provider's ``context_window - max_output_tokens -
        safety_margin``, else ``max_tokens``. Stored history never changes.
        """
        budget = await self._resolve_budget(token_budget, provider)
        async with self._lock(), self._changes_settled():
            started = time.perf_counter()
            plan = self._planner.plan_for(budget)
            compacted = False
            if self._planner.limits is not None:
                retained = self._planner.retain(plan)
                if retained is not None:
                    compacted = await self._retain(plan, retained)
            if self._recall is not None:
                compacted = await self._recall_into(plan) or compacted
            elif self._planner.over_threshold(plan):
                compacted = await self._compact(plan) or compacted
            rendered = self._planner.render(plan)
            view, stats = self._render(plan, rendered)
            kept = self._prefix.observe(rendered.messages, rendered.costs, rendered.tokens)
            if stats.tokens > budget:
                await self._overflow(stats)
            self._last_view = stats
            listing: dict[str, Any] = {}
            if self.view_listing:
                rows, omitted = self._planner.listing(plan, rendered)
                listing = {"listing": rows, "listing_omitted": omitted}
            if self._planner.hierarchical:
                listing.update(self._planner.level_figures(plan))
            if self._recall is not None:
                listing["units_recalled"] = len(plan.recalled)
                listing["recalled_ranges"] = self._planner.recalled_ranges(plan)
            await self._publish(
                events.VIEW,
                message_count=stats.messages,
                token_count=stats.tokens,
                budget=budget,
                history_messages=len(self._history),
                history_tokens=self._history.tokens,
                compacted=compacted,
                compact_threshold=self.settings.compact_threshold,
                breakdown=dict(stats.breakdown),
                kinds=dict(stats.kinds),
                prefix_tokens=kept.tokens,
                previous_tokens=kept.previous,
                duration_s=time.perf_counter() - started,
                **listing,
            )
            return view

    # -- beyond the contract -----------------------------------------------------------------

    async def checkpoint(self, label: str | None = None) -> str:
        """Name the history as it is now; returns the checkpoint's id (``c1``, ``c2``...)."""
        if label is not None and not isinstance(label, str):
            raise TypeError(f"label must be a string or None, got {label!r}")

        def checkpoint() -> str:
            with self._history.locked():
                point = self._timeline.checkpoint(label, self._history.clock())
                self._work.checkpointed(point.id)
            return point.id

        async with _loop_lock(self._add_locks):
            checkpoint_id = await self._changing(checkpoint)
        self._sync()
        return checkpoint_id

    async def restore(self, checkpoint_id: str) -> str:
        """Set the history back to a checkpoint's, with its working state and tasks. The
        history it replaces is not lost: it is checkpointed first, and that checkpoint's id is
        returned. Raises
        :class:`~ctxkit.reference.timeline.UnknownCheckpoint` for an unknown id."""
        messages, costs, times = self._timeline.state(checkpoint_id)
        at = self._history.clock()
        saved: list[str] = []

        def record() -> None:
            label = f"before restore to {checkpoint_id}"
            saved.append(self._timeline.checkpoint(label, at).id)
            self._work.checkpointed(saved[-1])
            self._timeline.restored(checkpoint_id, at)
            self._work.restored(checkpoint_id)

        async with _loop_lock(self._add_locks):
            await self._changing(self._history.load, messages, costs, times, change=record)
        self._sync()
        self._forget_views()
        if self._recall is not None:
            self._recall.reset()
        return saved[0]

    # -- working state and tasks (AdCP) ------------------------------------------------------

    async def get_working_state(self) -> dict[str, Any]:
        """The conversation's working state: a free-form JSON object (current items, last
        search, preferences, workflow step...); ``{}`` until set. A copy."""
        return self._work.state

    async def set_working_state(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the working state whole; returns it. Raises ``TypeError`` if it is not a
        JSON object; with a history file, it is there when this returns (see
        :mod:`ctxkit.reference.working_state`)."""
        return await self._change_work(lambda at: self._work.replace(state, at))

    async def patch_working_state(self, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Change the working state by a JSON merge patch (RFC 7386: ``{"step": 3, "last_search":
        null}`` sets ``step`` and removes ``last_search``; objects merge key by key); returns
        the result."""
        return await self._change_work(lambda at: self._work.patch(patch, at))

    async def add_task(self, text: str) -> dict[str, Any]:
        """Add an active task: ``{"id": "t1", "text", "created", "completed": None}``."""
        return await self._change_work(lambda at: self._work.add_task(text, at))

    async def complete_task(self, task_id: str) -> dict[str, Any]:
        """Mark an active task completed (``completed`` is the time); returns it. Raises
        :class:`~ctxkit.reference.working_state.TaskError` for an id that names no active
        task."""
        return await self._change_work(lambda at: self._work.complete_task(task_id, at))

    async def get_tasks(self) -> dict[str, list[dict[str, Any]]]:
        """``{"active_tasks": [...], "completed_tasks": [...]}``, each oldest first."""
        return self._work.tasks()

    async def _change_work(self, change: Callable[[float], dict[str, Any]]) -> dict[str, Any]:
        def locked() -> dict[str, Any]:
            with self._history.locked():
                return change(self._history.clock())

        async with _loop_lock(self._add_locks):
            result = await self._changing(locked)
        self._sync()
        return result

    def checkpoints(self) -> list[dict[str, Any]]:
        """Every checkpoint, oldest first: ``id``, ``label``, ``at`` (seconds since the
        epoch) and ``messages`` (the history's length then)."""
        return [point.as_dict() for point in self._timeline.checkpoints()]

    async def messages_at(self, checkpoint_id: str) -> list[dict[str, Any]]:
        """A checkpoint's history (a copy), without restoring it."""
        messages, _, _ = self._timeline.state(checkpoint_id)
        return [copy_message(m) for m in messages]

    def audit(self) -> list[dict[str, Any]]:
        """Every time a view left messages out or shortened them, oldest first (a copy; the
        entry format is in :mod:`ctxkit.reference.audit`)."""
        return [copy_message(entry) for entry in self._audit]

    def close(self) -> None:
        """Close the history file and release its lock (nothing to do without one), and the
        recall memory. Changing the history afterwards raises
        :class:`~ctxkit.reference.journal.HistoryFileError`."""
        if self._recall is not None:
            self._recall.close()
        if self._file is not None:
            with contextlib.suppress(HistoryFileError):  # still a full disk: said below
                self._timeline.write_pending()
            if self._timeline.unwritten:
                log.error(
                    "%s: closing with %d audit entries that could not be written; "
                    "manager.audit() had them, the file does not",
                    self._file.path,
                    len(self._timeline.unwritten),
                )
            self._file.close()

    async def __aenter__(self) -> ReferenceContextManager:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._recall is not None:
            await self._recall.synced()  # the last messages, so reopening need not rebuild
        if self._off_loop:  # a database: releasing the conversation is a round trip
            await asyncio.to_thread(self.close)
        else:
            self.close()

    @property
    def memory(self) -> SemanticMemory | None:
        """The recall memory (None without ``recall``): search it, or store notes of your own
        (items without this manager's ``index`` metadata are never recalled into a view)."""
        return self._recall.memory if self._recall is not None else None

    async def memory_synced(self) -> bool:
        """Wait until the recall memory holds every message of the history; False when a
        write failed (it was logged, and is tried again with the next message). True at once
        without ``recall``."""
        return True if self._recall is None else await self._recall.synced()

    async def rebuild_memory(self) -> int:
        """Store the history in the recall memory again, from scratch (after a memory file was
        lost or damaged, or the embedder changed); returns how many messages are stored.
        Raises :class:`ConfigError` without ``recall``, and what the memory raises."""
        if self._recall is None:
            raise ConfigError("rebuild_memory needs recall: configure recall={...}")
        return await self._recall.rebuild()

    def record_usage(self, input_tokens: int, output_tokens: int) -> None:
        """Record the provider's real usage for the turn just made (for turn-size estimates).

        Also published as ``ctxkit:usage`` with the latest view's exact tokens, so the
        telemetry subscribers chart the provider's counts and how far ctxkit's are from
        them. Called within an event loop, the event goes out when the caller's task next
        yields (this method stays synchronous); outside one, at once.
        """
        self._turns.record(input_tokens, output_tokens, self._history.tokens)
        view = self._last_view
        publishing = self._publish(
            events.USAGE,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            estimated_tokens=view.tokens if view is not None else None,
        )
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(publishing)
            return
        task = loop.create_task(publishing)
        self._publishing.add(task)  # a task nobody holds can be collected before it runs
        task.add_done_callback(self._publishing.discard)

    def usage(self) -> dict[str, Any]:
        """A JSON-ready snapshot: tokens, budget, ratio, thresholds, breakdown, turns left."""
        stats = self._last_view or ViewStats(
            budget=self.max_tokens,
            tokens=self._history.tokens,
            messages=len(self._history),
            breakdown={},
            kinds={},
            compactions=0,
        )
        return usage_snapshot(
            stats=stats,
            tracker=self._turns,
            history_messages=len(self._history),
            history_tokens=self._history.tokens,
            compact_threshold=self.settings.compact_threshold,
            hard_limit_ratio=self.hard_limit_ratio,
            encoding=self.counter.encoding,
        )

    # -- internals ---------------------------------------------------------------------------

    def _sync(self) -> None:
        if self._file is not None:
            self._file.sync()

    async def _changing(self, make: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Make a change that writes to the store: at once for a file (a local write), from
        a worker thread for a database, so the loop goes on while the row is committed (the
        caller holds the loop's ``_add_locks``, so changes stay in order and views wait)."""
        if not self._off_loop:
            return make(*args, **kwargs)
        return await asyncio.to_thread(make, *args, **kwargs)

    def _forget_views(self) -> None:
        self._last_view = None
        self._turns.reset()
        self._prefix.reset()

    async def _record_audit(self, entry: dict[str, Any]) -> None:
        """Keep an audit entry, in the history file too when there is one. It is written at
        once but not synced: it describes a view, not the history, so a request does not wait
        for the disk; the next change to the history (or closing) makes it durable.

        A write that fails (a full disk) does not fail the view: the entry waits in memory
        and goes first with the next write. The first failure of a run of them is reported,
        in the log and as a ``ctxkit:audit_write_failed`` event; the rest only add up."""

        def record() -> tuple[bool, HistoryFileError | None]:
            with self._history.locked():
                already_failing = bool(self._timeline.unwritten)
                failure = self._timeline.write_audit(entry, entry["at"])
                self._audit.append(entry)
            return already_failing, failure

        already_failing, failure = await self._changing(record)
        if failure is not None and not already_failing:
            log.warning(
                "%s; the audit entry is kept in memory and written with the next change",
                failure,
            )
            await self._publish(
                events.AUDIT_WRITE_FAILED,
                error=str(failure),
                unwritten=len(self._timeline.unwritten),
            )

    def _lock(self) -> asyncio.Lock:
        return _loop_lock(self._locks)

    def _changes_settled(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """With a database, a view waits for a change being written from a worker thread
        (and holds further changes off while it is planned); with a file, changes are made
        on the loop, so there is nothing to wait for."""
        if not self._off_loop:
            return contextlib.nullcontext()
        return _loop_lock(self._add_locks)

    async def _resolve_budget(self, token_budget: int | None, provider: Any) -> int:
        if token_budget is not None:
            if isinstance(token_budget, bool) or not isinstance(token_budget, int):
                raise TypeError(f"token_budget must be an int, got {token_budget!r}")
            if token_budget <= 0:
                raise ValueError(f"token_budget must be positive, got {token_budget}")
            return token_budget
        if provider is not None:
            budget = await provider_budget(provider, self.safety_margin)
            if budget is not None:
                return budget
        return self.max_tokens

    async def _compact(self, plan: ViewPlan) -> bool:
        started = time.perf_counter()  # deciding is part of the compaction's cost
        compaction = await self._planner.compaction(plan)
        if compaction is None:
            return False
        strategy = "+".join(self.settings.strategies)
        await self._change_view(plan, compaction, started, strategy=strategy)
        return True

    async def _recall_into(self, plan: ViewPlan) -> bool:
        """Recall for this view, compacting first when it is over the threshold; returns
        whether it compacted. Asks the memory only when the view leaves something out and
        the newest user message changed since the plan last asked, or at a compaction, so
        an agent loop's steps between user turns cost nothing here.

        After a compaction, recalled units may take the view from ``target_ratio`` up to the
        midpoint between it and ``compact_threshold`` (so half the room to grow stays); when
        what the compaction would leave out holds more that is found than fits there, it
        decides again, keeping the difference aside. The units are then chosen for the view
        as compacted. Without a compaction they may take the room up to the threshold (the
        newest question gets its answer now; the next compaction makes room)."""
        recall, planner = self._recall, self._planner
        assert recall is not None
        settings = recall.settings
        over = planner.over_threshold(plan)
        query = recall.newest_user
        if not over and plan.recall_asked and plan.recall_query == query:
            return False
        plan.recall_asked, plan.recall_query = True, query
        ranked: list[tuple[int, float]] = []
        if query is not None and (over or planner.leaves_out(plan)):
            ranked = await recall.ranked(query)
        share = settings.share * plan.budget
        if not over:
            if plan.recalled or ranked:
                planner.strip_recalled(plan)
                room = self.settings.compact_threshold * plan.budget - plan.request_tokens
                chosen, _ = planner.choose_recalled(plan, ranked, share, settings.limit, room=room)
                planner.add_recalled(plan, chosen)
            return False
        started = time.perf_counter()
        tokens_before, messages_before = plan.request_tokens, planner.message_count(plan)
        planner.strip_recalled(plan)
        ceiling = (self.settings.target_ratio + self.settings.compact_threshold) / 2 * plan.budget
        compaction = await planner.compaction(plan)
        if compaction is not None and ranked:
            _, wanted = planner.choose_recalled(
                plan, ranked, share, settings.limit, decision=compaction
            )
            short = planner.projected_tokens(plan, compaction) + wanted - ceiling
            if wanted and short > 0:
                compaction = await planner.compaction(plan, reserve=short) or compaction

        def recall_after(compacted: ViewPlan) -> None:
            room = ceiling - compacted.request_tokens
            chosen, _ = planner.choose_recalled(compacted, ranked, share, settings.limit, room=room)
            planner.add_recalled(compacted, chosen)

        if compaction is None:
            recall_after(plan)
            return False
        compaction.tokens_before, compaction.messages_before = tokens_before, messages_before
        strategy = "+".join(self.settings.strategies)
        await self._change_view(plan, compaction, started, strategy=strategy, then=recall_after)
        return True

    async def _retain(self, plan: ViewPlan, retained: Retained) -> bool:
        """Leave out the units retention newly passed, as a compaction with strategy
        ``retention``."""
        await self._change_view(plan, retained, time.perf_counter(), strategy="retention")
        return True

    async def _change_view(
        self,
        plan: ViewPlan,
        decision: Compaction | Retained,
        started: float,
        *,
        strategy: str,
        then: Callable[[ViewPlan], None] | None = None,
    ) -> None:
        """Apply a compaction or a retention step to the plan, between the contract's
        ``pre_compact`` and ``post_compact`` events, and record it in the audit log.
        ``then`` finishes the view before ``post_compact`` tells of it (recall)."""
        await self._publish(
            events.PRE_COMPACT,
            message_count=decision.messages_before,
            token_count=decision.tokens_before,
            budget=plan.budget,
            strategy=strategy,
        )
        had_summary = plan.summary
        if isinstance(decision, Compaction):
            await self._planner.apply(plan, decision)
            shorten, unsummarized, limits = decision.shorten, decision.unsummarized, []
        else:
            await self._planner.apply_retention(plan, decision)
            shorten, unsummarized, limits = [], [], decision.limits
        if then is not None:
            then(plan)
        duration = time.perf_counter() - started
        if plan.summary is not None and plan.summary is not had_summary:
            await self._publish(events.INCLUDE, source="summary", content=text_of(plan.summary))
        tokens = plan.request_tokens
        summarized = [*(decision.drop if decision.summarized else []), *decision.levelled]
        await self._record_audit(
            audit_entry(
                at=self._history.clock(),
                reason="budget" if isinstance(decision, Compaction) else "retention",
                limits=limits,
                budget=plan.budget,
                units=self._history.units,
                dropped=[*([] if decision.summarized else decision.drop), *unsummarized],
                summarized=summarized,
                truncated=self._planner.shortened_messages(shorten),
                tokens_before=decision.tokens_before,
                tokens_after=tokens,
                history_messages=len(self._history),
            )
        )
        await self._publish(
            events.POST_COMPACT,
            message_count=self._planner.message_count(plan),
            token_count=tokens,
            budget=plan.budget,
            strategy=strategy,
            tokens_before=decision.tokens_before,
            tokens_saved=decision.tokens_before - tokens,
            duration_s=duration,
            units_dropped=len(decision.drop),
            units_truncated=len(shorten),
            units_summarized=decision.summarized,
            **self._level_payload(plan),
        )

    def _level_payload(self, plan: ViewPlan) -> dict[str, Any]:
        """With ``hierarchical``: the units by level, what each level saves, and which
        messages each coarse run stands for; with ``recall``, how many units came back (see
        :data:`~ctxkit.events.POST_COMPACT`)."""
        payload: dict[str, Any] = {}
        if self._recall is not None:
            payload["units_recalled"] = len(plan.recalled)
        if not self._planner.hierarchical:
            return payload
        return {
            **payload,
            **self._planner.level_figures(plan),
            "level_ranges": self._planner.level_ranges(plan),
        }

    def _render(self, plan: ViewPlan, rendered: Rendered) -> tuple[list[dict[str, Any]], ViewStats]:
        view = rendered.copy_view()
        stats = ViewStats(
            budget=plan.budget,
            tokens=plan.request_tokens,
            messages=len(view),
            breakdown=dict(rendered.breakdown),
            kinds=dict(rendered.kinds),
            compactions=plan.compactions,
        )
        return view, stats

    async def _overflow(self, stats: ViewStats) -> None:
        raised = self.on_overflow == "raise"
        await self._publish(
            events.BUDGET_EXCEEDED,
            budget=stats.budget,
            pinned_tokens=stats.tokens,
            raised=raised,
        )
        if raised:
            raise ContextBudgetExceeded(
                budget=stats.budget, tokens=stats.tokens, messages=stats.messages
            )
        log.warning(
            "best-effort view of %d tokens exceeds the budget of %d", stats.tokens, stats.budget
        )

    async def _publish(self, name: str, **data: Any) -> None:
        data["conversation_id"] = self.conversation_id
        await self.bus.publish(name, data)


def _loop_lock(
    locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock],
) -> asyncio.Lock:
    """The running event loop's lock in ``locks`` (an asyncio lock belongs to one loop)."""
    loop = asyncio.get_running_loop()
    lock = locks.get(loop)
    if lock is None:
        lock = locks[loop] = asyncio.Lock()
    return lock


_LEVEL_OPTIONS = {
    "full_share": "a share of the room in [0, 1]",
    "paragraph_share": "a share of the room in [0, 1]",
    "paragraph_tokens": "an integer >= 1",
    "line_tokens": "an integer >= 1",
}


def _check_store(store: Any, conversation: Any, storage_path: Any, lock_wait: Any) -> None:
    """``store``, ``conversation`` and ``lock_wait``, checked before anything connects."""
    if (
        isinstance(lock_wait, bool)
        or not isinstance(lock_wait, int | float)
        or not math.isfinite(lock_wait)
        or lock_wait < 0
    ):
        raise ConfigError(f"lock_wait must be a number of seconds >= 0, got {lock_wait!r}")
    if store is None:
        if conversation is not None:
            raise ConfigError(
                "conversation names a conversation in a database: give "
                "store='postgresql://USER@HOST:PORT/DATABASE' too"
            )
        return
    if storage_path is not None:
        raise ConfigError(
            "storage_path and store are two places for one history: give one (ctxkit contexts "
            "copy moves a conversation between them)"
        )
    if not isinstance(conversation, str) or not conversation:
        raise ConfigError(
            f"store needs conversation='ID', the conversation's name in it, got {conversation!r}"
        )
    from ctxkit.reference.postgres.connection import check_url

    try:
        check_url(store)
    except ValueError as exc:
        raise ConfigError(f"store: {exc}") from None


def _database_history(
    store: str,
    conversation: str,
    conversation_id: str | None,
    manager: ReferenceContextManager,
    fsync: FsyncPolicy,
    lock_wait: float,
) -> DatabaseHistory:
    """The conversation in the database, opened and locked."""
    from ctxkit.reference.postgres.history import DatabaseHistory

    return DatabaseHistory(
        store,
        conversation,
        conversation_id=conversation_id,
        encoding=manager.counter.encoding,
        fsync=fsync,
        lock_wait=float(lock_wait),
    )


def _level_settings(strategies: Sequence[str], options: Any) -> LevelSettings:
    """The ``hierarchical`` options, checked; refuses the combinations that cannot work."""
    if "hierarchical" in strategies and "importance" in strategies:
        raise ConfigError(
            "strategies 'hierarchical' and 'importance' cannot be combined: both decide which "
            "units lose detail, hierarchical by age (coarser as they age), importance by "
            "score; choose one"
        )
    if options is None:
        return LevelSettings()
    if "hierarchical" not in strategies:
        raise ConfigError(
            "hierarchical options are set but 'hierarchical' is not among the strategies; "
            "add it to strategies or remove the options"
        )
    if not isinstance(options, Mapping):
        raise ConfigError(f"hierarchical must be a mapping of options, got {options!r}")
    unknown = sorted(set(options) - set(_LEVEL_OPTIONS))
    if unknown:
        raise ConfigError(
            f"unknown hierarchical options {unknown}; known: {', '.join(_LEVEL_OPTIONS)}"
        )
    for name, value in options.items():
        if name.endswith("_share"):
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or not 0 <= value <= 1:
                raise ConfigError(
                    f"hierarchical.{name} must be {_LEVEL_OPTIONS[name]}, got {value!r}"
                )
        else:
            _positive(f"hierarchical.{name}", value)
    settings = dataclasses.replace(LevelSettings(), **options)
    if settings.full_share + settings.paragraph_share > 1:
        raise ConfigError(
            "hierarchical.full_share + hierarchical.paragraph_share must not exceed 1, got "
            f"{settings.full_share} + {settings.paragraph_share}"
        )
    return settings


_RECALL_OPTIONS = {
    "share": "a share of the budget in (0, 1)",
    "limit": "an integer >= 1",
    "threshold": "a score in [0, 1]",
}


def _recall_settings(
    options: Any,
    memory_path: Any,
    memory_roles: Any,
    embedder: Any,
    target_ratio: float,
) -> RecallSettings | None:
    """The ``recall`` options and what goes with them, checked; None when recall is off."""
    if options is None:
        given = [
            name
            for name, value in (
                ("memory_path", memory_path),
                ("memory_roles", memory_roles),
                ("embedder", embedder),
            )
            if value is not None
        ]
        if given:
            raise ConfigError(
                f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} set but recall is "
                'not; add recall: {"share": 0.2, "limit": 5, "threshold": 0.7} (or {} for '
                "those defaults), or remove them"
            )
        return None
    if not isinstance(options, Mapping):
        raise ConfigError(
            'recall must be a mapping of options such as {"share": 0.2, "limit": 5, '
            f'"threshold": 0.7}}, got {options!r}'
        )
    unknown = sorted(set(options) - set(_RECALL_OPTIONS))
    if unknown:
        raise ConfigError(f"unknown recall options {unknown}; known: {', '.join(_RECALL_OPTIONS)}")
    settings = RecallSettings()
    share = options.get("share", settings.share)
    number = isinstance(share, int | float) and not isinstance(share, bool)
    if not number or not 0 < share < 1:
        raise ConfigError(f"recall.share must be {_RECALL_OPTIONS['share']}, got {share!r}")
    if share >= target_ratio:
        raise ConfigError(
            f"recall.share ({share}) must be below target_ratio ({target_ratio}): a compaction "
            "keeps the recalled units' room inside the view it brings the budget down to"
        )
    limit = _positive("recall.limit", options.get("limit", settings.limit))
    threshold = options.get("threshold", settings.threshold)
    number = isinstance(threshold, int | float) and not isinstance(threshold, bool)
    if not number or not 0 <= threshold <= 1:
        raise ConfigError(
            f"recall.threshold must be {_RECALL_OPTIONS['threshold']}, got {threshold!r}"
        )
    if memory_path is not None and not isinstance(memory_path, str | os.PathLike):
        raise ConfigError(f"memory_path must be a file path or ':memory:', got {memory_path!r}")
    roles = DEFAULT_ROLES if memory_roles is None else memory_roles
    if (
        isinstance(roles, str)
        or not isinstance(roles, Sequence)
        or not roles
        or any(role not in ROLES for role in roles)
    ):
        raise ConfigError(
            f"memory_roles must be a non-empty list of {', '.join(ROLES)}, got {memory_roles!r}"
        )
    if embedder is not None and not callable(embedder):
        raise ConfigError(
            f"embedder must be a callable from a list of texts to vectors, got {embedder!r}"
        )
    return RecallSettings(
        share=float(share), limit=limit, threshold=float(threshold), roles=frozenset(roles)
    )


def _check_summarizer(summarizer: Any) -> None:
    """Refuse at construction a summarizer that would only fail at the first compaction."""
    if not callable(summarizer):
        raise ConfigError(f"summarizer must be an async callable, got {summarizer!r}")
    call = summarizer if inspect.isroutine(summarizer) else type(summarizer).__call__
    if not inspect.iscoroutinefunction(call) and not inspect.iscoroutinefunction(summarizer):
        raise ConfigError(
            f"summarizer must be an async function, (messages, *, max_tokens) -> str; "
            f"{summarizer!r} is not. Wrap a sync one: "
            "async def summarize(messages, *, max_tokens): return my_summary(messages)"
        )
    try:
        signature = inspect.signature(summarizer)
    except (TypeError, ValueError):  # no signature to read: trust it
        return
    try:
        signature.bind([], max_tokens=1)
    except TypeError as exc:
        raise ConfigError(
            f"summarizer {summarizer!r} cannot be called as (messages, *, max_tokens): {exc}"
        ) from None


async def provider_budget(provider: Any, default_margin: int) -> int | None:
    """``context_window - max_output_tokens - safety_margin`` from ``provider.get_info()``."""
    get_info = getattr(provider, "get_info", None)
    if get_info is None:
        return None
    info = get_info()
    if inspect.isawaitable(info):
        info = await info
    if isinstance(info, Mapping):
        defaults = info.get("defaults")
    else:
        defaults = getattr(info, "defaults", None)
    if not isinstance(defaults, Mapping) or defaults.get("context_window") is None:
        return None
    window = defaults["context_window"]
    output = defaults.get("max_output_tokens") or 0
    margin = defaults.get("safety_margin", default_margin) or 0
    budget = window - output - margin
    if not isinstance(budget, int) or budget <= 0:
        raise ValueError(
            f"provider budget {window} - {output} - {margin} = {budget} is not a positive integer"
        )
    return budget


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector while a history file loads.

    Loading makes a few objects per line and no cycles, but the collector, triggered by the
    allocations, walks the ever larger heap again and again: on a 50k-message file that is
    about a third of the time. It is switched back on at once (only if it was on).
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _forward_to_hooks(hooks: Any) -> Any:
    """A bus subscriber passing the contract's ``context:*`` events to Amplifier hooks."""

    async def forward(event: events.Event) -> None:
        if event.name.startswith("context:"):
            result = hooks.emit(event.name, dict(event.data))
            if inspect.isawaitable(result):
                await result

    return forward
