"""Which history message a view message *comes from*, read as a provider reads messages.

A manager may rewrite a message into an equivalent shape (text blocks as a string, empty
content as ``None``, tool arguments re-serialized, keys it does not model dropped); the
provider sees the same request, so the suite must too. The rules, each also stated as data
with test cases in the top-level ``conformance/comes_from.json``:

- roles must be equal;
- content: a string ``X`` is ``[{"type": "text", "text": X}]``; ``""``, ``None``, ``[]`` and
  no ``content`` key are the same empty content; empty text blocks count as absent; several
  text blocks compare as the list of their texts (a plain string item counts as a text block);
- OpenAI ``tool_calls``: each call by id, ``type`` (``"function"`` when missing), function
  name and ``arguments`` compared as JSON values (as strings when either does not parse);
  ``[]`` is no ``tool_calls`` key;
- Anthropic ``tool_use`` blocks: id, name, and ``input`` as a JSON value; ``tool_result``
  blocks: ``tool_use_id``, content read as above, ``is_error: false`` is no ``is_error``;
- result blocks next to one another (Anthropic ``tool_result``, Bedrock ``toolResult``, Gemini
  ``functionResponse``, GenAI ``tool_call_response``) in any order among themselves, as every
  API takes the results of one message's calls by id; unless one is known by name and position
  (no id: Gemini pairs those by their place), when their order counts;
- JSON values: key order does not count, and ``1.0`` is ``1`` (but ``true`` is not ``1``);
- annotation keys (:data:`ANNOTATION_KEYS`, configurable) and ``cache_control`` are ignored on
  messages, blocks and calls; other keys nobody models (``name``, ``id``, ...) are ignored
  when absent (or ``None``) on either side and compared when present on both; the blocks of
  unknown types (images, documents) are compared whole;
- a message that carries tool ids (calls or results) keeps its identity by role and ids,
  whatever its content: a view message whose tool ids are a non-empty subset of a history
  message's, with the same role, comes from it (a shortened output, a cleared result, a
  marker longer than what it replaces);
- a message without tool ids comes from a history message only when equal by these rules.

Matching then assigns each view message one history message it comes from, each history
message at most once, keeping history order whenever any assignment can (see
:class:`_Assignment`). Stdlib only.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from ctxkit.conformance.judge.parts import calls, positional, results
from ctxkit.exact import exact_form

__all__ = [
    "ALWAYS_IGNORED",
    "ANNOTATION_KEYS",
    "HistoryIndex",
    "Semantic",
    "comes_from",
    "derives",
    "equivalent",
    "match_view",
    "semantic",
]

ANNOTATION_KEYS = frozenset({"metadata"})
"""Keys a manager may add or change on a message without it counting as a different message."""

ALWAYS_IGNORED = frozenset({"cache_control"})
"""Keys ignored on every message, block and call whatever the annotation keys: prompt-caching
hints change what a request costs, not what it says."""


@dataclass(frozen=True, slots=True)
class Semantic:
    """A message as a provider reads it.

    key: canonical JSON of everything the rules model; equal for equal messages.
    extras: the keys nobody models, by path (``.name``, ``content[0].citations``), each value
        as canonical JSON; compared only where both messages have the path.
    ids: the tool ids it carries, tagged ``("call", id)`` or ``("result", id)``.
    texts: the texts of its content, in order (``("X",)`` for the string ``"X"``).
    """

    role: Any
    key: str
    extras: Mapping[str, str]
    ids: frozenset[tuple[str, str]]
    texts: tuple[str, ...]


def _json(value: Any) -> Any:
    """A JSON value in canonical form: integral floats as ints, keys as strings."""
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    if value is None or isinstance(value, str | int):  # bool is an int: kept as is
        return value
    return repr(value)


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _arguments(value: Any) -> dict[str, Any]:
    """Tool arguments: the JSON value a string holds, or the string if it holds none."""
    if isinstance(value, str):
        try:
            return {"json": _json(json.loads(value))}
        except ValueError:
            return {"text": value}
    return {"json": _json(value)}


def _text_of_part(item: Mapping[str, Any]) -> tuple[str | None, tuple[str, ...]]:
    """The text of a text part in any shape, and the keys that say it: ``text`` blocks,
    Responses ``input_text`` / ``output_text``, Gemini and Bedrock ``{"text"}`` (not a Gemini
    thought), OpenTelemetry GenAI ``{"type": "text", "content"}``; (None, ()) otherwise."""
    kind, text = item.get("type"), item.get("text")
    if kind in ("text", "input_text", "output_text") and isinstance(text, str):
        return text, ("type", "text")
    if kind is None and isinstance(text, str) and not item.get("thought"):
        return text, ("text",)
    if kind == "text" and isinstance(item.get("content"), str):
        return item["content"], ("type", "content")
    return None, ()


def _answers(item: Any) -> str | None:
    """The call id a result block (part) answers: an Anthropic ``tool_result``, a Bedrock
    ``toolResult``, a Gemini ``functionResponse``, a GenAI ``tool_call_response``; ``""`` for
    one known by name and position (no id); None for any other block."""
    if not isinstance(item, Mapping):
        return None
    if item.get("type") == "tool_result":
        body: Any = item
        key = "tool_use_id"
    elif item.get("type") == "tool_call_response":
        body, key = item, "id"
    elif isinstance(item.get("toolResult"), Mapping):
        body, key = item["toolResult"], "toolUseId"
    else:
        body = item.get("functionResponse", item.get("function_response"))
        key = "id"
        if not isinstance(body, Mapping):
            return None
    answer = body.get(key)
    return str(_dump(_json(answer))) if answer not in (None, "") else ""


def _results_in_order(found: list[Any], answers: list[str | None]) -> list[Any]:
    """The blocks with each run of result blocks next to one another in the order of the
    calls they answer: every API takes the results of one message's calls in any order when
    they answer by id (rule ``result-blocks``). A result known by name and position (no id)
    answers by its place: then none moves."""
    if "" in answers:
        return found
    ordered, run = list(found), []
    for k in range(len(found) + 1):
        if k < len(found) and answers[k] is not None:
            run.append(k)
            continue
        if len(run) > 1:
            for at, source in zip(run, sorted(run, key=lambda i: answers[i] or ""), strict=True):
                ordered[at] = found[source]
        run = []
    return ordered


class _Reader:
    """Builds one message's canonical form, collecting its unknown keys on the way."""

    MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "parts")

    def __init__(self, ignore: frozenset[str]) -> None:
        self.skip = ignore | ALWAYS_IGNORED
        self.extras: dict[str, str] = {}

    def unknown(self, record: Mapping[str, Any], known: tuple[str, ...], path: str) -> None:
        for key, value in record.items():
            if key not in known and key not in self.skip and value is not None:
                self.extras[f"{path}.{key}"] = _dump(_json(value))

    def message(self, message: Mapping[str, Any]) -> dict[str, Any]:
        known: dict[str, Any] = {"role": _json(message.get("role"))}
        if message.get("type") == "message":  # a Responses message item, said in full
            message = {k: v for k, v in message.items() if k != "type"}
        content = self.content(message.get("content"), "content")
        if "parts" in message:  # Gemini and OpenTelemetry GenAI parts: text parts are text
            content += self.content(message["parts"], "parts")
        if content:
            known["content"] = content
        tool_calls = message.get("tool_calls")
        if tool_calls is not None and tool_calls != []:
            known["tool_calls"] = self.calls(tool_calls)
        if message.get("tool_call_id") is not None:
            known["tool_call_id"] = _json(message["tool_call_id"])
        self.unknown(message, self.MESSAGE_KEYS, "")
        return known

    def content(self, value: Any, path: str) -> list[Any]:
        if value is None or value == "":
            return []
        if isinstance(value, str):
            return [{"type": "text", "text": value}]
        if not isinstance(value, list):
            return [{"raw": _json(value)}]
        found: list[Any] = []
        answers: list[str | None] = []  # per block: the call id a result block answers
        for item in value:
            answer = _answers(item)
            where = f"{path}[{len(found)}]" if answer is None else f"{path}[answers {answer}]"
            block = self.block(item, where)
            if block is not None:
                found.append(block)
                answers.append(answer)
        return _results_in_order(found, answers) if any(answers) else found

    def block(self, item: Any, path: str) -> Any:
        if isinstance(item, str):
            return {"type": "text", "text": item} if item else None
        if not isinstance(item, Mapping):
            return {"raw": _json(item)}
        kind = item.get("type")
        text, known = _text_of_part(item)
        if text is not None:
            self.unknown(item, known, path)
            return {"type": "text", "text": text} if text else None
        if kind == "tool_use":
            self.unknown(item, ("type", "id", "name", "input"), path)
            return {
                "type": "tool_use",
                "id": _json(item.get("id")),
                "name": _json(item.get("name")),
                "input": _arguments(item.get("input")),
            }
        if kind == "tool_result":
            self.unknown(item, ("type", "tool_use_id", "content", "is_error"), path)
            block = {
                "type": "tool_result",
                "tool_use_id": _json(item.get("tool_use_id")),
                "content": self.content(item.get("content"), f"{path}.content"),
            }
            if item.get("is_error") not in (None, False):
                block["is_error"] = _json(item["is_error"])
            return block
        return {k: _json(v) for k, v in item.items() if k not in self.skip}

    def calls(self, value: Any) -> Any:
        if not isinstance(value, list):
            return {"raw": _json(value)}
        found = []
        for number, call in enumerate(value):
            path = f"tool_calls[{number}]"
            if not isinstance(call, Mapping):
                found.append({"raw": _json(call)})
                continue
            self.unknown(call, ("id", "type", "function"), path)
            function = call.get("function")
            if isinstance(function, Mapping):
                self.unknown(function, ("name", "arguments"), f"{path}.function")
                function = {
                    "name": _json(function.get("name")),
                    "arguments": _arguments(function.get("arguments")),
                }
            found.append(
                {
                    "id": _json(call.get("id")),
                    "type": _json(call.get("type") or "function"),
                    "function": _json(function),
                }
            )
        return found


