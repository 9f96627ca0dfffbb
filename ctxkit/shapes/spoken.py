"""Which message shapes a target is judged in, and why: the one place that decides it.

Most context managers are written for one provider's messages and refuse nothing: they take
any dict and misread the shapes they were never meant for. Judging them in a shape they do not
speak accuses correct code, so a target is judged only in the shapes it is known to speak, in
this order:

1. ``--shapes`` (``--ctxkit-shapes``, ``ConformanceSuite.shapes``), when given;
2. what the target declares: an attribute :data:`DECLARATION` (``ctxkit_shapes``) on the
   class, factory, function, session object or mount module the target names, or the same key
   in ``--config``;
3. what an adapter knows its library speaks (each adapter class declares it the same way);
4. an Amplifier module (``mount()``, or served over gRPC): Amplifier's own message model, whose
   messages are Chat Completions ones with Anthropic content blocks beside them;
5. anything else: Chat Completions alone (:data:`DEFAULT`), and the report says how to judge
   more.

A declaration is ``"all"``, a comma-separated string (``"gemini"``, ``"openai,anthropic"``) or a
sequence of names. The runner, the pytest plugin, the survey and the adapters all read this
module; it imports nothing of theirs.
"""

from __future__ import annotations

import difflib
import inspect
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ctxkit.shapes import SHAPES, Shape
from ctxkit.shapes.rules import rule_set

__all__ = [
    "CHAT_FAMILY",
    "DECLARATION",
    "DEFAULT",
    "ShapeError",
    "Source",
    "Spoken",
    "decide",
    "declared_by",
    "format_name",
    "parse_shapes",
    "split_config",
]

DECLARATION = "ctxkit_shapes"
"""The attribute (and ``--config`` key) that names the shapes a target speaks."""

DEFAULT: tuple[Shape, ...] = ("openai",)
"""What a target is judged in when nothing says otherwise: Chat Completions, the shape most
managers are written for."""

CHAT_FAMILY: tuple[Shape, ...] = ("openai", "anthropic")
"""Chat Completions and Anthropic messages: Amplifier's message model, and the two shapes
that share their text messages, so that the suite's histories may mix them."""

Source = Literal["shapes", "config", "declared", "adapter", "amplifier", "form", "default"]

MORE = (
    "judge more with --shapes all (or a list: --shapes openai,anthropic), or declare the "
    "shapes the target speaks: {declaration} (docs: conformance/shapes)"
)
DECLARE = {
    "python": f"{DECLARATION} = ('openai', 'anthropic') on its class or function",
    "javascript": f"static {DECLARATION} = ['openai', 'anthropic'] in its class, or "
    f"fn.{DECLARATION} = ['openai', 'anthropic'] on its function",
}
"""How a target of each language declares the shapes it speaks, in its own syntax."""

JAVASCRIPT = (".mjs", ".js", ".cjs")


class ShapeError(ValueError):
    """A shape list that names no known shape: the user's mistake, said with the choices."""


@dataclass(frozen=True)
class Spoken:
    """The shapes a run judges, where that came from, and a sentence saying why."""

    shapes: tuple[Shape, ...]
    source: Source
    why: str

    @property
    def system_left_out(self) -> dict[str, str]:
        """The shapes judged whose histories carry no system message, each with the request
        field where its API keeps the system prompt instead (Anthropic's histories carry them
        as Chat Completions messages where the two are judged together, as always here)."""
        chat = "openai" in self.shapes
        beside = {shape: rule_set(shape).system for shape in self.shapes}
        return {
            shape: field
            for shape, field in beside.items()
            if field != "messages" and not (shape == "anthropic" and chat)
        }

    def left_out(self) -> str:
        """The sentence for the report: which histories carry no system message, and why;
        empty when every judged shape holds one."""
        away = self.system_left_out
        if not away:
            return ""
        return (
            f"no system messages in {', '.join(away)} histories: the API keeps the system "
            f"prompt beside the messages ({', '.join(f'{s} {f}' for s, f in away.items())}), "
            "so a manager of these shapes may refuse one"
        )

    def hint(self, target: str = "") -> str:
        """How to judge more, for a run that fell back on :data:`DEFAULT`, in the syntax of
        ``target``'s language (a JavaScript file's, or Python's); else empty."""
        if self.source != "default":
            return ""
        path = target.partition(":")[0] if target.partition(":")[0].endswith(JAVASCRIPT) else ""
        language = "javascript" if path or target.endswith(JAVASCRIPT) else "python"
        return MORE.format(declaration=DECLARE[language])

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "judged": list(self.shapes),
            "source": self.source,
            "why": self.why,
        }
        if away := self.system_left_out:
            found["system_left_out"] = away
        return found


