// What every JavaScript adapter shares: a correct store of the history, copied in and out, and
// the budget of a request. The store is ctxkit's part and must never be what the suite finds;
// the view is the library's part (`view(history, budget)` in each adapter).

const ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);

/** The adapter's own part: refuse what no provider accepts, before it is stored. */
export function validate(m) {
  if (m === null || typeof m !== "object" || Array.isArray(m)) throw new TypeError("a message must be an object");
  if (!ROLES.has(m.role)) throw new TypeError(`unknown role ${JSON.stringify(m.role)}`);
  if (m.content !== undefined && m.content !== null && typeof m.content !== "string" && !Array.isArray(m.content)) {
    throw new TypeError("content must be a string, a list of blocks or null");
  }
  if (m.role === "tool" && !m.tool_call_id) throw new TypeError("a tool message needs tool_call_id");
  if (m.tool_calls !== undefined && (!Array.isArray(m.tool_calls) || m.tool_calls.some((c) => !c?.id))) {
    throw new TypeError("tool_calls must be a list of calls with ids");
  }
  for (const b of Array.isArray(m.content) ? m.content : []) {
    if (b === null || typeof b !== "object" || typeof b.type !== "string") throw new TypeError("a content block needs a type");
    if (b.type === "tool_use" && !b.id) throw new TypeError("a tool_use block needs an id");
    if (b.type === "tool_result" && !b.tool_use_id) throw new TypeError("a tool_result block needs tool_use_id");
  }
}

/** Tokens of a message on the high side (bytes of JSON / 2 + 8): ctxkit's exact counter is
 * Python's, so views counted this way fit, perhaps with room. */
export const estimate = (m) => Math.floor(Buffer.byteLength(JSON.stringify(m), "utf8") / 2) + 8;

/** The context contract over a library's view; subclasses implement `view(history, budget)`. */
export class TrimmingStore {
  constructor(config = {}, hooks = null) {
    this.maxTokens = config.max_tokens ?? 128000;
    this.hooks = hooks;
    this.history = [];
  }

  async addMessage(message) {
    validate(message);
    this.history.push(structuredClone(message));
  }

  async getMessages() {
    return structuredClone(this.history);
  }

  async setMessages(messages) {
    messages.forEach(validate);
    this.history = structuredClone(messages);
  }

  async clear() {
    this.history = [];
  }

  async getMessagesForRequest({ tokenBudget, provider } = {}) {
    const defaults = provider?.getInfo()?.defaults;
    const budget =
      tokenBudget ?? (defaults ? defaults.context_window - (defaults.max_output_tokens ?? 0) : this.maxTokens);
    return this.view(structuredClone(this.history), budget);
  }
}
