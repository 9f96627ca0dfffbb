"""Writing a history in another shape, where nothing is lost, and a clear refusal where
something would be.

Every shape can say the same plain things: a role, texts, tool calls (id, name, JSON
arguments) and their results (id, output text). A history made only of those converts to any
shape and back unchanged. What only some shapes can say is refused, naming the message and
what it holds: thinking and reasoning, server tools, images and files, error flags where the
target has none, Gemini calls without ids into a shape that needs ids, keys no shape models.

>>> convert([{"role": "user", "content": "hi"}], "gemini")
[{'role': 'user', 'parts': [{'text': 'hi'}]}]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxkit.shapes import SHAPES, InvalidMessage, Shape, inspect_message

__all__ = ["ConversionError", "convert"]


class ConversionError(InvalidMessage):
    """A message holds something the target shape cannot say."""


@dataclass
class _Call:
    id: str
    name: str
    arguments: Any
    """The JSON value, or the raw string when it is not JSON as ``json.dumps`` writes it."""


@dataclass
class _Result:
    id: str
    output: str
    error: bool = False


@dataclass
class _Turn:
    role: str
    texts: list[str] = field(default_factory=list)
    blocks: bool = False
    """Texts were a list of parts (not one string)."""
    calls: list[_Call] = field(default_factory=list)
    results: list[_Result] = field(default_factory=list)


def convert(messages: Sequence[Mapping[str, Any]], to: Shape) -> list[dict[str, Any]]:
    """The history written in shape ``to``. Raises :class:`ConversionError` naming the first
    message that cannot be written there without loss (and
    :class:`~ctxkit.shapes.InvalidMessage` for a message that is not valid at all)."""
    if to not in SHAPES:
        raise ValueError(f"unknown shape {to!r}; choose from {', '.join(SHAPES)}")
    turns = _read_all(messages)
    names = {call.id: call.name for turn in turns for call in turn.calls}
    written: list[dict[str, Any]] = []
    for index, turn in enumerate(turns):
        written.extend(_WRITERS[to](turn, names, index))
    return _merge_results(written, to)


# -- reading ----------------------------------------------------------------------------------


def _refuse(index: int, what: str) -> ConversionError:
    return ConversionError(f"{what}, which not every shape can say", index=index)


def _arguments(value: Any) -> Any:
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if json.dumps(parsed, ensure_ascii=False) == value else value
    return value


def _only(record: Mapping[str, Any], keys: Iterable[str], index: int, what: str) -> None:
    extra = sorted(set(record) - set(keys))
    if extra:
        raise _refuse(index, f"{what} has {', '.join(map(repr, extra))}")


def _read_all(messages: Sequence[Mapping[str, Any]]) -> list[_Turn]:
    turns: list[_Turn] = []
    for index, message in enumerate(messages):
        form = inspect_message(message, index).form
        turn = _READERS[form](message, index, turns)
        if turn is not None:
            turns.append(turn)
    return turns


def _read_chat(message: Mapping[str, Any], index: int, turns: list[_Turn]) -> _Turn | None:
    _only(message, ("role", "content", "tool_calls", "tool_call_id"), index, "the message")
    role, content = message["role"], message.get("content")
    turn = _Turn(role)
    if role == "tool":
        turn.results.append(_Result(message["tool_call_id"], _text_of(content, index)))
        return turn
    if isinstance(content, str):
        turn.texts.append(content)
    elif isinstance(content, list):
        turn.blocks = True
        for block in content:
            kind = block.get("type")
            if kind == "text":
                _only(block, ("type", "text"), index, "a text block")
                turn.texts.append(block["text"])
            elif kind == "tool_use":
                _only(block, ("type", "id", "name", "input"), index, "a tool_use block")
                turn.calls.append(_Call(block["id"], block["name"], block.get("input", {})))
            elif kind == "tool_result":
                _only(block, ("type", "tool_use_id", "content", "is_error"), index, "a tool_result")
                output = _text_of(block.get("content"), index)
                turn.results.append(
                    _Result(block["tool_use_id"], output, bool(block.get("is_error")))
                )
            else:
                raise _refuse(index, f"the message holds a {kind} block")
    for call in message.get("tool_calls") or ():
        _only(call, ("id", "type", "function"), index, "a tool call")
        function = call["function"]
        _only(function, ("name", "arguments"), index, "a tool call's function")
        turn.calls.append(
            _Call(call["id"], function["name"], _arguments(function.get("arguments")))
        )
    return turn


def _text_of(content: Any, index: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for block in content:
        if not isinstance(block, Mapping) or set(block) - {"type", "text"}:
            raise _refuse(index, "a tool output holds more than text")
        texts.append(block.get("text", ""))
    if len(texts) != 1:
        raise _refuse(index, f"a tool output holds {len(texts)} text parts")
    return texts[0]


def _read_responses(message: Mapping[str, Any], index: int, turns: list[_Turn]) -> _Turn | None:
    kind = message.get("type", "message")
    if kind == "function_call":
        _only(message, ("type", "call_id", "name", "arguments"), index, "the function_call")
        call = _Call(message["call_id"], message["name"], _arguments(message.get("arguments")))
        if turns and turns[-1].role == "assistant" and not turns[-1].results:
            turns[-1].calls.append(call)  # the text and parallel calls of one response
            return None
        return _Turn("assistant", calls=[call])
    if kind == "function_call_output":
        _only(message, ("type", "call_id", "output"), index, "the function_call_output")
        return _Turn(
            "tool", results=[_Result(message["call_id"], _text_of(message["output"], index))]
        )
    if kind != "message":
        raise _refuse(index, f"the item is a {kind}")
    _only(message, ("type", "role", "content"), index, "the message item")
    turn = _Turn(message["role"])
    content = message["content"]
    if isinstance(content, str):
        turn.texts.append(content)
    else:
        turn.blocks = True
        for part in content:
            if part.get("type") not in ("input_text", "output_text"):
                raise _refuse(index, f"the message holds a {part.get('type')} part")
            _only(part, ("type", "text"), index, "a text part")
            turn.texts.append(part["text"])
    return turn


def _read_gemini(message: Mapping[str, Any], index: int, turns: list[_Turn]) -> _Turn | None:
    _only(message, ("role", "parts"), index, "the content")
    role = "assistant" if message.get("role") == "model" else "user"
    turn = _Turn(role, blocks=True)
    for part in message["parts"]:
        call = part.get("functionCall", part.get("function_call"))
        response = part.get("functionResponse", part.get("function_response"))
        body = call if call is not None else response
        if body is not None:
            if len(part) != 1:
                raise _refuse(index, "a function part carries more than the call (a signature)")
            if not body.get("id"):
                raise _refuse(index, "a function call without an id (answered by position)")
        if call is not None:
            _only(call, ("id", "name", "args"), index, "a functionCall")
            turn.calls.append(_Call(call["id"], call["name"], call.get("args", {})))
        elif response is not None:
            _only(response, ("id", "name", "response"), index, "a functionResponse")
            answer = response.get("response")
            if not isinstance(answer, Mapping) or set(answer) != {"output"}:
                raise _refuse(index, "a functionResponse holds more than an output")
            turn.results.append(_Result(response["id"], str(answer["output"])))
        elif set(part) == {"text"}:
            turn.texts.append(part["text"])
        else:
            raise _refuse(index, f"the content holds a part with {sorted(part)}")
    if turn.results:
        turn.role = "tool" if not turn.texts else "user"
    return turn


def _read_bedrock(message: Mapping[str, Any], index: int, turns: list[_Turn]) -> _Turn | None:
    _only(message, ("role", "content"), index, "the message")
    turn = _Turn(message["role"], blocks=True)
    for block in message["content"]:
        if "text" in block and len(block) == 1:
            turn.texts.append(block["text"])
        elif "toolUse" in block:
            use = block["toolUse"]
            _only(use, ("toolUseId", "name", "input"), index, "a toolUse block")
            turn.calls.append(_Call(use["toolUseId"], use["name"], use.get("input", {})))
        elif "toolResult" in block:
            result = block["toolResult"]
            _only(result, ("toolUseId", "content", "status"), index, "a toolResult block")
            output = _text_of(result.get("content"), index)
            turn.results.append(
                _Result(result["toolUseId"], output, result.get("status") == "error")
            )
        else:
            raise _refuse(index, f"the message holds a block with {sorted(block)}")
    return turn


def _read_genai(message: Mapping[str, Any], index: int, turns: list[_Turn]) -> _Turn | None:
    _only(message, ("role", "parts"), index, "the message")
    turn = _Turn(message["role"], blocks=True)
    for part in message["parts"]:
        kind = part["type"]
        if kind == "text":
            _only(part, ("type", "content"), index, "a text part")
            turn.texts.append(part["content"])
        elif kind == "tool_call":
            _only(part, ("type", "id", "name", "arguments"), index, "a tool_call part")
            if not part.get("id"):
                raise _refuse(index, "a tool_call without an id")
            turn.calls.append(_Call(part["id"], part["name"], part.get("arguments")))
        elif kind == "tool_call_response":
            _only(part, ("type", "id", "response"), index, "a tool_call_response part")
            if not isinstance(part.get("response"), str):
                raise _refuse(index, "a tool_call_response that is not text")
            turn.results.append(_Result(part["id"], part["response"]))
        else:
            raise _refuse(index, f"the message holds a {kind} part")
    return turn


_READERS = {
    "openai": _read_chat,
    "anthropic": _read_chat,
    "responses": _read_responses,
    "gemini": _read_gemini,
    "bedrock": _read_bedrock,
    "genai": _read_genai,
}


# -- writing ----------------------------------------------------------------------------------


def _no_errors(turn: _Turn, index: int, shape: str) -> None:
    if any(result.error for result in turn.results):
        raise _refuse(index, f"a tool result is flagged as an error, which {shape} cannot say")


def _json_object(call: _Call, index: int, shape: str) -> Any:
    if isinstance(call.arguments, str):
        raise _refuse(index, f"the arguments of {call.id} are not JSON, which {shape} needs")
    return call.arguments


def _arguments_text(call: _Call) -> str:
    return (
        call.arguments
        if isinstance(call.arguments, str)
        else json.dumps(call.arguments, ensure_ascii=False)
    )


def _write_openai(turn: _Turn, names: Mapping[str, str], index: int) -> list[dict[str, Any]]:
    _no_errors(turn, index, "Chat Completions")
    if turn.results:
        if turn.texts:
            raise _refuse(index, "a message holds tool results and text")
        return [{"role": "tool", "tool_call_id": r.id, "content": r.output} for r in turn.results]
    message: dict[str, Any] = {"role": turn.role, "content": _content(turn)}
    if turn.calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": _arguments_text(c)},
            }
            for c in turn.calls
        ]
    return [message]


def _content(turn: _Turn) -> Any:
    if turn.blocks:
        return [{"type": "text", "text": t} for t in turn.texts]
    if not turn.texts:
        return None
    if len(turn.texts) > 1:
        raise ValueError("several texts in one string")
    return turn.texts[0]


def _write_anthropic(turn: _Turn, names: Mapping[str, str], index: int) -> list[dict[str, Any]]:
    if not (turn.calls or turn.results):
        return _write_openai(turn, names, index)
    if turn.results:
        blocks: list[dict[str, Any]] = [
            {
                "type": "tool_result",
                "tool_use_id": r.id,
                "content": r.output,
                **({"is_error": True} if r.error else {}),
            }
            for r in turn.results
        ]
        blocks += [{"type": "text", "text": t} for t in turn.texts]
        return [{"role": "user", "content": blocks}]
    blocks = [{"type": "text", "text": t} for t in turn.texts]
    blocks += [
        {
            "type": "tool_use",
            "id": c.id,
            "name": c.name,
            "input": _json_object(c, index, "Anthropic"),
        }
        for c in turn.calls
    ]
    return [{"role": "assistant", "content": blocks}]


def _write_responses(turn: _Turn, names: Mapping[str, str], index: int) -> list[dict[str, Any]]:
    _no_errors(turn, index, "Responses")
    items: list[dict[str, Any]] = []
    if turn.texts or not (turn.calls or turn.results):
        if turn.role == "tool" or turn.results:
            raise _refuse(index, "a message holds tool results and text")
        if turn.blocks:
            part = "output_text" if turn.role == "assistant" else "input_text"
            content: Any = [{"type": part, "text": t} for t in turn.texts]
            items.append({"type": "message", "role": turn.role, "content": content})
        else:
            items.append({"role": turn.role, "content": _content(turn) or ""})
    items += [
        {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": _arguments_text(c)}
        for c in turn.calls
    ]
    items += [
        {"type": "function_call_output", "call_id": r.id, "output": r.output} for r in turn.results
    ]
    return items


def _system_as_chat(turn: _Turn, names: Mapping[str, str], index: int) -> list[dict[str, Any]]:
    return _write_openai(turn, names, index)


def _write_gemini(turn: _Turn, names: Mapping[str, str], index: int) -> list[dict[str, Any]]:
    if turn.role in ("system", "developer"):
        return _system_as_chat(turn, names, index)
    _no_errors(turn, index, "Gemini")
    parts: list[dict[str, Any]] = [{"text": t} for t in turn.texts]
    parts += [
        {"functionCall": {"id": c.id, "name": c.name, "args": _json_object(c, index, "Gemini")}}
        for c in turn.calls
    ]
    parts += [
        {
            "functionResponse": {
                "id": r.id,
                "name": names.get(r.id, ""),
                "response": {"output": r.output},
            }
        }
        for r in turn.results
    ]
    return [{"role": "model" if turn.role == "assistant" else "user", "parts": parts}]


def _write_bedrock(turn: _Turn, names: Mapping[str, str], index: int) -> list[dict[str, Any]]:
    if turn.role in ("system", "developer"):
        return _system_as_chat(turn, names, index)
    blocks: list[dict[str, Any]] = [{"text": t} for t in turn.texts]
    blocks += [
        {"toolUse": {"toolUseId": c.id, "name": c.name, "input": _json_object(c, index, "Bedrock")}}
        for c in turn.calls
    ]
    blocks += [
        {
            "toolResult": {
                "toolUseId": r.id,
                "content": [{"text": r.output}],
                **({"status": "error"} if r.error else {}),
            }
        }
        for r in turn.results
    ]
    role = "user" if turn.role == "tool" else turn.role
    return [{"role": role, "content": blocks}]


def _write_genai(turn: _Turn, names: Mapping[str, str], index: int) -> list[dict[str, Any]]:
    _no_errors(turn, index, "GenAI parts")
    parts: list[dict[str, Any]] = [{"type": "text", "content": t} for t in turn.texts]
    parts += [
        {"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
        for c in turn.calls
    ]
    if turn.results and turn.texts:
        raise _refuse(index, "a message holds tool results and text")
    return [
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": r.id, "response": r.output}],
        }
        for r in turn.results
    ] or [{"role": turn.role, "parts": parts}]


_WRITERS = {
    "openai": _write_openai,
    "anthropic": _write_anthropic,
    "responses": _write_responses,
    "gemini": _write_gemini,
    "bedrock": _write_bedrock,
    "genai": _write_genai,
}


def _merge_results(messages: list[dict[str, Any]], to: Shape) -> list[dict[str, Any]]:
    """Shapes whose next message answers every call hold all results in one message: the
    results written one per tool turn are joined."""
    if to not in ("anthropic", "bedrock", "gemini"):
        return messages
    merged: list[dict[str, Any]] = []
    for message in messages:
        key = "parts" if to == "gemini" else "content"
        if merged and _only_results(message, to) and _only_results(merged[-1], to):
            merged[-1] = {**merged[-1], key: [*merged[-1][key], *message[key]]}
        else:
            merged.append(message)
    return merged


def _only_results(message: Mapping[str, Any], to: Shape) -> bool:
    info = inspect_message(message)
    return bool(info.result_ids) and not info.user_turn and info.form == to
