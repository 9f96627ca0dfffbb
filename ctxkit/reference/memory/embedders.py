"""Embedders: anything that turns a list of texts into one vector per text.

A plain callable (``texts -> vectors``, sync or async) is an embedder; vectors may be lists of
floats or NumPy arrays. An embedder may also have ``embed_query(texts)`` for queries (models
trained with separate query and passage prompts use it) and a ``name``, kept in the memory
file so that vectors from another model are never compared with its own.

Ready ones, each importing its library only when made:

* :class:`FastEmbedEmbedder`: ``fastembed`` (ONNX, CPU), e.g. ``BAAI/bge-small-en-v1.5``;
* :class:`SentenceTransformerEmbedder`: ``sentence-transformers``, any model it loads;
* :class:`OpenAIEmbedder`: an OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Azure, a
  local Ollama, vLLM or llama.cpp server) through the ``openai`` client and a ``base_url``;
* :class:`HashEmbedder`: hashed bag of words, no model. Deterministic and instant, for tests
  and benchmarks: it knows which words two texts share, nothing of what they mean.
"""

from __future__ import annotations

import array
import asyncio
import hashlib
import inspect
import math
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ctxkit.reference.memory.errors import EmbedderError, MemoryUnavailable

__all__ = [
    "Embedder",
    "FastEmbedEmbedder",
    "HashEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "embed",
    "embedder_name",
    "pack",
]

Vectors = Sequence[Sequence[float]]
Embedder = Callable[[list[str]], Vectors | Awaitable[Vectors]]


def embedder_name(embedder: Any) -> str:
    """What the memory file records of an embedder: its ``name``, else its class or function."""
    name = getattr(embedder, "name", None)
    if isinstance(name, str) and name:
        return name
    kind = (
        embedder if inspect.isfunction(embedder) or inspect.ismethod(embedder) else type(embedder)
    )
    return f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', '?')}"


