"""Every message shape, read by the suite itself: tool calls, tool results, user turns.

The suite must not trust the code it checks, so this reads the six shapes again, independently
of ``ctxkit.shapes``, and strictly. Stdlib only: production code that checks live views imports
it. Every reader takes any JSON value (a view or a recording may hold a number where a message
or its list of calls goes) and finds nothing in what is not the shape it reads, so judging
hostile input ends in findings, never an error. How each shape's results must answer its
calls is its rule set, the data in ``conformance/rules/`` (:mod:`ctxkit.shapes.rules`); what
the messages look like:

- ``openai``: ``tool_calls`` answered by the ``role: tool`` messages right after;
- ``anthropic``: ``tool_use`` blocks answered by the very next (user) message's ``tool_result``
  blocks; server tools answered inside their own message;
- ``responses``: ``function_call`` (and the other client call items) answered by the ``*_output``
  items right after, by ``call_id``;
- ``gemini``: ``functionCall`` parts answered by the very next turn's ``functionResponse`` parts,
  by ``id``, else by position and name;
- ``bedrock``: ``toolUse`` blocks answered by the very next message's ``toolResult`` blocks;
- ``genai``: ``tool_call`` parts answered by the ``tool`` messages right after.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "THINKING",
    "blocks",
    "calls",
    "family",
    "is_call_item",
    "is_result",
    "is_result_message",
    "newest_user_message",
    "positional",
    "reasoning_id",
    "results",
    "server_results",
    "tool_ids",
    "user_turn",
]

_CALL_ITEMS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "shell_call",
        "apply_patch_call",
        "program",
    }
)
_OUTPUT_ITEMS = frozenset(f"{kind}_output" for kind in _CALL_ITEMS)
THINKING = frozenset({"thinking", "redacted_thinking"})


def _kind(message: Any) -> str | None:
    """A message's ``type`` where it is text (a hostile one may hold a list there)."""
    kind = message.get("type") if isinstance(message, Mapping) else None
    return kind if isinstance(kind, str) else None


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    """The dicts of a list (none of anything else)."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def blocks(message: Any) -> list[Mapping[str, Any]]:
    """The dict blocks of a message's list content (none for string content)."""
    return _dicts(message.get("content")) if isinstance(message, Mapping) else []


def _parts(message: Any) -> list[Mapping[str, Any]]:
    return _dicts(message.get("parts")) if isinstance(message, Mapping) else []


def family(message: Any) -> str:
    """The shape whose tool traffic the message carries (``openai`` when it has none)."""
    if not isinstance(message, Mapping):
        return "openai"
    kind = _kind(message)
    if kind in _CALL_ITEMS or kind in _OUTPUT_ITEMS or kind == "reasoning":
        return "responses"
    if "parts" in message:
        if any("type" in p for p in _parts(message)):
            return "genai"
        return "gemini"
    content = blocks(message)
    if any("toolUse" in b or "toolResult" in b for b in content):
        return "bedrock"
    if any(b.get("type") in ("tool_use", "tool_result") for b in content):
        return "anthropic"
    return "openai"


def _gemini_call(part: Mapping[str, Any]) -> Any:
    return part.get("functionCall", part.get("function_call"))


def _gemini_response(part: Mapping[str, Any]) -> Any:
    return part.get("functionResponse", part.get("function_response"))


def _keyed(bodies: list[Mapping[str, Any]]) -> list[str]:
    """Ids where the provider has them, else ``name#position``."""
    found = []
    for position, body in enumerate(bodies):
        call_id = body.get("id")
        found.append(str(call_id) if call_id else f"{body.get('name')}#{position}")
    return found


def calls(message: Any) -> list[str]:
    """The ids a message calls (client tools only), in order, whatever its shape."""
    if not isinstance(message, Mapping):
        return []
    kind = _kind(message)
    if kind in _CALL_ITEMS:
        return [str(message.get("call_id"))]
    if "parts" in message:
        parts = _parts(message)
        gemini = [_gemini_call(p) for p in parts]
        found = [c for c in gemini if isinstance(c, Mapping)]
        found += [p for p in parts if p.get("type") == "tool_call"]
        return _keyed(found)
    if message.get("role") != "assistant":
        return []
    ids = [str(c.get("id")) for c in _dicts(message.get("tool_calls"))]
    for block in blocks(message):
        if block.get("type") == "tool_use":
            ids.append(str(block.get("id")))
        elif isinstance(block.get("toolUse"), Mapping):
            ids.append(str(block["toolUse"].get("toolUseId")))
    return ids


