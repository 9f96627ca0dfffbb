"""A pydantic-ai history processor behind the context contract, run inside a real ``Agent``.

ctxkit keeps the history. Before every request the adapter converts it to pydantic-ai's
``ModelMessage`` types (:func:`to_pydantic_ai`), runs a real ``pydantic_ai.Agent`` once with
``capabilities=[ProcessHistory(processor)]`` and a ``FunctionModel`` that records the messages
it is sent and answers ``"ok"``, and returns what that model received, converted back
(:func:`from_pydantic_ai`). So the view is the processor's output *and* everything pydantic-ai
does around it, exactly as a provider would get it.

Verified against pydantic-ai-slim 2.68's source (``_agent_graph.py``, ``messages.py``,
``capabilities/process_history.py``):

* ``history_processors=`` is gone in v2; a processor is the ``ProcessHistory`` capability, a
  ``before_model_request`` hook. It takes ``(messages)`` or ``(ctx, messages)``, sync or async
  (``_run_history_processor``), and its result replaces both the request and the run's history.
* Before the processor, ``UserPromptNode`` cleans the history given as ``message_history``
  (``_clean_message_history``): adjacent requests (a system prompt and a user prompt, tool
  results and a user prompt) and adjacent responses not from an API are merged, so a processor
  counts pydantic-ai's messages, not ctxkit's.
* After the processor, and before the model is called, pydantic-ai **repairs the history**
  (``_clean_message_history(..., repair_last_response=True)`` in ``_prepare_request``): a tool
  result whose call is gone is dropped (``_drop_orphaned_tool_results``), a call left without
  its result gets a synthesized ``ToolReturnPart`` "The tool call was interrupted before a
  result was produced." with ``metadata={'pydantic_ai_synthesized_tool_return': True}``
  (``_repair_dangling_tool_calls``), then adjacent messages are merged. So a processor that
  cuts between a call and its results does not reach the model as a split pair; a synthesized
  result comes back here as a tool result that comes from no history message.
* A processor's output must end with a ``ModelRequest`` and cannot be empty (``UserError``).
* The newest user message is never passed twice: with ``user_prompt=None`` and a history
  ending with a request, ``UserPromptNode`` pops that request and sends it as the run's own
  ("resuming without a new prompt"). A history ending with a response is a finished turn:
  pydantic-ai sends nothing more without new input (with no instructions it returns at once),
  so the adapter asks for the next turn with an empty prompt (``user_prompt=""``), as the next
  user message would, and leaves that one empty ``UserPromptPart`` out of the view. The
  processor sees it, as it would see the user's next prompt. An empty history is asked the same
  way (pydantic-ai refuses a run with no history and no prompt).

The default processor is the one pydantic-ai's message-history docs show ("Keep Only Recent
Messages"): ``messages[-5:] if len(messages) > 5 else messages``; ``keep`` sets its 5. (The
reference bundled with 2.68 shows the same function keeping 10.)

Conversion keeps the origin of every part: each part the adapter makes is recorded with the
history message (and the blocks of it) it stands for, and pydantic-ai passes parts on as the
same objects (its docs say so, and it was verified: merging and repair use
``dataclasses.replace`` on messages, never on kept parts), so a part it leaves alone comes back
exactly, in its message's shape, and the blocks of one message that arrive together are one
message again. A part that is not the same object is matched by equality (a processor that
copies), in history order. A part nobody recorded (a synthesized result, a processor's summary)
comes back converted: system, user and tool messages in the shape of the call they answer,
assistant messages in the Chat Completions shape. Each message's parts carry a timestamp of
its own (one second apart), as a real history's do.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ctxkit.adapters.base import (
    DEFAULT_MAX_TOKENS,
    TrimmingAdapter,
    import_named,
    library_options,
)
from ctxkit.adapters.blocks import is_tool_result, is_tool_use, text_of

__all__ = [
    "Converted",
    "HistoryProcessor",
    "from_pydantic_ai",
    "keep_recent_messages",
    "to_pydantic_ai",
]

START = datetime(2025, 1, 1, tzinfo=UTC)
"""The timestamp of the history's first message; each next one is a second later."""

