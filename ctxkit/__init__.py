"""ctxkit: make LLM context managers observable and testable.

The public face: the reference manager, exact token counts, message shapes and events.
Names are imported when first used, so that a light part (``ctxkit.conformance.judge.invariants``,
``ctxkit --help``) does not load the tokenizer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxkit.events import Event, EventBus
    from ctxkit.messages import InvalidMessage, group_units, results_of, tool_calls_of
    from ctxkit.reference import (
        ConfigError,
        ContextBudgetExceeded,
        ReferenceContextManager,
        mount,
    )
    from ctxkit.tokens import TokenCounter

__version__ = "0.1.0"

_HOMES = {
    "Event": "ctxkit.events",
    "EventBus": "ctxkit.events",
    "InvalidMessage": "ctxkit.messages",
    "group_units": "ctxkit.messages",
    "results_of": "ctxkit.messages",
    "tool_calls_of": "ctxkit.messages",
    "ConfigError": "ctxkit.reference",
    "ContextBudgetExceeded": "ctxkit.reference",
    "ReferenceContextManager": "ctxkit.reference",
    "mount": "ctxkit.reference",
    "TokenCounter": "ctxkit.tokens",
}

__all__ = [
    "ConfigError",
    "ContextBudgetExceeded",
    "Event",
    "EventBus",
    "InvalidMessage",
    "ReferenceContextManager",
    "TokenCounter",
    "__version__",
    "group_units",
    "mount",
    "results_of",
    "tool_calls_of",
]
"""The lazy names of :data:`_HOMES` (spelled out, so linters and type checkers see them)."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ctxkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
