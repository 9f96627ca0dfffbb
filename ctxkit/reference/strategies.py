"""The pieces a compaction is made of: shortening tool outputs, scoring units, summarizing.

Each works on messages and returns new ones; none touches stored history.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ctxkit.messages import MessageInfo, inspect_message, text_of

__all__ = [
    "STRATEGIES",
    "Summarizer",
    "extractive_summary",
    "extractive_unit_summary",
    "importance_score",
    "shorten_output",
    "shorten_text",
]

STRATEGIES = ("truncate_outputs", "truncate", "importance", "hierarchical", "summarize")
"""Strategy names, in the order a compaction applies them:

1. ``truncate_outputs``: shorten long tool outputs to head + tail (every unit but the newest);
2. ``truncate`` drops the oldest unpinned units, or ``importance`` drops the lowest-scored, or
   ``hierarchical`` shows the newest units full and older ones as a paragraph or one line,
   coarser as they age, dropping the oldest only when even one line each does not fit
   (:mod:`ctxkit.reference.levels`; with ``truncate_outputs``, "full" is the shortened unit);
3. ``summarize``: the dropped units are replaced by one summary message (oldest-first dropping
   unless ``importance`` is also chosen).

``hierarchical`` and ``importance`` both decide which units lose detail, by age and by score:
they do not combine. ``truncate`` beside ``hierarchical`` adds nothing (it drops the oldest
units, which ``hierarchical`` already does last).
"""

Summarizer = Callable[..., Awaitable[str]]
"""``async (messages, *, max_tokens) -> str``: summary text of the messages (an earlier summary
first, if any), aiming at ``max_tokens`` at most; longer text is clipped to fit."""

_ERROR_PATTERN = re.compile(r"Traceback|\bError\b|\w+Error\b|\bFAILED\b|\bException\b|\bfatal\b")


def shorten_text(text: str, *, head_lines: int, tail_lines: int, max_bytes: int) -> str | None:
    """Head + tail of a long text with a marker saying what was left out; None if it fits.

    Whole lines are kept where possible (marker ``[... omitted X of Y lines ...]``); a line too
    long for the byte limit is cut inside (marker ``[... omitted X of Y bytes ...]``).
    """
    size = len(text.encode("utf-8", "surrogatepass"))
    lines = text.splitlines(keepends=True)
    if len(lines) <= head_lines + tail_lines and size <= max_bytes:
        return None
    half = max(1, max_bytes // 2)
    head, head_whole = _fit(lines[:head_lines], half, from_end=False)
    # The tail comes from the lines the head does not show whole; a line the head had to cut
    # may still show its end when it is the last line.
    shown = len(head) if head_whole == len(head) else 1
    tail_source = lines[shown:][-tail_lines:] if tail_lines else []
    if not tail_source and tail_lines and head_whole < len(head):
        tail_source = lines[-1:]
    tail, tail_whole = _fit(tail_source[::-1], half, from_end=True)
    tail.reverse()
    head_text, tail_text = "".join(head), "".join(tail)
    if head_whole == len(head) and tail_whole == len(tail):
        omitted = len(lines) - len(head) - len(tail)
        marker = f"[... omitted {omitted} of {len(lines)} lines ...]"
    else:
        kept = len(head_text.encode("utf-8", "surrogatepass"))
        kept += len(tail_text.encode("utf-8", "surrogatepass"))
        marker = f"[... omitted {size - kept} of {size} bytes ...]"
    if head_text and not head_text.endswith("\n"):
        head_text += "\n"
    shortened = f"{head_text}{marker}\n{tail_text}"
    return shortened if len(shortened) < len(text) else None


def _fit(lines: Sequence[str], budget: int, *, from_end: bool) -> tuple[list[str], int]:
    """Take whole lines while they fit in ``budget`` bytes; cut the first that does not fit
    only if nothing was taken yet. Returns the pieces and how many are whole lines."""
    taken: list[str] = []
    used = 0
    for line in lines:
        size = len(line.encode("utf-8", "surrogatepass"))
        if used + size <= budget:
            taken.append(line)
            used += size
            continue
        if not taken:
            taken.append(_cut(line, budget, from_end=from_end))
            return taken, 0
        break
    return taken, len(taken)


def _cut(line: str, budget: int, *, from_end: bool) -> str:
    """At most ``budget`` bytes of a line's start or end, cut between characters."""
    raw = line.encode("utf-8", "surrogatepass")
    piece = raw[-budget:] if from_end else raw[:budget]
    if from_end:
        while piece and piece[0] & 0xC0 == 0x80:  # a continuation byte: mid-character
            piece = piece[1:]
    else:
        for _ in range(4):
            try:
                return piece.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                piece = piece[:-1]
    return piece.decode("utf-8", "surrogatepass")


