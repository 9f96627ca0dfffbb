"""Messages across amplifier-core's gRPC ``ContextService``: the JSON shapes to the proto's
``Message`` and back, faithfully, or not at all.

What crosses: the role (system, user, assistant, tool, function, developer), string content,
content blocks (text, tool_use, tool_result, thinking), OpenAI ``tool_calls`` (as tool-call
blocks after the text, arguments verbatim), ``tool_call_id``, ``name`` and ``metadata`` (as
``metadata_json``). The proto cannot say whether a tool call arrived as an OpenAI ``tool_calls``
entry or an Anthropic ``tool_use`` block, so :class:`Crossing` remembers it per call id and the
way back restores it. Whatever else a message holds cannot cross: :class:`CannotCross` names it,
and the message is not sent (never guessed, never silently dropped).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["CannotCross", "Crossing"]

ROLES = ("system", "user", "assistant", "tool", "function", "developer")
_MESSAGE_KEYS = {"role", "content", "name", "tool_call_id", "tool_calls", "metadata"}
_BLOCK_KEYS = {
    "text": {"type", "text"},
    "tool_use": {"type", "id", "name", "input"},
    "tool_result": {"type", "tool_use_id", "content"},
    "thinking": {"type", "thinking", "signature"},
}


class CannotCross(Exception):
    """The message holds something amplifier_module.proto's Message cannot carry."""

    def __init__(self, what: str) -> None:
        super().__init__(f"the proto cannot carry {what}")


def _pb() -> Any:
    from amplifier_core._grpc_gen import amplifier_module_pb2

    return amplifier_module_pb2


class Crossing:
    """Converts messages for one conversation, remembering each tool call's shape."""

    def __init__(self) -> None:
        self.shapes: dict[str, str] = {}

    def to_proto(self, message: Any) -> Any:
        pb = _pb()
        if not isinstance(message, dict):
            raise CannotCross(f"a message that is a {type(message).__name__}, not an object")
        role = message.get("role")
        if role not in ROLES:
            raise CannotCross(f"role {role!r}: the proto's Role has {', '.join(ROLES)}")
        extra = sorted(set(message) - _MESSAGE_KEYS)
        if extra:
            raise CannotCross(f"the key(s) {', '.join(map(repr, extra))}")
        found = pb.Message(role=getattr(pb, f"ROLE_{role.upper()}"))
        for key in ("name", "tool_call_id"):
            if key in message:
                if not isinstance(message[key], str):
                    raise CannotCross(f"a {key} that is not a string")
                setattr(found, key, message[key])
        if "metadata" in message:
            found.metadata_json = json.dumps(message["metadata"])
        content, calls = message.get("content"), message.get("tool_calls")
        blocks = [] if calls is None else self._calls(calls)
        if isinstance(content, str) and not blocks:
            found.text_content = content
        elif isinstance(content, str):
            blocks.insert(0, pb.ContentBlock(text_block=pb.TextBlock(text=content)))
        elif isinstance(content, list):
            blocks = [self._block(b) for b in content] + blocks
        elif content is not None:
            raise CannotCross(f"content that is a {type(content).__name__}")
        if blocks:
            found.block_content.blocks.extend(blocks)
        return found

    def _calls(self, calls: Any) -> list[Any]:
        pb = _pb()
        if not isinstance(calls, list):
            raise CannotCross("tool_calls that is not a list")
        found = []
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or set(call) - {"id", "type", "function"}:
                raise CannotCross(f"a tool call shaped {call!r:.80}")
            arguments = function.get("arguments", "")
            if not isinstance(arguments, str) or not isinstance(call.get("id", ""), str):
                raise CannotCross("a tool call whose id or arguments are not strings")
            self.shapes[call.get("id", "")] = "openai"
            block = pb.ToolCallBlock(
                id=call.get("id", ""), name=str(function.get("name", "")), input_json=arguments
            )
            found.append(pb.ContentBlock(tool_call_block=block))
        return found

    def _block(self, block: Any) -> Any:
        pb = _pb()
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in _BLOCK_KEYS or set(block) - _BLOCK_KEYS[kind]:
            extra = sorted(set(block) - _BLOCK_KEYS.get(kind, {"type"})) if kind else []
            raise CannotCross(
                f"the key(s) {', '.join(map(repr, extra))} of a {kind} block"
                if kind in _BLOCK_KEYS
                else f"a content block shaped {block!r:.80}"
            )
        if kind == "text":
            return pb.ContentBlock(text_block=pb.TextBlock(text=str(block.get("text", ""))))
        if kind == "thinking":
            thinking = pb.ThinkingBlock(
                thinking=str(block.get("thinking", "")), signature=str(block.get("signature", ""))
            )
            return pb.ContentBlock(thinking_block=thinking)
        if kind == "tool_use":
            self.shapes[str(block.get("id", ""))] = "anthropic"
            call = pb.ToolCallBlock(
                id=str(block.get("id", "")),
                name=str(block.get("name", "")),
                input_json=json.dumps(block.get("input", {})),
            )
            return pb.ContentBlock(tool_call_block=call)
        result = pb.ToolResultBlock(
            tool_call_id=str(block.get("tool_use_id", "")),
            output_json=json.dumps(block.get("content", "")),
        )
        return pb.ContentBlock(tool_result_block=result)

    def from_proto(self, message: Any) -> dict[str, Any]:
        pb = _pb()
        role = pb.Role.Name(message.role).removeprefix("ROLE_").lower()
        found: dict[str, Any] = {"role": role}
        which = message.WhichOneof("content")
        if which == "text_content":
            found["content"] = message.text_content
        elif which == "block_content":
            found.update(self._blocks(list(message.block_content.blocks)))
        else:
            found["content"] = None
        if message.name:
            found["name"] = message.name
        if message.tool_call_id:
            found["tool_call_id"] = message.tool_call_id
        if message.metadata_json:
            found["metadata"] = json.loads(message.metadata_json)
        return found

    def _blocks(self, blocks: list[Any]) -> dict[str, Any]:
        calls = [b.tool_call_block for b in blocks if b.WhichOneof("block") == "tool_call_block"]
        openai = [c for c in calls if self.shapes.get(c.id) == "openai"]
        if openai and len(openai) == len(calls):
            texts = [b.text_block.text for b in blocks if b.WhichOneof("block") == "text_block"]
            return {
                "content": "".join(texts) if texts else None,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.input_json},
                    }
                    for c in openai
                ],
            }
        return {"content": [self._block_json(b) for b in blocks]}

    @staticmethod
    def _block_json(block: Any) -> dict[str, Any]:
        kind = block.WhichOneof("block")
        if kind == "text_block":
            return {"type": "text", "text": block.text_block.text}
        if kind == "thinking_block":
            return {
                "type": "thinking",
                "thinking": block.thinking_block.thinking,
                "signature": block.thinking_block.signature,
            }
        if kind == "tool_call_block":
            call = block.tool_call_block
            return {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": json.loads(call.input_json or "{}"),
            }
        if kind == "tool_result_block":
            result = block.tool_result_block
            return {
                "type": "tool_result",
                "tool_use_id": result.tool_call_id,
                "content": json.loads(result.output_json or '""'),
            }
        return {"type": kind or "unknown"}  # image, reasoning: shown by kind, never invented
