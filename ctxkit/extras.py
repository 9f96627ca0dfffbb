"""The distribution's name on PyPI and its extras: which optional module each extra brings, and
the line that installs it.

The import package and the command are ``ctxkit``; the distribution is ``ctxkit-llm``, because
``ctxkit`` on PyPI is another project (a prompt tool with a ``ctxkit`` command and a ``ctxkit``
import package of its own: the two cannot share an environment). Every install line ctxkit
prints comes from :func:`install_line`, so none names the other project.
"""

from __future__ import annotations

__all__ = ["DISTRIBUTION", "MissingExtra", "extra_for", "install_line"]

DISTRIBUTION = "ctxkit-llm"

_EXTRA_OF_MODULE = {
    "grpc": "grpc",
    "opentelemetry.sdk": "otel",
    "opentelemetry.exporter": "otel",
    "zstandard": "audit",
    "amplifier_core": "amplifier",
    "sqlite_vec": "memory",
    "pysqlite3": "memory",
    "langchain_core": "langchain",
    "strands": "strands",
    "llama_index": "llama-index",
    "semantic_kernel": "semantic-kernel",
    "autogen_core": "autogen",
    "langgraph": "langgraph",
    "pydantic_ai": "pydantic-ai",
    "agents": "openai-agents",
    "google.adk": "google-adk",
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
}
"""A missing module (or the package it is in) and the extra that installs it."""


def install_line(extra: str) -> str:
    """The pip line that installs one extra of this distribution."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def extra_for(module: str | None) -> str | None:
    """The extra that installs ``module`` (a dotted name, as ``ModuleNotFoundError.name``
    gives it), or None when no extra does: then its absence is a bug of the install."""
    parts = (module or "").split(".")
    for length in range(len(parts), 0, -1):
        extra = _EXTRA_OF_MODULE.get(".".join(parts[:length]))
        if extra is not None:
            return extra
    return None


class MissingExtra(ImportError):
    """A feature was asked for whose extra is not installed: the user's to install (exit 2)."""

    def __init__(self, feature: str, extra: str, detail: str = "") -> None:
        self.extra = extra
        said = f" ({detail})" if detail else ""
        super().__init__(f"{feature} needs the '{extra}' extra{said}: {install_line(extra)}")