def shorten_output(
    message: dict[str, Any], *, head_lines: int, tail_lines: int, max_bytes: int
) -> dict[str, Any] | None:
    """A copy of a result-carrying message, in any shape, with long outputs shortened; None if
    none is long.

    Ids, roles and every other key stay as they are, so the shortened message still answers
    the same calls.
    """
    limits = {"head_lines": head_lines, "tail_lines": tail_lines, "max_bytes": max_bytes}
    content = message.get("content")
    if str(message.get("type", "")).endswith("_output"):  # a Responses *_output item
        output = _shorten_content(message.get("output"), limits)
        return None if output is None else {**message, "output": output}
    if isinstance(message.get("parts"), list):  # Gemini functionResponse, GenAI tool_call_response
        parts = _shorten_parts(message["parts"], limits)
        return None if parts is None else {**message, "parts": parts}
    if message.get("role") == "tool":
        new_content = _shorten_content(content, limits)
    elif message.get("role") == "user" and isinstance(content, list):
        changed = False
        blocks = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = _shorten_content(block.get("content"), limits)
                if inner is not None:
                    block = {**block, "content": inner}
                    changed = True
            elif isinstance(block, dict) and isinstance(block.get("toolResult"), dict):
                result = block["toolResult"]  # Bedrock Converse
                inner = _shorten_content(result.get("content"), limits)
                if inner is not None:
                    block = {**block, "toolResult": {**result, "content": inner}}
                    changed = True
            blocks.append(block)
        new_content = blocks if changed else None
    else:
        return None
    return None if new_content is None else {**message, "content": new_content}


def _shorten_parts(parts: list[Any], limits: dict[str, int]) -> list[Any] | None:
    """Gemini ``functionResponse`` parts with an ``output`` text, GenAI ``tool_call_response``
    parts with a text ``response``: their texts shortened; None if none is long."""
    changed = False
    found = []
    for part in parts:
        if isinstance(part, dict) and part.get("type") == "tool_call_response":
            text = part.get("response")
            short = shorten_text(text, **limits) if isinstance(text, str) else None
            if short is not None:
                part, changed = {**part, "response": short}, True
        elif isinstance(part, dict):
            key = "functionResponse" if "functionResponse" in part else "function_response"
            body = part.get(key)
            answer = body.get("response") if isinstance(body, dict) else None
            text = answer.get("output") if isinstance(answer, dict) else None
            short = shorten_text(text, **limits) if isinstance(text, str) else None
            if short is not None:
                answer = {**answer, "output": short}
                part, changed = {**part, key: {**body, "response": answer}}, True
        found.append(part)
    return found if changed else None


def _shorten_content(content: Any, limits: dict[str, int]) -> Any:
    if isinstance(content, str):
        return shorten_text(content, **limits)
    if isinstance(content, list):
        changed = False
        blocks = []
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                text = shorten_text(block["text"], **limits)
                if text is not None:
                    block = {**block, "text": text}
                    changed = True
            blocks.append(block)
        return blocks if changed else None
    return None


def _looks_like_error(message: dict[str, Any], info: MessageInfo) -> bool:
    if info.error_result:
        return True
    if not info.result_ids:
        return False
    text = text_of(message)
    return bool(_ERROR_PATTERN.search(text[:4096]) or _ERROR_PATTERN.search(text[-4096:]))