ANSWER = "ok"
"""What the adapter's FunctionModel answers (never seen: the view is what it was sent)."""

_SERVER_RESULT = "_tool_result"


def keep_recent_messages(keep: Any = 5) -> Callable[..., Any]:
    """pydantic-ai's documented processor ("Keep Only Recent Messages"), with its 5 as ``keep``,
    written as the docs write it (async, ``messages[-5:] if len(messages) > 5 else
    messages``). ``keep`` is used as given: a value the code cannot compare fails as it would."""

    async def keep_recent_messages(messages: list[Any]) -> list[Any]:
        """Keep only the last ``keep`` messages to manage token usage."""
        return messages[-keep:] if len(messages) > keep else messages

    return keep_recent_messages


# -- ctxkit -> pydantic-ai -------------------------------------------------------------------


Origin = tuple[int, tuple[int, ...]]
"""The history message a part stands for, and which of its pieces (blocks, or for a Chat
Completions assistant message 0 for the text and 1.. for the calls)."""


@dataclass
class Converted:
    """A history in pydantic-ai's types, with the origin of every part made for it."""

    messages: list[Any]
    origins: list[tuple[Any, Origin]] = field(default_factory=list)
    """Every part made, with its origin (kept here, so the objects stay alive)."""
    pieces: list[frozenset[int]] = field(default_factory=list)
    """The pieces each history message was made into."""

    def __post_init__(self) -> None:
        self.by_id = {id(part): origin for part, origin in self.origins}

    def origin(self, part: Any, after: int) -> Origin | None:
        """The origin of ``part``: the very object, else an equal part, the first from history
        message ``after`` on (then any)."""
        found = self.by_id.get(id(part))
        if found is not None:
            return found
        equal = [o for p, o in self.origins if type(p) is type(part) and p == part]
        return next((o for o in equal if o[0] >= after), equal[0] if equal else None)


def _shape(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result", "thinking", "text")
        for b in content
    ):
        return "anthropic" if message["role"] != "system" else "openai"
    return "openai"