_READ: dict[tuple[bytes, frozenset[str]], Semantic] = {}
_READ_KEEP = 50_000
"""Messages read before, by their :func:`~ctxkit.exact.exact_form`: a run checks every
view against the same history, so each history message would otherwise be read again for
every view. Sorted JSON, the key before, was a fifth of a long search's own time (1.9 s of a
run's 8.4; the exact form 0.23 s)."""


def semantic(message: Mapping[str, Any], ignore: frozenset[str] = ANNOTATION_KEYS) -> Semantic:
    """``message`` as a provider reads it (see the module's rules)."""
    form = exact_form(message)
    if form is None:  # a Mapping of its own, a cycle: read it every time
        return _semantic(message, ignore)
    exact = (form, ignore)
    found = _READ.get(exact)
    if found is None:
        if len(_READ) >= _READ_KEEP:
            _READ.clear()
        found = _READ[exact] = _semantic(message, ignore)
    return found


def _semantic(message: Mapping[str, Any], ignore: frozenset[str]) -> Semantic:
    reader = _Reader(ignore)
    known = reader.message(message)
    ids = (
        frozenset()
        if positional(message)
        else frozenset(
            [("call", i) for i in calls(message)] + [("result", i) for i in results(message)]
        )
    )
    content = known.get("content", ())
    texts = tuple(
        b["text"]
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )  # a part typed text may hold no text: read as a block, it has none to match
    return Semantic(message.get("role"), _dump(known), reader.extras, ids, texts)