def results(message: Any) -> list[str]:
    """Call ids a message answers, whatever its shape."""
    if not isinstance(message, Mapping):
        return []
    kind = _kind(message)
    if kind in _OUTPUT_ITEMS:
        return [str(message.get("call_id"))]
    if message.get("role") == "tool" and "parts" not in message:
        return [str(message.get("tool_call_id"))]
    if "parts" in message:
        parts = _parts(message)
        gemini = [_gemini_response(p) for p in parts]
        found = [r for r in gemini if isinstance(r, Mapping)]
        found += [p for p in parts if p.get("type") == "tool_call_response"]
        return _keyed(found)
    ids = []
    for block in blocks(message):
        if block.get("type") == "tool_result":
            ids.append(str(block.get("tool_use_id")))
        elif isinstance(block.get("toolResult"), Mapping):
            ids.append(str(block["toolResult"].get("toolUseId")))
    return ids


def positional(message: Any) -> bool:
    """Some of the message's calls or results have no id and are known by ``name#position``
    (Gemini and GenAI parts allow that)."""
    bodies = []
    for part in _parts(message):
        if part.get("type") in ("tool_call", "tool_call_response"):
            bodies.append(part)
        for body in (_gemini_call(part), _gemini_response(part)):
            if isinstance(body, Mapping):
                bodies.append(body)
    return any(not body.get("id") for body in bodies)


def tool_ids(message: Any) -> tuple[str, ...]:
    """Every call and result id a message carries, calls first (positional keys left out:
    they name a place, not a call)."""
    if positional(message):
        return ()
    return (*calls(message), *results(message))


def is_result(message: Any) -> bool:
    """The message answers a tool call."""
    return bool(results(message))


def is_result_message(message: Any) -> bool:
    """A message that carries results, the kind that follows a call in ``following`` shapes:
    a ``role: tool`` message, a ``*_output`` item, a GenAI ``tool`` message, or a GenAI
    ``user`` message that starts with ``tool_call_response`` parts (how instrumentations of
    Anthropic's API record its ``tool_result`` blocks)."""
    if not isinstance(message, Mapping):
        return False
    if _kind(message) in _OUTPUT_ITEMS:
        return True
    if message.get("role") == "tool":
        return bool(results(message))
    parts = _parts(message)
    return (
        message.get("role") == "user"
        and bool(parts)
        and parts[0].get("type") == "tool_call_response"
    )


def is_call_item(message: Any) -> bool:
    """A Responses client call item (parallel calls come as several, one after another)."""
    return isinstance(message, Mapping) and _kind(message) in _CALL_ITEMS


def reasoning_id(message: Any) -> str | None:
    """The id of a Responses ``reasoning`` item (``""`` when it has none); None otherwise."""
    if isinstance(message, Mapping) and message.get("type") == "reasoning":
        return str(message.get("id") or "")
    return None


def server_results(message: Any) -> list[tuple[int, str, str]]:
    """Anthropic server tool traffic in an assistant message: ``(block, kind, id)`` for each
    ``server_tool_use`` / ``mcp_tool_use`` (kind ``call``) and each result block answering one
    (kind ``result``), in order."""
    found = []
    for position, block in enumerate(blocks(message)):
        kind = str(block.get("type"))
        if kind in ("server_tool_use", "mcp_tool_use"):
            found.append((position, "call", str(block.get("id"))))
        elif kind.endswith("_tool_result") and kind != "tool_result":
            found.append((position, "result", str(block.get("tool_use_id"))))
    return found


def user_turn(message: Any) -> bool:
    """A user message that is the user's turn (words of their own), not only tool results."""
    if not isinstance(message, Mapping) or message.get("role") != "user":
        return False
    if results(message):
        return False
    return message.get("type") in (None, "message")


def newest_user_message(history: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the newest user message that is the user's turn, not only tool results."""
    return next((i for i in range(len(history) - 1, -1, -1) if user_turn(history[i])), None)