def _names(history: Sequence[dict[str, Any]]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in history:
        for call in message.get("tool_calls") or []:
            names[call.get("id")] = (call.get("function") or {}).get("name", "")
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") in ("tool_use", "server_tool_use"):
                    names[block.get("id")] = block.get("name", "")
    return names


def _arguments(arguments: Any) -> Any:
    """Chat Completions arguments as pydantic-ai keeps a model's: the JSON string as sent."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def to_pydantic_ai(history: Sequence[dict[str, Any]]) -> Converted:
    """pydantic-ai messages for a JSON history, one ``ModelRequest`` or ``ModelResponse`` per
    message, each part recorded with its origin."""
    from pydantic_ai.messages import ModelRequest, ModelResponse

    names = _names(history)
    converted = Converted([])
    for index, message in enumerate(history):
        stamp = START + timedelta(seconds=index)
        made = _parts(message, names, stamp)
        if not made:  # every message stands for at least one part, so its place is seen
            made = [(_empty_part(message, stamp), (0,))]
        parts = [part for part, _ in made]
        if message["role"] == "assistant":
            converted.messages.append(ModelResponse(parts=parts, timestamp=stamp))
        else:
            converted.messages.append(ModelRequest(parts=parts, timestamp=stamp))
        converted.origins.extend((part, (index, pieces)) for part, pieces in made)
        converted.pieces.append(frozenset(p for _, pieces in made for p in pieces))
    converted.__post_init__()
    return converted


def _empty_part(message: dict[str, Any], stamp: datetime) -> Any:
    from pydantic_ai.messages import TextPart, UserPromptPart

    return TextPart("") if message["role"] == "assistant" else UserPromptPart("", timestamp=stamp)


def _parts(
    message: dict[str, Any], names: dict[str, str], stamp: datetime
) -> list[tuple[Any, tuple[int, ...]]]:
    from pydantic_ai.messages import SystemPromptPart, ToolReturnPart, UserPromptPart

    role, content = message["role"], message.get("content")
    if role in ("system", "developer"):
        return [(SystemPromptPart(text_of(content), timestamp=stamp), (0,))]
    if role == "tool":
        call_id = message.get("tool_call_id", "")
        part = ToolReturnPart(
            names.get(call_id, ""), _result_content(content), call_id, timestamp=stamp
        )
        return [(part, (0,))]
    if role == "assistant":
        return _assistant_parts(message, names)
    if isinstance(content, list) and any(is_tool_result(b) for b in content):
        made: list[tuple[Any, tuple[int, ...]]] = []
        rest = [j for j, b in enumerate(content) if not is_tool_result(b)]
        for j, block in enumerate(content):
            if is_tool_result(block):
                call_id = block.get("tool_use_id", "")
                part = ToolReturnPart(
                    names.get(call_id, ""),
                    _result_content(block.get("content", "")),
                    call_id,
                    timestamp=stamp,
                    outcome="failed" if block.get("is_error") else "success",
                )
                made.append((part, (j,)))
        if rest:  # pydantic-ai sends a request's tool results before its user prompt
            texts = [text_of([content[j]]) for j in rest]
            made.append((UserPromptPart(texts, timestamp=stamp), tuple(rest)))
        return made
    if isinstance(content, list):
        return [(UserPromptPart([text_of([b]) for b in content], timestamp=stamp), (0,))]
    return [(UserPromptPart(content if isinstance(content, str) else "", timestamp=stamp), (0,))]


def _result_content(content: Any) -> Any:
    return content if isinstance(content, str) else text_of(content)


def _assistant_parts(
    message: dict[str, Any], names: dict[str, str]
) -> list[tuple[Any, tuple[int, ...]]]:
    from pydantic_ai.messages import TextPart, ToolCallPart

    content = message.get("content")
    if isinstance(content, list) and _shape(message) == "anthropic":
        return [(_block_part(block), (j,)) for j, block in enumerate(content)]
    made: list[tuple[Any, tuple[int, ...]]] = []
    if content:
        made.append((TextPart(text_of(content)), (0,)))
    for k, call in enumerate(message.get("tool_calls") or [], start=1):
        function = call.get("function") or {}
        part = ToolCallPart(
            function.get("name", ""), _arguments(function.get("arguments", "")), call.get("id")
        )
        made.append((part, (k,)))
    return made


def _block_part(block: Any) -> Any:
    """An Anthropic assistant block as pydantic-ai's Anthropic model reads it."""
    from pydantic_ai.messages import (
        NativeToolCallPart,
        NativeToolReturnPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
    )

    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        return TextPart(block.get("text", ""))
    if is_tool_use(block):
        return ToolCallPart(block.get("name", ""), block.get("input") or {}, block.get("id"))
    if kind == "thinking":
        return ThinkingPart(
            block.get("thinking", ""), signature=block.get("signature"), provider_name="anthropic"
        )
    if kind == "redacted_thinking":
        return ThinkingPart(
            "", id="redacted_thinking", signature=block.get("data"), provider_name="anthropic"
        )
    if kind == "server_tool_use":
        return NativeToolCallPart(
            block.get("name", ""),
            block.get("input") or {},
            block.get("id"),
            provider_name="anthropic",
        )
    if isinstance(kind, str) and kind.endswith(_SERVER_RESULT):
        return NativeToolReturnPart(
            kind[: -len(_SERVER_RESULT)],
            block.get("content"),
            block.get("tool_use_id"),
            provider_name="anthropic",
        )
    return TextPart(text_of([block]))


# -- pydantic-ai -> ctxkit -------------------------------------------------------------------


def from_pydantic_ai(
    messages: Sequence[Any], converted: Converted, history: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """JSON messages for pydantic-ai messages: the parts of one history message that arrive
    together are that message again (exactly, when all of it arrives; with only the blocks
    that did, otherwise); a part nobody recorded is converted (see the module)."""
    shapes = _call_shapes(history)
    found: list[dict[str, Any]] = []
    group: list[Origin] = []
    last = 0

    def flush() -> None:
        if group:
            found.append(_rebuilt(history, converted, group))
            group.clear()

    for message in messages:
        made: list[Any] = []
        for part in message.parts:
            origin = converted.origin(part, last)
            if origin is None:
                flush()
                made.append(part)
                continue
            if made:
                found.extend(_made(made, message, shapes))
                made = []
            if group and (
                group[-1][0] != origin[0] or set(origin[1]) & {p for _, ps in group for p in ps}
            ):
                flush()
            group.append(origin)
            last = origin[0]
        if made:
            found.extend(_made(made, message, shapes))
    flush()
    return _join_results(found)


def _rebuilt(
    history: Sequence[dict[str, Any]], converted: Converted, group: list[Origin]
) -> dict[str, Any]:
    index = group[0][0]
    original = history[index]
    kept = sorted(p for _, pieces in group for p in pieces)
    if frozenset(kept) == converted.pieces[index]:
        return json.loads(json.dumps(original))
    content = original.get("content")
    if isinstance(content, list) and _shape(original) == "anthropic":
        return {**original, "content": [content[j] for j in kept]}
    # A Chat Completions assistant message: 0 is its text, 1.. its calls.
    calls = [original["tool_calls"][k - 1] for k in kept if k >= 1]
    rebuilt = {**original, "content": content if 0 in kept else None}
    if calls:
        rebuilt["tool_calls"] = calls
    else:
        rebuilt.pop("tool_calls", None)
    return json.loads(json.dumps(rebuilt))


def _call_shapes(history: Sequence[dict[str, Any]]) -> dict[str, str]:
    shapes: dict[str, str] = {}
    for message in history:
        for call in message.get("tool_calls") or []:
            shapes[call.get("id")] = "openai"
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if is_tool_use(block):
                    shapes[block.get("id")] = "anthropic"
    return shapes


def _made(parts: list[Any], message: Any, shapes: dict[str, str]) -> list[dict[str, Any]]:
    """JSON messages for parts nobody recorded (pydantic-ai's or the processor's own)."""
    if message.kind == "response":
        text = "".join(p.content for p in parts if p.part_kind == "text")
        calls = [p for p in parts if p.part_kind == "tool-call"]
        if calls and all(shapes.get(c.tool_call_id) == "anthropic" for c in calls):
            blocks = [{"type": "text", "text": text}] if text else []
            blocks += [
                {
                    "type": "tool_use",
                    "id": c.tool_call_id,
                    "name": c.tool_name,
                    "input": c.args_as_dict(),
                }
                for c in calls
            ]
            return [{"role": "assistant", "content": blocks}]
        answer: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            answer["tool_calls"] = [
                {
                    "id": c.tool_call_id,
                    "type": "function",
                    "function": {"name": c.tool_name, "arguments": c.args_as_json_str()},
                }
                for c in calls
            ]
        return [answer]
    found: list[dict[str, Any]] = []
    for part in parts:
        kind = part.part_kind
        if kind == "system-prompt":
            found.append({"role": "system", "content": part.content})
        elif kind in ("tool-return", "retry-prompt") and getattr(part, "tool_name", None):
            output = part.model_response() if kind == "retry-prompt" else part.model_response_str()
            if shapes.get(part.tool_call_id) == "anthropic":
                block = {"type": "tool_result", "tool_use_id": part.tool_call_id, "content": output}
                found.append({"role": "user", "content": [block], "_made_results": True})
            else:
                found.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": output})
        elif kind == "user-prompt":
            content = part.content
            if not isinstance(content, str):
                content = "\n".join(
                    c if isinstance(c, str) else str(getattr(c, "content", c)) for c in content
                )
            found.append({"role": "user", "content": content})
        else:
            found.append({"role": "user", "content": str(getattr(part, "content", "") or "")})
    return found


def _join_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Adjacent Anthropic results pydantic-ai made become one user message, as Anthropic
    needs every result of a turn in the next message."""
    joined: list[dict[str, Any]] = []
    for message in messages:
        if message.get("_made_results") and joined and joined[-1].get("_made_results"):
            joined[-1]["content"] = [*joined[-1]["content"], *message["content"]]
        else:
            joined.append(message)
    for message in joined:
        message.pop("_made_results", None)
    return joined


# -- the adapter -----------------------------------------------------------------------------


class HistoryProcessor(TrimmingAdapter):
    """A history processor inside a real pydantic-ai ``Agent`` (see the module).

    Options: ``processor``, the processor (``"module:attr"``, or the function itself), passed
    to ``ProcessHistory`` exactly as written (``None`` included); ``keep``, the N of the
    default, documented processor, used as written. Not written: the documented processor
    keeping 5. ``keep`` with ``processor`` is refused: it belongs to the default.
    The agent runs once while the manager is built, so a processor pydantic-ai cannot run is a
    build error, not a failure on every request."""

    name = "pydantic_ai:history_processor"
    OPTIONS = ("processor", "keep")

    def __init__(
        self, max_tokens: int = DEFAULT_MAX_TOKENS, hooks: Any = None, **options: Any
    ) -> None:
        super().__init__(max_tokens, hooks)
        from pydantic_ai import Agent
        from pydantic_ai.capabilities import ProcessHistory
        from pydantic_ai.models.function import FunctionModel

        self.options = library_options(f"{self.name} (ProcessHistory)", options, self.OPTIONS)
        if "processor" in self.options and "keep" in self.options:
            raise TypeError(
                f"{self.name}: 'keep' is the N of the default processor (pydantic-ai's "
                "documented keep_recent_messages); with 'processor' written, the processor "
                "decides alone"
            )
        if "processor" in self.options:
            processor = self.options["processor"]
            if isinstance(processor, str):
                processor = import_named(processor, "processor")
        else:
            processor = keep_recent_messages(self.options.get("keep", 5))
        self.processor = processor
        self.capability = ProcessHistory(processor)
        self._function_model = FunctionModel
        self.agent = Agent(
            FunctionModel(self._answer), name="ctxkit_adapter", capabilities=[self.capability]
        )
        self._run_once()

    @staticmethod
    def _answer(messages: list[Any], info: Any) -> Any:
        from pydantic_ai.messages import ModelResponse, TextPart

        return ModelResponse(parts=[TextPart(ANSWER)])

    def _run_once(self) -> None:
        """One run on a one-prompt history, while the manager is built."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self._sent([{"role": "user", "content": "hello"}]))
            return
        # Built inside a running loop (an async test): the check runs on a thread of its own.
        import threading

        errors: list[BaseException] = []

        def check() -> None:
            try:
                asyncio.run(self._sent([{"role": "user", "content": "hello"}]))
            except BaseException as error:
                errors.append(error)

        thread = threading.Thread(target=check)
        thread.start()
        thread.join()
        if errors:
            raise errors[0]

    async def _sent(self, history: list[dict[str, Any]]) -> tuple[list[Any], Converted, bool]:
        """What the agent's model is sent for ``history``, the conversion, and whether the
        adapter's empty prompt is in it."""
        from pydantic_ai.messages import ModelResponse

        converted = to_pydantic_ai(history)
        received: list[list[Any]] = []

        def model(messages: list[Any], info: Any) -> Any:
            received.append(list(messages))
            return self._answer(messages, info)

        ends_with_request = bool(converted.messages) and not isinstance(
            converted.messages[-1], ModelResponse
        )
        prompt = None if ends_with_request else ""
        await self.agent.run(
            prompt, message_history=converted.messages, model=self._function_model(model)
        )
        return received[0], converted, prompt is not None

    def trim(self, history: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
        raise NotImplementedError("the view is asynchronous: see get_messages_for_request")

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict[str, Any]]:
        history = [dict(m) for m in await self.get_messages()]
        sent, converted, prompted = await self._sent(history)
        if prompted:
            sent = _without_prompt(sent, converted)
        return from_pydantic_ai(sent, converted, history)


def _without_prompt(messages: list[Any], converted: Converted) -> list[Any]:
    """``messages`` without the empty ``UserPromptPart`` pydantic-ai made for the adapter's
    ``user_prompt=""`` (the last request's, recorded for no history message)."""
    from dataclasses import replace

    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.kind != "request":
            continue
        for position in range(len(message.parts) - 1, -1, -1):
            part = message.parts[position]
            if (
                part.part_kind == "user-prompt"
                and part.content == ""
                and id(part) not in converted.by_id
            ):
                parts = [*message.parts[:position], *message.parts[position + 1 :]]
                rest = [replace(message, parts=parts)] if parts else []
                return [*messages[:index], *rest, *messages[index + 1 :]]
        break
    return messages