def _equal(first: Semantic, second: Semantic) -> bool:
    """Equal by the rules: the same modelled parts, and unknown keys agree where both have one."""
    if first.key != second.key:
        return False
    small, large = sorted((first.extras, second.extras), key=len)
    return all(large.get(path, value) == value for path, value in small.items())


def derives(view: Semantic, history: Semantic) -> bool:
    """:func:`comes_from` on messages already read."""
    if view.ids:
        return view.role == history.role and view.ids <= history.ids
    return _equal(view, history)


def comes_from(
    view_message: Mapping[str, Any],
    history_message: Mapping[str, Any],
    ignore: frozenset[str] = ANNOTATION_KEYS,
) -> bool:
    """The view message is the history message, perhaps rewritten in an equivalent shape, or
    keeps its role and some of its tool ids (see the module's rules)."""
    return derives(semantic(view_message, ignore), semantic(history_message, ignore))


def equivalent(
    first: Mapping[str, Any], second: Mapping[str, Any], ignore: frozenset[str] = ANNOTATION_KEYS
) -> bool:
    """The two messages say the same to a provider: equal by the rules, tool ids or not (no
    identity by ids here: a changed tool output is not equivalent)."""
    return _equal(semantic(first, ignore), semantic(second, ignore))


# -- the assignment --------------------------------------------------------------------------

Candidates = Callable[[int], Iterable[int]]
"""A view message's candidates: given ``start``, the history indices >= start it comes from,
ascending."""


