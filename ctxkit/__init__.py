"""ctxkit: make LLM context managers observable and testable.

The public face: the reference manager, exact token counts, message shapes and events.
"""

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
