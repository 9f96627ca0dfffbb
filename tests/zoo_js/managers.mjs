// JavaScript twins of the Python zoo's core members (tests/zoo/base.py, pairs.py, history.py,
// views.py): the same behaviour, so ctxkit must judge each exactly as it judges its twin.
// Node built-ins only, nothing of ctxkit: a manager must not share code with its checker.

const ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);
const FILL = 0.9;

/** Python's json.dumps(value, ensure_ascii=False): ", " and ": " between items. */
function dumps(value) {
  if (Array.isArray(value)) return `[${value.map(dumps).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${dumps(v)}`).join(", ")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** Tokens of one message, on the high side: two bytes of JSON a token, plus framing. */
export function estimate(message) {
  return Math.floor(Buffer.byteLength(dumps(message), "utf8") / 2) + 8;
}

const total = (messages) => messages.reduce((sum, m) => sum + estimate(m), 0);
const roleOf = (m) => (m !== null && typeof m === "object" ? m.role : undefined);
const blocks = (m) => (Array.isArray(m?.content) ? m.content.filter((b) => b && typeof b === "object") : []);

function callIds(m) {
  if (roleOf(m) !== "assistant") return [];
  const openai = (m.tool_calls ?? []).filter((c) => c && typeof c === "object").map((c) => c.id);
  return openai.length ? openai : blocks(m).filter((b) => b.type === "tool_use").map((b) => b.id);
}

function resultIds(m) {
  if (roleOf(m) === "tool") return [m.tool_call_id];
  return blocks(m).filter((b) => b.type === "tool_result").map((b) => b.tool_use_id);
}

function validate(m) {
  if (m === null || typeof m !== "object" || Array.isArray(m)) {
    throw new TypeError(`a message must be an object, not ${Array.isArray(m) ? "an array" : typeof m}`);
  }
  if (!ROLES.has(m.role)) throw new TypeError(`unknown role ${JSON.stringify(m.role)}`);
  if ("parts" in m) throw new TypeError("Gemini and GenAI parts are not taken here: content, please");
  if (Array.isArray(m.content) && !m.content.every((b) => b !== null && typeof b === "object" && "type" in b)) {
    throw new TypeError("every content block needs a type (Bedrock blocks are not taken here)");
  }
  if (m.role === "tool" && !m.tool_call_id) throw new TypeError("a tool message needs tool_call_id");
  for (const call of m.tool_calls ?? []) {
    if (!call || typeof call !== "object" || !call.id) throw new TypeError("every tool call needs an id");
  }
}

/** Correct: stores deep copies; a view is every system message, the newest user message and
 * the newest whole units that fit 90% of the budget, in history order. */
export class GoodManager {
  constructor(config = {}, hooks = null) {
    this.maxTokens = config.max_tokens ?? 4000;
    this.hooks = hooks;
    this.messages = [];
  }

  async addMessage(message) {
    validate(message);
    this.messages.push(structuredClone(message));
  }

  async getMessages() {
    return structuredClone(this.messages);
  }

  async setMessages(messages) {
    messages.forEach(validate);
    this.messages = messages.map((m) => structuredClone(m));
  }

  async clear() {
    this.messages = [];
  }

  async getMessagesForRequest({ tokenBudget, provider } = {}) {
    const history = [...this.messages];
    const kept = this.plan(history, Math.floor(this.budget(tokenBudget, provider) * FILL));
    const view = this.render(history, kept);
    if (kept.length < history.length && this.hooks) {
      await this.hooks.emit("context:pre_compact", { message_count: history.length, token_count: total(history) });
      await this.hooks.emit("context:post_compact", { message_count: view.length, token_count: total(view) });
    }
    return view;
  }

  budget(tokenBudget, provider) {
    if (tokenBudget !== undefined && tokenBudget !== null) return tokenBudget;
    const defaults = provider?.getInfo()?.defaults;
    if (defaults && "context_window" in defaults) {
      return defaults.context_window - (defaults.max_output_tokens ?? 0);
    }
    return this.maxTokens;
  }

