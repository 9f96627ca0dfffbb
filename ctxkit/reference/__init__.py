"""The reference context manager and its Amplifier ``mount()``."""

from ctxkit.reference.drilldown import RecallTool, recall_tool
from ctxkit.reference.journal import HistoryFileCorrupt, HistoryFileError, HistoryFileLocked
from ctxkit.reference.manager import ConfigError, ContextBudgetExceeded, ReferenceContextManager
from ctxkit.reference.memory import SemanticMemory
from ctxkit.reference.mount import mount
from ctxkit.reference.scratch import scratch_manager
from ctxkit.reference.strategies import STRATEGIES, extractive_summary, extractive_unit_summary
from ctxkit.reference.timeline import UnknownCheckpoint
from ctxkit.reference.working_state import TaskError

__all__ = [
    "STRATEGIES",
    "ConfigError",
    "ContextBudgetExceeded",
    "HistoryFileCorrupt",
    "HistoryFileError",
    "HistoryFileLocked",
    "RecallTool",
    "ReferenceContextManager",
    "SemanticMemory",
    "TaskError",
    "UnknownCheckpoint",
    "extractive_summary",
    "extractive_unit_summary",
    "mount",
    "recall_tool",
    "scratch_manager",
]
