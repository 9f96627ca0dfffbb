// What every JavaScript adapter shares: a correct store of the history, copied in and out, and
// the budget of a request. The store is ctxkit's part and must never be what the suite finds;
// the view is the library's part (`view(history, budget)` in each adapter).

const ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);

/** The adapter's own part: refuse what no provider accepts, before it is stored. */
export function validate(m) {
  if (m === null || typeof m !== "object" || Array.isArray(m)) throw new TypeError("a message must be an object");
  // The libraries behind these adapters read Chat Completions and Anthropic messages only:
  // other shapes are refused on the first add, so the suite checks the adapters in these two.
  if ("parts" in m) throw new TypeError("Gemini and GenAI parts are not taken by this adapter");
  if ("type" in m) throw new TypeError("Responses API items are not taken by this adapter");
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
    if (b.type === "text" && typeof b.text !== "string") throw new TypeError("a text block needs text");
  }
}

/** Tokens of a message on the high side (bytes of JSON / 2 + 8): ctxkit's exact counter is
 * Python's, so views counted this way fit, perhaps with room. */
export const estimate = (m) => Math.floor(Buffer.byteLength(JSON.stringify(m), "utf8") / 2) + 8;

/** The context contract over a library's view; subclasses implement `view(history, budget)`. */
const BUDGET_NOTE = "(and max_tokens, the budget when a request names none)";

/** The options to hand the library: every key the user wrote, exactly as written (null
 * included), and a default only for a key not written at all. A key that is not an option is
 * refused with a TypeError naming the known ones; a key the adapter sets itself (`setByAdapter`:
 * key -> why) is refused with the reason. Thrown while the manager is built, so ctxkit reports it
 * and exits 2. `max_tokens` is the store's (below), never the library's. */
export function libraryOptions(owner, config, known, defaults = {}, setByAdapter = {}) {
  const written = Object.fromEntries(Object.entries(config ?? {}).filter(([key]) => key !== "max_tokens"));
  for (const key of Object.keys(written)) {
    if (Object.hasOwn(setByAdapter, key)) throw new TypeError(`${owner}: '${key}' cannot be set: ${setByAdapter[key]}`);
    if (!known.includes(key)) {
      const options = known.length ? `its options are ${known.join(", ")}` : "it has no options";
      throw new TypeError(`${owner} has no option '${key}'; ${options} ${BUDGET_NOTE}`);
    }
  }
  return { ...defaults, ...written };
}

export class TrimmingStore {
  // The shapes the libraries behind these adapters read (validate() refuses the others); the
  // harness answers hello with them, so the suite judges the adapters in these only.
  static ctxkit_shapes = ["openai", "anthropic"];

  constructor(config = {}, hooks = null) {
    const written = config?.max_tokens;
    if (Object.hasOwn(config ?? {}, "max_tokens") && !(Number.isInteger(written) && written >= 1)) {
      throw new TypeError(`max_tokens must be a positive integer, got ${JSON.stringify(written)}`);
    }
    this.maxTokens = written ?? 128000;
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
