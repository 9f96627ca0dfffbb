// @langchain/core's trimMessages behind the context contract, for `ctxkit conformance
// js:@langchain/core:trimMessages` (strategy "last") and `...:trimMessages:first`.
//
// The library is resolved from the current directory (`npm install @langchain/core` there).
// The history is stored here, copied in and out; every view converts it to LangChain.js
// messages, calls trimMessages with the budget and converts the answer back, repairing
// nothing. Each LangChain message carries the index of the history message it came from, so
// the way back restores each message's shape; an Anthropic user message with tool_result
// blocks becomes one ToolMessage per result (and a HumanMessage for its other blocks) and comes
// back as one message. Tokens are counted on the high side (store.mjs, plus 3 for the reply).

import { importFromHere } from "./library.mjs";
import { TrimmingStore, estimate, libraryOptions } from "./store.mjs";

const lc = await importFromHere("@langchain/core/messages", "@langchain/core");

const MODELLED = new Set(["role", "content", "tool_calls", "tool_call_id", "name"]);
const extras = (m) => Object.fromEntries(Object.entries(m).filter(([k]) => !MODELLED.has(k)));
const isBlock = (b, type) => b !== null && typeof b === "object" && b.type === type;

function shapeOf(message) {
  const content = message?.content;
  return Array.isArray(content) && content.some((b) => isBlock(b, "tool_use") || isBlock(b, "tool_result"))
    ? "anthropic"
    : "openai";
}

/** LangChain.js messages for a JSON history; ids "<index>" or "<index>.<part>". */
export function toLangChain(history) {
  const found = [];
  history.forEach((message, index) => {
    const { role, content } = message;
    const common = { additional_kwargs: extras(message), ...(message.name ? { name: message.name } : {}) };
    if (role === "system" || role === "developer") {
      found.push(new lc.SystemMessage({ content: content ?? "", id: `${index}`, ...common }));
    } else if (role === "assistant") {
      const calls = [];
      let text = content ?? "";
      if (Array.isArray(content)) {
        for (const b of content) if (isBlock(b, "tool_use")) calls.push({ id: b.id, name: b.name ?? "", args: b.input ?? {}, type: "tool_call" });
        text = content.filter((b) => !isBlock(b, "tool_use"));
      }
      for (const call of message.tool_calls ?? []) {
        let args;
        try {
          args = JSON.parse(call.function?.arguments || "{}");
        } catch {
          args = { __unparsed__: call.function?.arguments };
        }
        calls.push({ id: call.id, name: call.function?.name ?? "", args, type: "tool_call" });
      }
      found.push(new lc.AIMessage({ content: text, tool_calls: calls, id: `${index}`, ...common }));
    } else if (role === "tool") {
      found.push(new lc.ToolMessage({ content: content ?? "", tool_call_id: message.tool_call_id, id: `${index}`, ...common }));
    } else if (Array.isArray(content) && content.some((b) => isBlock(b, "tool_result"))) {
      const results = content.filter((b) => isBlock(b, "tool_result"));
      const rest = content.filter((b) => !isBlock(b, "tool_result"));
      results.forEach((block, part) => {
        const { content: output, ...kept } = block;
        found.push(
          new lc.ToolMessage({
            content: output ?? "",
            tool_call_id: block.tool_use_id,
            id: `${index}.${part}`,
            additional_kwargs: { block: kept },
          }),
        );
      });
      if (rest.length) found.push(new lc.HumanMessage({ content: rest, id: `${index}.${results.length}`, ...common }));
    } else {
      found.push(new lc.HumanMessage({ content: content ?? "", id: `${index}`, ...common }));
    }
  });
  return found;
}

function toJSON(message, shape) {
  const kind = message._getType();
  const { block, ...kwargs } = message.additional_kwargs ?? {};
  const named = message.name ? { name: message.name } : {};
  if (kind === "system") return { role: "system", content: message.content, ...named, ...kwargs };
  if (kind === "tool" && block) return { role: "user", content: [{ ...block, content: message.content }] };
  if (kind === "tool") return { role: "tool", tool_call_id: message.tool_call_id, content: message.content, ...named, ...kwargs };
  if (kind === "ai" && shape === "anthropic") {
    const text = Array.isArray(message.content) ? message.content : message.content ? [{ type: "text", text: message.content }] : [];
    const uses = message.tool_calls.map((c) => ({ type: "tool_use", id: c.id, name: c.name, input: c.args }));
    return { role: "assistant", content: [...text, ...uses], ...named, ...kwargs };
  }
  if (kind === "ai") {
    const converted = { role: "assistant", content: message.content || null };
    if (message.tool_calls?.length) {
      converted.tool_calls = message.tool_calls.map((c) => ({
        id: c.id,
        type: "function",
        function: {
          name: c.name,
          arguments: "__unparsed__" in c.args ? c.args.__unparsed__ : JSON.stringify(c.args),
        },
      }));
    }
    return { ...converted, ...named, ...kwargs };
  }
  return { role: "user", content: message.content, ...named, ...kwargs };
}

/** JSON messages for what toLangChain made from `history`, each in its original shape. */
export function fromLangChain(messages, history) {
  const found = [];
  let previous = null;
  for (const message of messages) {
    if (typeof message?._getType !== "function") {
      found.push(message ?? null); // not a message: shown as the library returned it
      previous = null;
      continue;
    }
    const id = String(message.id ?? "");
    const origin = id.split(".")[0];
    const converted = toJSON(message, shapeOf(history[Number(origin)]));
    if (id.includes(".") && origin === previous && found.length) {
      found[found.length - 1].content = [...found[found.length - 1].content, ...converted.content];
    } else {
      found.push(converted);
    }
    previous = id.includes(".") ? origin : null;
  }
  return found;
}

// Options reach trimMessages exactly as written (null included); only a key not written gets a
// default: for strategy "last" the chat-history settings of LangChain's docs, for "first" none.
const OPTIONS = ["includeSystem", "startOn", "endOn", "allowPartial", "textSplitter"];
const DEFAULTS = { last: { includeSystem: true, startOn: "human" }, first: {} };
const SET_BY_ADAPTER = {
  strategy: "the adapter's name sets it (js:@langchain/core:trimMessages is 'last', ...:trimMessages:first is 'first')",
  maxTokens: "it is each request's budget (a request without one uses max_tokens)",
  tokenCounter: "the adapter counts every message on the high side, so views fit ctxkit's exact count",
};

class TrimMessages extends TrimmingStore {
  constructor(config = {}, hooks = null, strategy = "last") {
    super(config, hooks);
    const name = `js:@langchain/core:trimMessages${strategy === "first" ? ":first" : ""} (trimMessages)`;
    this.options = { strategy, ...libraryOptions(name, config, OPTIONS, DEFAULTS[strategy], SET_BY_ADAPTER) };
  }

  async view(history, budget) {
    const counted = (messages) =>
      fromLangChain(messages, history).reduce((sum, m) => sum + estimate(m), 0) + (messages.length ? 3 : 0);
    const kept = await lc.trimMessages(toLangChain(history), { maxTokens: budget, tokenCounter: counted, ...this.options });
    return fromLangChain(kept, history);
  }
}

export class TrimMessagesLast extends TrimMessages {
  constructor(config, hooks) {
    super(config, hooks, "last");
  }
}

export class TrimMessagesFirst extends TrimMessages {
  constructor(config, hooks) {
    super(config, hooks, "first");
  }
}
