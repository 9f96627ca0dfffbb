"""Rewrites of a message into an equivalent shape, as real managers make them: what the suite
must still see as the same message (see conformance/comes_from.json)."""

from __future__ import annotations

import copy
import json
from typing import Any

REWRITES = (
    "text-shape",
    "empty-content",
    "arguments",
    "unknown-keys",
    "annotations",
)


def _flip_text(content: Any) -> Any:
    """A string as one text block, one text block as a string; other content as it is."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else None
    if (
        isinstance(content, list)
        and len(content) == 1
        and isinstance(content[0], dict)
        and content[0].get("type") == "text"
    ):
        return content[0]["text"]
    return content


def _reserialize(arguments: Any) -> Any:
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError):
        return arguments
    if isinstance(value, dict):
        value = dict(reversed(list(value.items())))
    return json.dumps(value, indent=1)


def rewrite(message: dict[str, Any], how: str) -> dict[str, Any]:
    """``message`` rewritten the way ``how`` (one of :data:`REWRITES`) names; a new dict."""
    out = copy.deepcopy(message)
    if how == "text-shape":
        out["content"] = _flip_text(out.get("content"))
        for block in out["content"] if isinstance(out["content"], list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                block["content"] = _flip_text(block.get("content"))
    elif how == "empty-content":
        content = out.get("content")
        if content is None:
            out["content"] = ""
        elif content in ("", []):
            out["content"] = None
    elif how == "arguments":
        for call in out.get("tool_calls") or ():
            call.pop("type", None)
            call["function"]["arguments"] = _reserialize(call["function"]["arguments"])
    elif how == "unknown-keys":
        out["id"] = "msg_x"  # a key the history does not have: not compared
        out.pop("name", None)  # a key the manager does not model: dropped
    elif how == "annotations":
        out["metadata"] = {"seen": True}
        if isinstance(out.get("content"), list):
            for block in out["content"]:
                if isinstance(block, dict):
                    block["cache_control"] = {"type": "ephemeral"}
    else:
        raise ValueError(f"unknown rewrite {how!r}; choose from {REWRITES}")
    return out