  /** [indices, complete] for each unit: a call with its results right after it, or one message. */
  units(history) {
    const units = [];
    let index = 0;
    while (index < history.length) {
      const message = history[index];
      let stop = index + 1;
      let after = history[stop];
      const waiting = new Set(callIds(message));
      if (waiting.size && message.tool_calls) {
        while (roleOf(after) === "tool" && waiting.has(after.tool_call_id)) {
          waiting.delete(after.tool_call_id);
          stop += 1;
          after = history[stop];
        }
      } else if (waiting.size && roleOf(after) === "user") {
        const answered = new Set(resultIds(after));
        if (answered.size === waiting.size && [...waiting].every((id) => answered.has(id))) {
          waiting.clear();
          stop += 1;
        }
      }
      const stray = stop === index + 1 && resultIds(message).length > 0;
      units.push([Array.from({ length: stop - index }, (_, k) => index + k), !waiting.size && !stray]);
      index = stop;
    }
    return units;
  }

  pinned(history, units) {
    const heads = units.map(([ids]) => history[ids[0]]);
    const users = heads.flatMap((m, k) => (roleOf(m) === "user" && !resultIds(m).length ? [k] : []));
    const kept = new Set(heads.flatMap((m, k) => (roleOf(m) === "system" ? [k] : [])));
    if (users.length) kept.add(users[users.length - 1]);
    return kept;
  }

  plan(history, limit) {
    const units = this.units(history);
    const kept = this.pinned(history, units);
    const cost = units.map(([ids]) => ids.reduce((sum, i) => sum + estimate(history[i]), 0));
    let used = [...kept].reduce((sum, k) => sum + cost[k], 0);
    for (let k = units.length - 1; k >= 0; k -= 1) {
      if (kept.has(k) || !units[k][1]) continue;
      if (used + cost[k] > limit) break;
      kept.add(k);
      used += cost[k];
    }
    return [...kept].sort((a, b) => a - b).flatMap((k) => units[k][0]);
  }

  render(history, kept) {
    return kept.map((i) => structuredClone(history[i]));
  }
}

/** Fault (tool_pair_integrity): plans by message, not by unit, so a cut can fall inside a pair. */
export class SplitsPairsOpenAI extends GoodManager {
  units(history) {
    return history.map((_, index) => [[index], true]);
  }
}

/** Fault (non_destructive): a view that drops messages deletes them from the stored history. */
export class DestructiveCompaction extends GoodManager {
  plan(history, limit) {
    const kept = super.plan(history, limit);
    if (kept.length < history.length) this.messages = kept.map((i) => history[i]);
    return kept;
  }
}

/** Fault (ordering): moves the newest user message to the end of the view. */
export class ReordersView extends GoodManager {
  render(history, kept) {
    const view = super.render(history, kept);
    const users = view.flatMap((m, i) => (roleOf(m) === "user" && !resultIds(m).length ? [i] : []));
    if (users.length) view.push(view.splice(users[users.length - 1], 1)[0]);
    return view;
  }
}

/** A factory, not a class: the harness calls it with the config and hooks. */
export default function makeGoodManager(config, hooks) {
  return new GoodManager(config, hooks);
}

/** Calls process.exit while adding: a crash of the target, not of ctxkit. */
export class Exits extends GoodManager {
  async addMessage(message) {
    if (this.messages.length >= 2) process.exit(7);
    return super.addMessage(message);
  }
}

/** Prints JSON-looking noise on stdout: must change nothing. */
export class Noisy extends GoodManager {
  async getMessagesForRequest(request) {
    console.log('{"ok": true, "value": []}');
    return super.getMessagesForRequest(request);
  }
}

/** Lacks clear(): a contract error on reset. */
export class NoClear {
  async addMessage() {}
  async getMessagesForRequest() { return []; }
  async getMessages() { return []; }
  async setMessages() {}
}

export const notAClass = 42;
