"""The reference context manager and its Amplifier ``mount()``."""

from ctxkit.reference.manager import ConfigError, ContextBudgetExceeded, ReferenceContextManager
from ctxkit.reference.mount import mount
from ctxkit.reference.scratch import scratch_manager
from ctxkit.reference.strategies import STRATEGIES, extractive_summary

__all__ = [
    "STRATEGIES",
    "ConfigError",
    "ContextBudgetExceeded",
    "ReferenceContextManager",
    "extractive_summary",
    "mount",
    "scratch_manager",
]
