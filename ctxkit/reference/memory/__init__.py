"""Semantic memory for the reference manager: texts stored with metadata in one SQLite file,
found again by full-text search (FTS5, no model needed), by vector (sqlite-vec, with any
embedder) or both.

    memory = SemanticMemory("conversation.memory")        # or SemanticMemory() in memory
    item = await memory.store("the deploy failed: disk full on db-2", {"index": 41})
    hits = await memory.retrieve("why did the deploy fail?", limit=5)   # scores in [0, 1]
    await memory.update(item, "...")
    await memory.forget(item)
"""

from ctxkit.reference.memory.embedders import (
    Embedder,
    FastEmbedEmbedder,
    HashEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
)
from ctxkit.reference.memory.errors import (
    EmbedderError,
    MemoryFileCorrupt,
    MemoryFileError,
    MemoryFileLocked,
    MemoryUnavailable,
    UnknownMemory,
)
from ctxkit.reference.memory.semantic import (
    DEFAULT_THRESHOLD,
    Hit,
    Item,
    MemoryStats,
    SemanticMemory,
)

__all__ = [
    "DEFAULT_THRESHOLD",
    "Embedder",
    "EmbedderError",
    "FastEmbedEmbedder",
    "HashEmbedder",
    "Hit",
    "Item",
    "MemoryFileCorrupt",
    "MemoryFileError",
    "MemoryFileLocked",
    "MemoryStats",
    "MemoryUnavailable",
    "OpenAIEmbedder",
    "SemanticMemory",
    "SentenceTransformerEmbedder",
    "UnknownMemory",
]