def importance_score(
    messages: Sequence[dict[str, Any]], infos: Sequence[MessageInfo], recency: float
) -> float:
    """How much a unit is worth keeping: role, errors in its tool output, and recency (0..1).

    A user turn weighs most (the task), assistant prose next, tool traffic least; a unit whose
    tool output shows an error gains weight, because the model must not repeat the mistake.
    """
    if any(info.user_turn for info in infos):
        score = 3.0
    elif any(info.role == "assistant" and not info.call_ids for info in infos):
        score = 2.0
    else:
        score = 1.0
    if any(_looks_like_error(m, i) for m, i in zip(messages, infos, strict=True)):
        score += 1.5
    return score + 2.0 * recency


def _first_line(text: str, limit: int) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _call_lines(message: dict[str, Any]) -> list[str]:
    lines = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        arguments = _first_line(str(function.get("arguments", "")), 80)
        lines.append(f"- called {function.get('name')}({arguments})")
    content = message.get("content")
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "tool_use":
            arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
            lines.append(f"- called {block.get('name')}({_first_line(arguments, 80)})")
    return lines


def _outputs(message: dict[str, Any]) -> list[tuple[str, bool]]:
    """The tool outputs a message carries, each with whether it is flagged ``is_error``."""
    if message.get("role") == "tool":
        return [(text_of(message), False)]
    content = message.get("content")
    return [
        (text_of(block), block.get("is_error") is True)
        for block in (content if isinstance(content, list) else ())
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


SUMMARY_HEADER = "[Summary of earlier conversation, compacted by ctxkit]"


async def extractive_summary(
    messages: list[dict[str, Any]], *, max_tokens: int = 1_000, max_lines: int = 60
) -> str:
    """An offline, extractive summarizer: no model, no network, deterministic.

    Keeps one line per user request, assistant conclusion, tool call and error, newest last;
    an earlier summary's lines are carried forward. Past ``max_lines``, or about
    ``max_tokens`` (estimated at three characters a token), the oldest lines go.
    """
    lines: list[str] = []
    for message in messages:
        text = text_of(message)
        role = message.get("role")
        if isinstance(text, str) and text.startswith(SUMMARY_HEADER):
            lines.extend(line for line in text.splitlines()[1:] if line.startswith("- "))
            continue
        lines.extend(_call_lines(message))
        if role == "user" and isinstance(message.get("content"), str):
            lines.append(f"- user asked: {_first_line(text, 160)}")
        elif role == "user":
            words = [
                b.get("text", "")
                for b in message.get("content") or ()
                if isinstance(b, dict) and b.get("type") == "text"
            ]
            if any(w.strip() for w in words):
                lines.append(f"- user asked: {_first_line(' '.join(words), 160)}")
        elif role == "assistant" and text.strip():
            lines.append(f"- assistant: {_first_line(text, 160)}")
        for output, flagged in _outputs(message):
            match = _ERROR_PATTERN.search(output[:4096])
            if flagged or match:
                start = output.rfind("\n", 0, match.start()) + 1 if match and not flagged else 0
                lines.append(f"- tool error: {_first_line(output[start:], 160)}")
    kept: list[str] = []
    room = 3 * max_tokens - len(SUMMARY_HEADER)
    for line in reversed(lines[len(lines) - max_lines :] if max_lines > 0 else []):
        room -= len(line) + 1
        if room < 0:
            break
        kept.append(line)
    return "\n".join([SUMMARY_HEADER, *reversed(kept)])


def _call_descriptions(message: dict[str, Any]) -> list[str]:
    """``name(arguments)`` of each call a message makes, in any shape."""
    found: list[tuple[Any, Any]] = []
    for call in message.get("tool_calls") or ():  # Chat Completions
        if isinstance(call, dict) and isinstance(call.get("function"), dict):
            found.append((call["function"].get("name"), call["function"].get("arguments")))
    kind = str(message.get("type", ""))
    if kind.endswith("_call"):  # a Responses call item
        found.append((message.get("name") or kind, message.get("arguments", message.get("input"))))
    blocks = message.get("content") if isinstance(message.get("content"), list) else []
    for block in [*blocks, *(message.get("parts") or ())]:
        if not isinstance(block, dict):
            continue
        if block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use"):
            found.append((block.get("name"), block.get("input")))
        elif block.get("type") == "tool_call":  # GenAI
            found.append((block.get("name"), block.get("arguments")))
        for key in ("toolUse", "functionCall", "function_call"):  # Bedrock, Gemini
            body = block.get(key)
            if isinstance(body, dict):
                found.append((body.get("name"), body.get("input", body.get("args"))))
    described = []
    for name, arguments in found:
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False, default=repr)
        described.append(f"{name}({_first_line(arguments, 100)})")
    return described


