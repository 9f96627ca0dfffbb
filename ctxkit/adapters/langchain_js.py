"""Upstream bug reports for LangChain.js's ``trimMessages``: the counterexample's history as
``@langchain/core`` messages in a Node script that needs nothing else.

The script counts one token a message (``tokenCounter: (ms) => ms.length``) and tries every
``maxTokens`` from 0 to the number of messages, stopping at the first that shows the fault, so
it is correct by construction without running Node here; it exits 1 with the fault's sentence.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ctxkit.adapters.blocks import is_tool_result, is_tool_use
from ctxkit.adapters.reports import history_before_view

__all__ = ["bug_report_first", "bug_report_last", "constructors"]

_CLIP = 40


def _js(value: Any) -> str:
    if isinstance(value, str):
        value = value[:_CLIP]
    return json.dumps(value, ensure_ascii=False)


def _message(message: dict[str, Any]) -> list[str]:
    role, content = message["role"], message.get("content")
    text = content if isinstance(content, str) else ""
    if role in ("system", "developer"):
        return [f"new SystemMessage({{ content: {_js(text)} }})"]
    if role == "tool":
        call = _js(message.get("tool_call_id"))
        return [f"new ToolMessage({{ content: {_js(text)}, tool_call_id: {call} }})"]
    blocks = content if isinstance(content, list) else []
    if role == "assistant":
        calls = [
            {"id": b.get("id"), "name": b.get("name", ""), "args": b.get("input") or {}}
            for b in blocks
            if is_tool_use(b)
        ]
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            try:
                args = json.loads(function.get("arguments") or "{}")
            except (TypeError, ValueError):
                args = {}
            calls.append({"id": call.get("id"), "name": function.get("name", ""), "args": args})
        text = text or " ".join(b.get("text", "") for b in blocks if isinstance(b, dict))
        return [f"new AIMessage({{ content: {_js(text)}, tool_calls: {json.dumps(calls)} }})"]
    results = [b for b in blocks if is_tool_result(b)]
    found = [
        f"new ToolMessage({{ content: {_js(str(b.get('content', '')))}, "
        f"tool_call_id: {_js(b.get('tool_use_id'))} }})"
        for b in results
    ]
    rest = " ".join(
        b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"
    )
    if text or rest or not results:
        found.append(f"new HumanMessage({{ content: {_js(text or rest)} }})")
    return found


def constructors(history: Sequence[dict[str, Any]]) -> list[str]:
    """``@langchain/core`` constructor calls for a JSON history, as the adapter maps it."""
    return [line for message in history for line in _message(message)]


_SPLIT = """\
  const calls = view.filter((m) => m._getType() === "ai").flatMap((m) => m.tool_calls);
  const called = new Set(calls.map((c) => c.id));
  const answered = new Set(view.filter((m) => m._getType() === "tool").map((m) => m.tool_call_id));
  const unpaired = [...called, ...answered].filter((id) => !(called.has(id) && answered.has(id)));
  if (unpaired.length) fail(maxTokens, `tool ids without their other half: ${unpaired}`);"""

_UNDEFINED = """\
  if (view.some((m) => m === undefined)) fail(maxTokens, "the view holds undefined");"""


def _report(title: str, why: str, options: str, check: str, history: list[Any]) -> str:
    listed = "\n".join(f"  {line}," for line in constructors(history))
    return f"""### `trimMessages` {title}

{why} Found by ctxkit's conformance suite; this reproducer uses @langchain/core only
(`npm install @langchain/core`, then `node reproduce.mjs`).

```js
import {{ AIMessage, HumanMessage, SystemMessage, ToolMessage }} from "@langchain/core/messages";
import {{ trimMessages }} from "@langchain/core/messages";

const messages = [
{listed}
];
function fail(maxTokens, problem) {{
  console.error(`maxTokens ${{maxTokens}}: ${{problem}}`);
  process.exit(1);
}}
for (let maxTokens = 0; maxTokens <= messages.length; maxTokens++) {{
  const tokenCounter = (ms) => ms.length;
  const view = await trimMessages(messages, {{ maxTokens, tokenCounter, {options} }});
{check}
}}
console.log("no maxTokens shows the fault");
```
"""


def _history(property_id: str, cell: Any, wanted: set[str]) -> list[Any] | None:
    if property_id not in wanted or not getattr(cell, "trace", None):
        return None
    history, _ = history_before_view(cell.trace)
    return history


def bug_report_first(property_id: str, cell: Any) -> str:
    """The split pair of ``strategy: "first"``; empty for other failures."""
    history = _history(property_id, cell, {"tool_pair_integrity"})
    if history is None:
        return ""
    return _report(
        "returns tool calls without their results",
        'With `strategy: "first"`, `trimMessages` cuts between an `AIMessage` that calls tools '
        "and the `ToolMessage`s that answer it; chat model APIs reject such a list.",
        'strategy: "first"',
        _SPLIT,
        history,
    )


def bug_report_last(property_id: str, cell: Any) -> str:
    """``[undefined]`` for a history of system messages only (``strategy: "last"``)."""
    history = _history(property_id, cell, {"lifecycle", "tool_pair_integrity"})
    if history is None or any(m.get("role") not in ("system", "developer") for m in history):
        return ""
    return _report(
        "returns [undefined] for a history of system messages",
        'With `strategy: "last"`, `includeSystem: true` and `startOn: "human"`, a history '
        "holding only system messages comes back as a list holding `undefined`.",
        'strategy: "last", includeSystem: true, startOn: "human"',
        _UNDEFINED,
        history,
    )