async def embed(embedder: Embedder, texts: list[str], *, query: bool = False) -> Vectors:
    """Call ``embedder`` (its ``embed_query`` for a query, if it has one) off the event loop
    when it is synchronous. Raises :class:`EmbedderError` when it fails."""
    function: Any = (query and getattr(embedder, "embed_query", None)) or embedder
    try:
        if inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
            getattr(function, "__call__", None)  # noqa: B004 - an object with an async __call__
        ):
            result = await function(texts)
        else:
            result = await asyncio.to_thread(function, texts)
            if inspect.isawaitable(result):
                result = await result
    except (EmbedderError, MemoryUnavailable):
        raise
    except Exception as exc:
        raise EmbedderError(
            f"the embedder {embedder_name(embedder)} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return result


def pack(vectors: Any, count: int, dimensions: int | None, who: str) -> tuple[list[bytes], int]:
    """Each vector as float32 bytes, and their size; checks there is one per text, all of
    ``dimensions`` (when known) and every number finite."""
    try:
        rows = [array.array("f", vector) for vector in vectors]
    except (TypeError, ValueError, OverflowError) as exc:
        raise EmbedderError(
            f"the embedder {who} returned something other than vectors: {exc}"
        ) from None
    if len(rows) != count:
        raise EmbedderError(f"the embedder {who} returned {len(rows)} vectors for {count} texts")
    size = dimensions or (len(rows[0]) if rows else 0)
    for row in rows:
        if not row:
            raise EmbedderError(f"the embedder {who} returned an empty vector")
        if len(row) != size:
            raise EmbedderError(
                f"the embedder {who} returned a vector of {len(row)} numbers where "
                f"{size} were expected"
                + (" (the size this memory's vectors have)" if dimensions else "")
            )
        if not all(map(math.isfinite, row)):
            raise EmbedderError(f"the embedder {who} returned a vector with NaN or infinity")
    return [row.tobytes() for row in rows], size


class HashEmbedder:
    """Each word (case-folded letters and digits) adds a signed 1 to one of ``dimensions``
    buckets chosen by a BLAKE2 hash; the vector is then normalized. Texts sharing words are
    close, others near orthogonal. No model, no randomness, the same in every process."""

    def __init__(self, dimensions: int = 256) -> None:
        if not isinstance(dimensions, int) or dimensions < 2:
            raise ValueError(f"dimensions must be an integer of at least 2, got {dimensions!r}")
        self.dimensions = dimensions
        self.name = f"hash-{dimensions}"
        self._buckets: dict[str, tuple[int, float]] = {}

    def _bucket(self, word: str) -> tuple[int, float]:
        found = self._buckets.get(word)
        if found is None:
            digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            found = (digest % self.dimensions, 1.0 if digest >> 63 else -1.0)
            if len(self._buckets) < 1_000_000:
                self._buckets[word] = found
        return found

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in re.findall(r"[^\W_]+", text.casefold()):
                index, sign = self._bucket(word)
                vector[index] += sign
            norm = math.sqrt(sum(value * value for value in vector)) or 1.0
            vectors.append([value / norm for value in vector])
        return vectors


def _missing(library: str, wrapper: str) -> MemoryUnavailable:
    return MemoryUnavailable(
        f"{wrapper} needs the {library} package, which is not installed: pip install {library} "
        "(it downloads its model on first use, unless the model is already on this machine)"
    )


class FastEmbedEmbedder:
    """``fastembed.TextEmbedding(model, **options)``: ``embed`` for what is stored,
    ``query_embed`` for queries. ``options`` go to fastembed (``cache_dir``, ``threads``,
    ``local_files_only``, ...)."""

    def __init__(self, model: str = "BAAI/bge-small-en-v1.5", **options: Any) -> None:
        try:
            from fastembed import TextEmbedding  # type: ignore[import-not-found]
        except ImportError:
            raise _missing("fastembed", "FastEmbedEmbedder") from None
        try:
            self.model = TextEmbedding(model_name=model, **options)
        except Exception as exc:
            raise EmbedderError(f"fastembed cannot load the model {model!r}: {exc}") from exc
        self.name = f"fastembed:{model}"

    def __call__(self, texts: Sequence[str]) -> list[Any]:
        return list(self.model.embed(list(texts)))

    def embed_query(self, texts: Sequence[str]) -> list[Any]:
        return list(self.model.query_embed(list(texts)))


class SentenceTransformerEmbedder:
    """``sentence_transformers.SentenceTransformer(model, **options)``: ``encode_document`` and
    ``encode_query`` where the library has them (5.0 and later; they apply the model's own
    prompts), else ``encode``. ``options`` go to the library (``device``, ``cache_folder``,
    ``local_files_only``, ...)."""

    def __init__(self, model: str = "sentence-transformers/all-MiniLM-L6-v2", **options: Any):
        try:
            from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]
        except ImportError:
            raise _missing("sentence-transformers", "SentenceTransformerEmbedder") from None
        try:
            self.model = SentenceTransformer(model, **options)
        except Exception as exc:
            raise EmbedderError(
                f"sentence-transformers cannot load the model {model!r}: {exc}"
            ) from exc
        self.name = f"sentence-transformers:{model}"

    def _encode(self, method: str, texts: Sequence[str]) -> Any:
        encode = getattr(self.model, method, None) or self.model.encode
        return encode(list(texts), convert_to_numpy=True, show_progress_bar=False)

    def __call__(self, texts: Sequence[str]) -> Any:
        return self._encode("encode_document", texts)

    def embed_query(self, texts: Sequence[str]) -> Any:
        return self._encode("encode_query", texts)


class OpenAIEmbedder:
    """POST ``{base_url}/embeddings`` through ``openai.AsyncOpenAI``, ``batch`` texts a request.

    ``base_url`` None means the client's default (``OPENAI_BASE_URL``, else OpenAI's). The key
    is ``api_key``, else ``OPENAI_API_KEY``, else a placeholder: local servers take none.
    ``dimensions`` asks models that can shorten their vectors for that size. ``options`` go
    to the client (``timeout``, ``max_retries``, ...).
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch: int = 256,
        **options: Any,
    ) -> None:
        try:
            import openai
        except ImportError:
            raise _missing("openai", "OpenAIEmbedder") from None
        self._errors: tuple[type[Exception], ...] = (openai.OpenAIError,)
        key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
        self.client = openai.AsyncOpenAI(base_url=base_url, api_key=key, **options)
        self.model, self.dimensions, self.batch = model, dimensions, max(1, batch)
        self.name = f"openai:{model}" + (f"@{dimensions}" if dimensions else "")

    async def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        extra = {"dimensions": self.dimensions} if self.dimensions else {}
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch):
            chunk = list(texts[start : start + self.batch])
            try:
                response = await self.client.embeddings.create(
                    model=self.model, input=chunk, encoding_format="float", **extra
                )
            except self._errors as exc:
                raise EmbedderError(
                    f"the embeddings endpoint {self.client.base_url} refused {len(chunk)} "
                    f"texts for {self.model!r}: {exc}"
                ) from None
            rows = sorted(response.data, key=lambda row: row.index)
            vectors += [list(row.embedding) for row in rows]
        return vectors