def _result_text(value: Any) -> str:
    """The text of a tool output value in any shape: a string, text blocks, a dict with an
    ``output`` or ``text``, else its JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_result_text(item) for item in value)
    if isinstance(value, dict):
        for key in ("text", "output", "content", "response"):
            if key in value:
                return _result_text(value[key])
    return json.dumps(value, ensure_ascii=False, default=repr)


def _outputs_of(message: dict[str, Any]) -> list[tuple[str, bool]]:
    """Each tool output a result message carries, with whether it is flagged an error (an
    Anthropic, Bedrock or Gemini message answers several calls at once)."""
    found: list[tuple[str, bool]] = []
    content = message.get("content")
    for block in [*(content if isinstance(content, list) else ()), *(message.get("parts") or ())]:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":  # Anthropic
            found.append((_result_text(block.get("content", "")), block.get("is_error") is True))
        elif block.get("type") == "tool_call_response":  # GenAI
            found.append((_result_text(block.get("response", "")), False))
        elif isinstance(block.get("toolResult"), dict):  # Bedrock
            body = block["toolResult"]
            found.append((_result_text(body.get("content", "")), body.get("status") == "error"))
        else:
            body = block.get("functionResponse", block.get("function_response"))
            if isinstance(body, dict):  # Gemini
                found.append((_result_text(body.get("response", "")), False))
    return found or [(text_of(message), False)]


async def extractive_unit_summary(messages: list[dict[str, Any]], *, max_tokens: int = 160) -> str:
    """An offline, extractive summary of one unit (a call with its results, or a message
    alone), in any shape: no model, no network, deterministic. The ``hierarchical`` strategy's
    default summarizer.

    One line per text, per message's calls and per result (``user: ...``, ``called
    grep({...})``, ``result: first line (+N lines)``, the error line where an output shows
    one); room left within about ``max_tokens`` (three characters a token) takes more lines of
    the outputs.
    """
    room = 3 * max_tokens
    lines: list[str] = []
    outputs: list[list[str]] = []
    for message in messages:
        info = inspect_message(message)
        if info.result_ids:
            for output, flagged in _outputs_of(message):
                text = output.strip()
                body = [line for line in text.splitlines() if line.strip()]
                first = _first_line(body[0], 160) if body else "(empty)"
                more = f" (+{len(body) - 1} lines)" if len(body) > 1 else ""
                lines.append(f"{'error result' if flagged else 'result'}: {first}{more}")
                match = _ERROR_PATTERN.search(text[:4096])
                if match and text.rfind("\n", 0, match.start()) >= 0:
                    start = text.rfind("\n", 0, match.start()) + 1
                    lines.append(f"error: {_first_line(text[start:], 160)}")
                outputs.append(body[1:])
            continue
        text = text_of(message).strip()
        if text:
            lines.append(f"{info.role}: {_first_line(text, 200)}")
        calls = _call_descriptions(message)
        if calls:
            lines.append("called " + ", ".join(calls))
    kept: list[str] = []
    for line in lines:
        if len(line) + 1 > room:
            if room > 24:  # the start of what does not fit says more than nothing
                kept.append(_first_line(line, room - 1))
            room = 0
            break
        room -= len(line) + 1
        kept.append(line)
    for body in outputs if room > 0 else ():
        for line in body:
            piece = "  " + _first_line(line, 160)
            room -= len(piece) + 1
            if room < 0:
                break
            kept.append(piece)
    return "\n".join(kept)
