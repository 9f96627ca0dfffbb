"""What every adapter shares: the budget of a request (:class:`LibraryAdapter`) and, for
libraries that only offer a view, a correct store of the history (:class:`StoredHistory`,
and :class:`TrimmingAdapter` over it for a library's trimming function).

The store is ctxkit's part and must never be what the suite finds: messages are validated
(:meth:`StoredHistory.check`) and copied on the way in and out, so a caller's edits never
reach it. The view is the library's part (:meth:`TrimmingAdapter.trim`). Libraries whose
manager is the history (Strands, Semantic Kernel) build on :class:`LibraryAdapter` and
store there.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from ctxkit.messages import Shape, copy_message, inspect_message, validate_history

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "LibraryAdapter",
    "StoredHistory",
    "TrimmingAdapter",
    "import_named",
    "library_options",
    "split_system",
]


def import_named(spec: str, option: str, what: str | None = None) -> Any:
    """What an option's ``"module:attr"`` string names (``attr`` may be dotted), imported;
    a string of another form is a ``TypeError`` naming the option."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        alternative = f"{what} or " if what else ""
        raise TypeError(f"{option} must be {alternative}'module:attr', got {spec!r}")
    target: Any = importlib.import_module(module)
    for name in attr.split("."):
        target = getattr(target, name)
    return target


DEFAULT_MAX_TOKENS = 128_000
"""The budget of a request that names neither a budget nor a provider (config ``max_tokens``)."""


def split_system(history: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Any]]:
    """The leading system messages and the rest: libraries whose agents hold the system
    prompt apart from the conversation (Strands, llama-index) get the rest only."""
    lead = 0
    while lead < len(history) and history[lead]["role"] in ("system", "developer"):
        lead += 1
    return list(history[:lead]), list(history[lead:])


def library_options(
    owner: str,
    written: Mapping[str, Any],
    known: Sequence[str],
    defaults: Mapping[str, Any] | None = None,
    set_by_adapter: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The options to hand the library: every key the user wrote, exactly as written (``None``
    included), and a default only for a key not written at all.

    A key that is not an option is refused with a :class:`TypeError` naming the known ones; a
    key the adapter sets itself (``set_by_adapter``: key -> why) is refused with the reason.
    Raised while the manager is built, so the CLI reports it and exits 2, as for any bad
    keyword argument."""
    for key in written:
        if key in (set_by_adapter or {}):
            raise TypeError(f"{owner}: {key!r} cannot be set: {(set_by_adapter or {})[key]}")
        if key not in known:
            options = f"its options are {', '.join(known)}" if known else "it has no options"
            raise TypeError(
                f"{owner} has no option {key!r}; {options} (and max_tokens, the budget when a "
                "request names none)"
            )
    return {**(defaults or {}), **written}


class LibraryAdapter:
    """The context contract over a library: the fallback budget and the budget of a request.

    ``max_tokens``: the fallback budget; ``hooks``: where events would go (adapters emit
    none: the libraries have no compaction events).
    """

    ctxkit_shapes: tuple[Shape, ...] = ("openai", "anthropic")
    """The message shapes the adapter carries into its library's types; a message in another
    is refused on add. It is the declaration ctxkit.shapes.spoken reads: the suite judges the
    adapter in these shapes."""

    def __init__(self, max_tokens: int = DEFAULT_MAX_TOKENS, hooks: Any = None) -> None:
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        self.max_tokens = max_tokens
        self.hooks = hooks

    def budget(self, token_budget: int | None, provider: Any) -> int:
        """``token_budget``; else the provider's context window minus its output tokens;
        else ``max_tokens``."""
        if token_budget is not None:
            return token_budget
        defaults = getattr(getattr(provider, "get_info", lambda: None)(), "defaults", None)
        if isinstance(defaults, dict) and "context_window" in defaults:
            return int(defaults["context_window"]) - int(defaults.get("max_output_tokens", 0))
        return self.max_tokens


class StoredHistory(LibraryAdapter):
    """ctxkit's store of the history under a library's view: each message checked by
    :meth:`check` as it enters, copies in and out."""

    def __init__(self, max_tokens: int = DEFAULT_MAX_TOKENS, hooks: Any = None) -> None:
        super().__init__(max_tokens, hooks)
        self._history: list[dict[str, Any]] = []

    def check(self, message: Any, index: int | None = None) -> None:
        """Refuse (``InvalidMessage``) a message the library cannot take: by default, one
        in none of :attr:`ctxkit_shapes`."""
        inspect_message(message, index, shapes=self.ctxkit_shapes)

    async def add_message(self, message: dict[str, Any]) -> None:
        self.check(message)
        self._history.append(copy_message(message))

    async def get_messages(self) -> list[dict[str, Any]]:
        return copy_message(self._history)

    async def set_messages(self, messages: Sequence[dict[str, Any]]) -> None:
        messages = list(messages)
        for index, message in enumerate(messages):
            self.check(message, index)
        validate_history(messages)  # and no call id used twice
        self._history = [copy_message(m) for m in messages]

    async def clear(self) -> None:
        self._history = []


class TrimmingAdapter(StoredHistory):
    """A library's trimming function over ctxkit's store of the history. Subclasses
    implement :meth:`trim`."""

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict[str, Any]]:
        budget = self.budget(token_budget, provider)
        return self.trim(copy_message(self._history), budget)

    def trim(self, history: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
        """The view: the library's answer for ``history`` (a copy) under ``budget``."""
        raise NotImplementedError
