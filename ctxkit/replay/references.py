"""References kept: of what the model's next answer uses from earlier in the conversation, the
share still in the view it was given.

A deterministic stand-in for "context the model needed and still had". A *reference* is a
piece of the answer's text of one of four kinds:

- a quoted string: text between a pair of ``'``, ``"`` or backticks on one line, 3 to 200
  characters;
- a path: ``a/b`` or ``a\\b`` runs of path characters with a separator between two names, or
  a file name with an extension (``store.py``, ``config.yaml``);
- a number of three or more digits, or with a decimal point (``6543``, ``0.25``);
- an identifier: a name with an underscore, a dot between names, or a lower-case letter
  followed by a capital (``max_tokens``, ``os.path``, ``getMessages``), 4 characters or more.

A reference inside a longer one counts once, as the longer (``config/db.yaml``, not also
``db.yaml``). It counts when it also appears, verbatim, in the text of a message the agent added
before the call (the model could not have known it otherwise, so the context had to carry
it); it is *kept* when it appears verbatim in the view's text, in any message, a summary
included. Texts are what a message says: its strings (content, arguments, outputs), not its
structure (roles, part types, ids, tool names: :data:`STRUCTURE`).

Blind spots: a reference restated in other words (a summary that says "the port" for 6543)
counts as lost; a common string that happens to be anywhere in the view counts as kept; what
the model needed but did not repeat in its answer is not seen; an answer the model would have
given differently with a different view is not known (the recorded answer is the one scored).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["kept", "references", "text_of"]

_PATTERNS = (
    re.compile(r"'([^'\n]{3,200})'|\"([^\"\n]{3,200})\"|`([^`\n]{3,200})`"),
    re.compile(
        r"(?<![\w.-])[/\\]?(?:[\w.-]+[/\\])+[\w.-]+|(?<![\w/\\.-])[\w-]+\.[A-Za-z][A-Za-z0-9]{0,4}\b"
    ),
    re.compile(r"(?<![\w.])(?:\d{3,}(?:\.\d+)?|\d+\.\d+)(?![\w.]*\w)"),
    re.compile(r"\b[A-Za-z_]\w*(?:(?:_|\.)\w+)+\b|\b[a-z]+[A-Z]\w*\b"),
)


STRUCTURE = frozenset(
    {
        "role",
        "type",
        "id",
        "call_id",
        "tool_call_id",
        "tool_use_id",
        "toolUseId",
        "name",
        "finish_reason",
        "status",
        "signature",
        "cache_control",
    }
)
"""Keys whose values are a message's structure, not what it says: roles, part types, ids,
tool names (from the tool list, not the conversation), a thinking block's signature."""


def text_of(messages: Iterable[Any]) -> str:
    """What the messages say: every string in them but those under :data:`STRUCTURE` keys,
    one per line."""
    found: list[str] = []
    stack = list(messages)[::-1]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, Mapping):
            stack.extend(reversed([v for k, v in value.items() if k not in STRUCTURE]))
        elif isinstance(value, list | tuple):
            stack.extend(reversed(value))
    return "\n".join(found)


def references(answer: str, earlier: Iterable[str]) -> set[str]:
    """The references of ``answer`` (see the module) that appear in one of the ``earlier``
    texts (looked through only when the answer has a reference)."""
    found: set[str] = set()
    for pattern in _PATTERNS:
        for match in pattern.finditer(answer):
            groups = [g for g in match.groups() if g] if match.groups() else []
            text = groups[0] if groups else match.group(0).rstrip(".-")
            if len(text) >= 3 and (len(text) >= 4 or text[0].isdigit()):
                found.add(text)
    longest = {ref for ref in found if not any(ref != other and ref in other for other in found)}
    if not longest:
        return set()
    seen: set[str] = set()
    for text in earlier:
        seen.update(ref for ref in longest - seen if ref in text)
        if len(seen) == len(longest):
            break
    return seen


def kept(refs: Iterable[str], texts: Sequence[str]) -> int:
    """How many of ``refs`` the view's message texts hold, verbatim."""
    return sum(1 for ref in refs if any(ref in text for text in texts))