def parse_shapes(value: Any, where: str = "--shapes") -> tuple[Shape, ...]:
    """Shape names from ``"all"``, a comma-separated string or a sequence of names (``both``
    is openai,anthropic, as ``--shapes`` has always taken it). Raises :class:`ShapeError`
    naming ``where`` the value came from."""
    if isinstance(value, str):
        words = [w.strip().lower() for w in value.split(",") if w.strip()]
    elif isinstance(value, list | tuple) and all(isinstance(w, str) for w in value):
        words = [w.strip().lower() for w in value]
    else:
        raise ShapeError(
            f"{where} must be 'all', a comma-separated string or a list of shape names, "
            f"got {type(value).__name__}"
        )
    if words == ["all"]:
        return SHAPES
    if words == ["both"]:
        return CHAT_FAMILY
    unknown = [w for w in words if w not in SHAPES]
    if unknown or not words:
        close = difflib.get_close_matches(unknown[0], SHAPES, n=1) if unknown else []
        raise ShapeError(
            f"{where}: unknown shape {', '.join(unknown) or repr(value)}"
            + (f" (did you mean {close[0]}?)" if close else "")
            + f"; choose from {', '.join(SHAPES)}, or all"
        )
    return tuple(dict.fromkeys(words))  # type: ignore[arg-type]


def format_name(shapes: tuple[str, ...]) -> str:
    """How ``--shapes`` writes these shapes."""
    if set(shapes) == set(SHAPES):
        return "all"
    return ",".join(shapes)


def split_config(config: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[Shape, ...] | None]:
    """The config without its :data:`DECLARATION` key (which is the suite's, not the
    target's keyword), and the shapes that key declares."""
    rest = {k: v for k, v in config.items() if k != DECLARATION}
    if DECLARATION not in config:
        return rest, None
    return rest, parse_shapes(config[DECLARATION], f"--config {DECLARATION}")


def declared_by(obj: Any) -> tuple[tuple[Shape, ...], str] | None:
    """The shapes ``obj`` declares, and who declared them: its own :data:`DECLARATION`
    attribute (a class's, a function's, an instance's or its class's), else, for a
    module-level function such as ``mount``, its module's. None when nothing is declared."""
    value = getattr(obj, DECLARATION, None)
    owner = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    if value is None and (inspect.isfunction(obj) or inspect.ismethod(obj)):
        module = getattr(obj, "__module__", "") or ""
        value = getattr(sys.modules.get(module), DECLARATION, None)
        owner = f"module {module}"
    if value is None:
        return None
    return parse_shapes(value, f"{DECLARATION} of {owner}"), owner


def decide(
    asked: tuple[Shape, ...] | None = None,
    *,
    configured: tuple[Shape, ...] | None = None,
    spoken: Spoken | None = None,
) -> Spoken:
    """The shapes a run judges: ``asked`` (``--shapes``), else ``configured`` (the
    ``--config`` key), else what the target said of itself (``spoken``: its declaration, its
    adapter's or Amplifier's model, as the worker found them), else :data:`DEFAULT`."""
    if asked is not None:
        return Spoken(asked, "shapes", f"--shapes {format_name(asked)}")
    if configured is not None:
        return Spoken(configured, "config", f"--config {DECLARATION}")
    if spoken is not None:
        return spoken
    return Spoken(DEFAULT, "default", "nothing declares the shapes the target speaks")
