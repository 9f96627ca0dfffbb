"""The reference context manager and its Amplifier ``mount()``."""

from ctxkit.reference.journal import HistoryFileCorrupt, HistoryFileError, HistoryFileLocked
from ctxkit.reference.manager import ConfigError, ContextBudgetExceeded, ReferenceContextManager
from ctxkit.reference.mount import mount
from ctxkit.reference.scratch import scratch_manager
from ctxkit.reference.strategies import STRATEGIES, extractive_summary
from ctxkit.reference.timeline import UnknownCheckpoint

__all__ = [
    "STRATEGIES",
    "ConfigError",
    "ContextBudgetExceeded",
    "HistoryFileCorrupt",
    "HistoryFileError",
    "HistoryFileLocked",
    "ReferenceContextManager",
    "UnknownCheckpoint",
    "extractive_summary",
    "mount",
    "scratch_manager",
]
