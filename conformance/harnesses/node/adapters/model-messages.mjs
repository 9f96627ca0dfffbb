// The history's JSON messages as AI SDK ModelMessages and back, with no library imported: the
// AI SDK's pruneMessages and Mastra's TokenLimiter (whose request stage reads the same message
// and part types) both take them.
//
// Each JSON message becomes ModelMessages (system, user, assistant, tool) whose
// providerOptions.ctxkit name the history message they came from, and each part the block or
// tool call it came from; an Anthropic user message of tool_result blocks becomes a tool message
// (then a user message for its other blocks), as the SDK models results. The way back rebuilds
// each history message from the parts the library kept, in its own shape.

const isBlock = (b, type) => b !== null && typeof b === "object" && b.type === type;
const tag = (origin) => ({ providerOptions: { ctxkit: origin } });
const text = (content) =>
  typeof content === "string"
    ? content
    : (content ?? []).map((b) => (typeof b?.text === "string" ? b.text : JSON.stringify(b))).join("\n");

function parseArguments(raw) {
  try {
    return JSON.parse(raw || "{}");
  } catch {
    return raw;
  }
}

/** AI SDK ModelMessages for a JSON history. */
export function toAiSdk(history) {
  const names = new Map(); // tool call id -> tool name, for results that do not say it
  const found = [];
  history.forEach((message, index) => {
    const { role, content } = message;
    const at = { origin: index };
    if (role === "system" || role === "developer") {
      found.push({ role: "system", content: text(content), ...tag(at) });
    } else if (role === "assistant") {
      const parts = [];
      if (Array.isArray(content)) {
        content.forEach((b, block) => {
          if (isBlock(b, "tool_use")) {
            names.set(b.id, b.name ?? "");
            parts.push({ type: "tool-call", toolCallId: b.id, toolName: b.name ?? "", input: b.input ?? {}, ...tag({ block }) });
          } else {
            parts.push({ type: "text", text: text([b]), ...tag({ block }) });
          }
        });
      } else if (content) {
        parts.push({ type: "text", text: content, ...tag({ text: true }) });
      }
      (message.tool_calls ?? []).forEach((c, call) => {
        names.set(c.id, c.function?.name ?? "");
        parts.push({
          type: "tool-call",
          toolCallId: c.id,
          toolName: c.function?.name ?? "",
          input: parseArguments(c.function?.arguments),
          ...tag({ call }),
        });
      });
      found.push({ role: "assistant", content: parts, ...tag(at) });
    } else if (role === "tool") {
      const result = {
        type: "tool-result",
        toolCallId: message.tool_call_id,
        toolName: names.get(message.tool_call_id) ?? "",
        output: { type: "text", value: text(content) },
        ...tag({ whole: true }),
      };
      found.push({ role: "tool", content: [result], ...tag(at) });
    } else if (Array.isArray(content)) {
      const results = [];
      const rest = [];
      content.forEach((b, block) => {
        if (isBlock(b, "tool_result")) {
          results.push({
            type: "tool-result",
            toolCallId: b.tool_use_id,
            toolName: names.get(b.tool_use_id) ?? "",
            output: { type: b.is_error ? "error-text" : "text", value: text(b.content ?? "") },
            ...tag({ block }),
          });
        } else {
          rest.push({ type: "text", text: text([b]), ...tag({ block }) });
        }
      });
      if (results.length) found.push({ role: "tool", content: results, ...tag(at) });
      if (rest.length) found.push({ role: "user", content: rest, ...tag(at) });
    } else {
      found.push({ role: "user", content: content ?? "", ...tag(at) });
    }
  });
  return found;
}

/** The JSON messages, or the parts of them the SDK kept, that `messages` came from. */
export function fromAiSdk(messages, history) {
  const groups = [];
  for (const message of messages) {
    const origin = message?.providerOptions?.ctxkit?.origin;
    let group = groups.at(-1);
    if (group?.origin !== origin) {
      group = { origin, whole: false, text: false, blocks: new Set(), calls: new Set() };
      groups.push(group);
    }
    if (!Array.isArray(message.content)) {
      group.whole = true;
      continue;
    }
    for (const part of message.content) {
      const from = part?.providerOptions?.ctxkit ?? {};
      if (from.whole) group.whole = true;
      if (from.text) group.text = true;
      if (from.block !== undefined) group.blocks.add(from.block);
      if (from.call !== undefined) group.calls.add(from.call);
    }
  }
  return groups.map((group) => {
    const source = history[group.origin];
    const back = structuredClone(source);
    if (group.whole) return back;
    if (Array.isArray(source.content)) back.content = source.content.filter((_, k) => group.blocks.has(k));
    else if (source.content) back.content = group.text ? source.content : null;
    if (source.tool_calls) {
      const kept = source.tool_calls.filter((_, k) => group.calls.has(k));
      if (kept.length) back.tool_calls = structuredClone(kept);
      else delete back.tool_calls;
    }
    return back;
  });
}