class _Assignment:
    """Assigns view messages, in view order, to history messages they come from.

    Each view message takes the smallest candidate after the previous assigned one. If any
    order-keeping assignment exists, this finds one: by induction, its k-th choice is never
    later than the k-th index of any order-keeping assignment, so a candidate after it is
    always left (tests/test_matching.py checks this against brute force). Only when none is
    left does a message take its earliest unused candidate before (which
    :func:`~ctxkit.conformance.judge.invariants.check_ordering` reports as reordering), or none.
    Every index at or after ``position`` is unused, so the forward pick needs no check.
    """

    __slots__ = ("position", "used")

    def __init__(self) -> None:
        self.position = 0
        self.used: set[int] = set()

    def pick(self, candidates: Candidates) -> int | None:
        found = next(iter(candidates(self.position)), None)
        if found is not None:
            self.position = found + 1
        else:
            found = next((i for i in candidates(0) if i not in self.used), None)
        if found is not None:
            self.used.add(found)
        return found


def match_view(
    history: Sequence[Mapping[str, Any]],
    view: Sequence[Any],
    ignore: frozenset[str] = ANNOTATION_KEYS,
) -> list[int | None]:
    """For each view message, the history index it comes from (None: synthetic), keeping
    history order whenever an assignment can; a message whose only candidates come before an
    earlier match is matched there, which :func:`check_ordering` reports as reordering."""
    read = [semantic(m, ignore) if isinstance(m, Mapping) else None for m in history]

    def candidates(message: Semantic, start: int) -> Iterator[int]:
        return (
            i
            for i in range(start, len(read))
            if (other := read[i]) is not None and derives(message, other)
        )

    assignment = _Assignment()
    return [
        assignment.pick(partial(candidates, semantic(m, ignore)))
        if isinstance(m, Mapping)
        else None
        for m in view
    ]


class HistoryIndex:
    """A growing history indexed for :func:`match_view`'s answer in time that follows the
    view, not the history: for checking live views of a long conversation.

    Candidates are found by the canonical key (messages without tool ids) or by one of their
    tool ids, then checked with the same rules; the result equals
    ``match_view(history, view, ignore)``.
    """

    def __init__(self, ignore: frozenset[str] = ANNOTATION_KEYS) -> None:
        self.ignore = ignore
        self.messages: list[Mapping[str, Any]] = []
        self.prints: list[str] = []
        """Each message's exact fingerprint (see :meth:`fingerprint`)."""
        self.read: list[Semantic] = []
        """Each message as a provider reads it."""
        self._by_print: dict[str, int] = {}
        self._by_key: dict[str, list[int]] = {}
        self._by_id: dict[tuple[str, str], list[int]] = {}

    def fingerprint(self, message: Mapping[str, Any]) -> str:
        """Equal for two messages exactly when they are equal ignoring annotation keys: the
        same bytes to send, so the same token cost. (Matching uses :func:`semantic`.)"""
        kept = {k: v for k, v in message.items() if k not in self.ignore}
        return json.dumps(kept, sort_keys=True, default=repr)

    def append(self, message: Mapping[str, Any], fingerprint: str | None = None) -> None:
        index = len(self.messages)
        print_ = fingerprint if fingerprint is not None else self.fingerprint(message)
        known = self._by_print.get(print_)
        read = self.read[known] if known is not None else semantic(message, self.ignore)
        self.messages.append(message)
        self.prints.append(print_)
        self.read.append(read)
        self._by_print.setdefault(print_, index)
        self._by_key.setdefault(read.key, []).append(index)
        for tool_id in read.ids:
            self._by_id.setdefault(tool_id, []).append(index)

    def __len__(self) -> int:
        return len(self.messages)

    def equivalent(self, message: Mapping[str, Any], index: int) -> bool:
        """``message`` says what history message ``index`` says (see :func:`equivalent`)."""
        return _equal(semantic(message, self.ignore), self.read[index])

    def _candidates(self, message: Semantic, start: int) -> Iterator[int]:
        if message.ids:
            pool = min((self._by_id.get(i, []) for i in message.ids), key=len)
        else:
            pool = self._by_key.get(message.key, [])
        for at in range(bisect_left(pool, start), len(pool)):
            if derives(message, self.read[pool[at]]):
                yield pool[at]

    def match(
        self, view: Sequence[Any], prints: Sequence[str | None] | None = None
    ) -> list[int | None]:
        """For each view message, the history index it comes from (None: synthetic).

        ``prints``: the view messages' exact fingerprints, if the caller has them already (a
        message identical to a history message is then not read again).
        """
        assignment = _Assignment()
        matches: list[int | None] = []
        for number, message in enumerate(view):
            if not isinstance(message, Mapping):
                matches.append(None)
                continue
            known = self._by_print.get(prints[number] or "") if prints is not None else None
            read = self.read[known] if known is not None else semantic(message, self.ignore)
            matches.append(assignment.pick(partial(self._candidates, read)))
        return matches
