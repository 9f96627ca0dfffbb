"""Permissive managers, as most real ones are: each stores any dict it is given, but reads only
one shape's tool traffic; a message of another shape is plain text to it. Each is correct in
its own shape, so the default run must pass it, judged in the shape it declares (the Chat
Completions one declares nothing: that is the default). Beside them, broken twins that keep the
newest messages whatever they are: the default run must still catch those. And a store that
keeps a single text part as a plain string, as llama-index's ``Memory`` does: providers read
the two as the same, so it must pass.

Stdlib only, and nothing of ctxkit (the shapes are read by tests/zoo/shapes.py's own words).
"""

from __future__ import annotations

from typing import Any, ClassVar

from tests.zoo.base import GoodManager, clone
from tests.zoo.shapes import ShapesManager, kind_of

PLAIN = {"role": "user", "content": "(a message this manager does not read)"}


class Permissive(ShapesManager):
    """Takes any dict; plans whole units of its own shape (``reads``) and treats every other
    message as plain text."""

    reads: tuple[str, ...] = ("openai",)
    ctxkit_shapes: Any = None  # the Chat Completions one declares nothing: the default

    def _validate(self, message: Any) -> None:
        if not isinstance(message, dict):
            raise ValueError(f"a message must be a dict, not {type(message).__name__}")

    def _units(self, history: list[Any]) -> list[tuple[list[int], bool]]:
        known = (*self.reads, "plain")
        return super()._units([m if kind_of(m) in known else PLAIN for m in history])


class PermissiveChat(Permissive):
    """Chat Completions only, declaring nothing: judged as Chat Completions by default."""


class PermissiveAnthropic(Permissive):
    reads = ("anthropic",)
    ctxkit_shapes = "anthropic"


class PermissiveResponses(Permissive):
    reads = ("responses", "reasoning")
    ctxkit_shapes = "responses"


class PermissiveGemini(Permissive):
    reads = ("gemini",)
    ctxkit_shapes = ("gemini",)


class PermissiveBedrock(Permissive):
    reads = ("bedrock",)
    ctxkit_shapes: ClassVar[list[str]] = ["bedrock"]  # a list is a declaration too


class PermissiveGenai(Permissive):
    reads = ("genai",)
    ctxkit_shapes = "genai"


class _Newest:
    """The broken twin's fault: the newest four messages, whatever they are."""

    def _render(self, history: list[Any], kept: list[int]) -> list[dict]:
        return clone(history[-4:])


class NewestChat(_Newest, PermissiveChat):
    pass


class NewestGemini(_Newest, PermissiveGemini):
    pass


class NewestResponses(_Newest, PermissiveResponses):
    pass


class GeminiContents(ShapesManager):
    """A Gemini-contents store as a Gemini agent keeps one: roles user and model with parts,
    and nothing else, not even a system message (Gemini carries the system instruction beside
    the contents). It declares nothing: it must pass with --shapes gemini."""

    ctxkit_shapes = None

    def _validate(self, message: Any) -> None:
        if not (
            isinstance(message, dict)
            and message.get("role") in ("user", "model")
            and isinstance(message.get("parts"), list)
        ):
            raise ValueError("a Gemini content has role user or model, and parts")


class TextPartsAsStrings(GoodManager):
    """Stores a message whose content is a single text part as that text, as llama-index's
    Memory does: the same message to any provider."""

    def _stored(self, message: dict) -> Any:
        stored = clone(message)
        content = stored.get("content")
        if (
            isinstance(content, list)
            and len(content) == 1
            and isinstance(content[0], dict)
            and content[0].get("type") == "text"
            and set(content[0]) == {"type", "text"}
        ):
            stored["content"] = content[0]["text"]
        return stored
