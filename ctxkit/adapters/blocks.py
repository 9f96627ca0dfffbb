"""Reading the two JSON message shapes the way every adapter's conversion needs: which blocks
are Anthropic tool traffic, and the text of a content (a string, or a list of blocks)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["is_tool_result", "is_tool_use", "text_of"]


def is_tool_use(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_use"


def is_tool_result(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result"


def text_of(content: Any) -> str:
    """A content's text: a string as it is; a list's text blocks (others as JSON), a line each;
    anything else, empty."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"]
            if isinstance(b, dict) and isinstance(b.get("text"), str)
            else json.dumps(b, ensure_ascii=False, default=str)
            for b in content
        )
    return ""
