// The Node.js implementation of ctxkit's conformance protocol, version 1 (../../PROTOCOL.md).
//
// Started by `ctxkit conformance path/to/manager.mjs[:Export]` as `node harness.mjs`. It loads
// the target named in `hello`, builds a manager on `reset`, and answers each request on the
// two pipes named by CTXKIT_PROTOCOL_FDS. Only Node's own modules are used (Node 18 or newer).
//
// A target is a class (`new Target(config, hooks)`) or a function (`await target(config,
// hooks)`) that gives an object with the methods addMessage(message),
// getMessagesForRequest({ tokenBudget, provider } = {}), getMessages(), setMessages(messages)
// and clear(); each may return a promise or a value. `hooks.emit(name, data)` records an event.
//
// Or a function over the message list, `(messages, { tokenBudget, ...config }) => view`, sync
// or async (the "function" form): the harness keeps the history and calls it on a copy before
// every request. It is recognised by its first parameter's name (messages, history, ...) or
// named by `form: "function"` in `hello` (`--form function`).

import { createHash } from "node:crypto";
import { closeSync, createReadStream, writeSync } from "node:fs";
import { resolve } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

// The protocol's own references, taken before any target code runs: a target that replaces
// JSON.stringify or process.stdout cannot reach the channel through them.
const stringify = JSON.stringify;
const parse = JSON.parse;
const write = writeSync;
const realExit = process.exit.bind(process);
const VERSION = "1.0.0";
const PROTOCOL = 1;
const METHODS = ["addMessage", "getMessagesForRequest", "getMessages", "setMessages", "clear"];
const EDIT_MARK = "EDITED";

class LoadError extends Error {}
class ContractError extends Error {}
class TargetExit extends Error {
  constructor(code) {
    super(`process.exit(${code ?? ""})`);
    this.name = "TargetExit";
    this.code = code;
  }
}

// -- values ------------------------------------------------------------------------------------

/** What a target returned, as JSON data; never throws (a cycle becomes a string that says so). */
function toJSON(value) {
  try {
    const text = stringify(value, (_key, item) =>
      typeof item === "bigint" ? item.toString() : item,
    );
    return text === undefined ? null : parse(text);
  } catch (error) {
    return `<not JSON-serialisable: ${error?.message ?? error}>`;
  }
}

/** Canonical JSON (PROTOCOL.md): keys sorted by code point, no whitespace. */
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${keys.map((k) => `${stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return stringify(value) ?? "null";
}

function digest(history, ignore) {
  const kept = Array.isArray(history)
    ? history.map((m) =>
        m !== null && typeof m === "object" && !Array.isArray(m)
          ? Object.fromEntries(Object.entries(m).filter(([k]) => !ignore.has(k)))
          : m,
      )
    : history;
  return createHash("sha256").update(canonical(kept), "utf8").digest("hex");
}

/** A careless caller's edit (PROTOCOL.md, edit_after): strings marked, objects and lists grown. */
function editInPlace(value) {
  if (Array.isArray(value)) {
    value.forEach(editInPlace);
    value.push({ role: "user", content: `${EDIT_MARK} BY CALLER` });
  } else if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      if (typeof item === "string") value[key] = `${item} ${EDIT_MARK}`;
      else editInPlace(item);
    }
    value.metadata_edit = true;
  }
}

// -- the target --------------------------------------------------------------------------------

// Adapters for JavaScript libraries, by the short name after `js:` (ctxkit/adapters lists them).
const ADAPTERS = {
  "@langchain/core:trimMessages": ["adapters/langchain-trim-messages.mjs", "TrimMessagesLast"],
  "@langchain/core:trimMessages:first": ["adapters/langchain-trim-messages.mjs", "TrimMessagesFirst"],
  "ai:pruneMessages": ["adapters/ai-sdk-prune-messages.mjs", "PruneMessages"],
  "@mastra/core:TokenLimiter": ["adapters/mastra-token-limiter.mjs", "TokenLimiter"],
};

function splitSpec(spec) {
  if (spec?.startsWith("js:")) {
    const adapter = ADAPTERS[spec.slice(3)];
    if (!adapter) {
      throw new LoadError(`${spec}: no such JavaScript adapter; there are: ${Object.keys(ADAPTERS).map((k) => `js:${k}`).join(", ")}`);
    }
    return { file: new URL(adapter[0], import.meta.url).pathname, name: adapter[1], short: spec };
  }
  const match = /^(.*\.(?:mjs|cjs|js))(?::([A-Za-z_$][\w$.]*))?$/.exec(spec ?? "");
  if (!match) {
    throw new LoadError(
      `${spec}: not a JavaScript target; use path/to/manager.mjs or path/to/manager.mjs:Export`,
    );
  }
  return { file: match[1], name: match[2] ?? "default" };
}

async function loadTarget(spec) {
  const { file, name, short } = splitSpec(spec);
  const path = resolve(process.cwd(), file);
  let module;
  try {
    module = await import(pathToFileURL(path).href);
  } catch (error) {
    if (error?.code === "ERR_MODULE_NOT_FOUND" && String(error.message).includes(path)) {
      throw new LoadError(`${spec}: no such file ${path}`);
    }
    const where = spec?.startsWith("js:") ? "" : `importing ${file} failed: `;
    throw new LoadError(`${spec}: ${where}${error?.name}: ${error?.message}`);
  }
  let found = module;
  for (const part of name.split(".")) found = found?.[part];
  if (found === undefined) {
    const names = Object.keys(module).join(", ") || "nothing";
    throw new LoadError(`${spec}: ${file} has no export ${name}; it exports: ${names}`);
  }
  if (typeof found !== "function") {
    throw new LoadError(`${spec}: ${name} is a ${typeof found}, not a class or a factory function`);
  }
  return { spec: short ?? `${file}:${name}`, make: found, adapter: short !== undefined };
}

/** What `hello` says of the shapes the target speaks: its `ctxkit_shapes` (a class's static
 * field, a function's property: "all", "openai,anthropic" or a list), or nothing. */
function speaks(target) {
  const declared = target.make.ctxkit_shapes;
  if (declared === undefined || declared === null) return {};
  const judged = typeof declared === "string" ? declared.split(",").map((s) => s.trim()) : declared;
  const why = target.adapter
    ? `the ${target.spec} adapter: the shapes its library takes`
    : `${target.make.name || target.spec} declares ctxkit_shapes`;
  return { speaks: { judged, source: target.adapter ? "adapter" : "declared", why } };
}

// -- the function form: a function over the message list --------------------------------------------

const MESSAGE_LIST_NAMES = new Set([
  "messages", "history", "msgs", "messageHistory", "chatHistory", "conversation", "items",
]);

function isClass(fn) {
  return /^class[\s{]/.test(Function.prototype.toString.call(fn));
}

function firstParameter(fn) {
  const source = Function.prototype.toString.call(fn);
  const match =
    /^\s*(?:async\s+)?function\s*\*?\s*[\w$]*\s*\(\s*([\w$]+)/.exec(source) ??
    /^\s*(?:async\s*)?\(?\s*([\w$]+)\s*(?:[,)=]|=>)/.exec(source) ??
    /^\s*(?:async\s+)?[\w$]+\s*\(\s*([\w$]+)/.exec(source); // a method: name(messages)
  return match?.[1];
}

function formOf(target, form) {
  const looks = isClass(target.make) ? `the class ${target.make.name}` : `a function ${target.make.name || "(anonymous)"}(${firstParameter(target.make) ?? ""}...)`;
  const forms = "contract (a class or factory building the manager) and function ((messages, { tokenBudget }) => view)";
  if (form === "session" || (form && form !== "contract" && form !== "function")) {
    throw new LoadError(`${target.spec}: --form ${form}: the Node harness takes the forms ${forms}; a session is a Python form`);
  }
  if (form === "function" && isClass(target.make)) {
    throw new LoadError(`${target.spec}: --form function, but it is ${looks}; the forms are ${forms}`);
  }
  if (form) return form;
  return !isClass(target.make) && MESSAGE_LIST_NAMES.has(firstParameter(target.make)) ? "function" : "contract";
}

function functionManager(fn, config) {
  let history = [];
  const check = (message) => {
    if (message === null || typeof message !== "object" || Array.isArray(message)) {
      throw new TypeError(`a message must be an object, not ${Array.isArray(message) ? "an array" : typeof message}`);
    }
  };
  return {
    addMessage(message) {
      check(message);
      history.push(structuredClone(message));
    },
    async getMessagesForRequest({ tokenBudget, provider } = {}) {
      let budget = tokenBudget;
      if ((budget === undefined || budget === null) && provider) {
        const defaults = (await provider.getInfo())?.defaults ?? {};
        if (defaults.context_window != null) {
          budget = defaults.context_window - (defaults.max_output_tokens ?? 0) - (defaults.safety_margin ?? 0);
        }
      }
      const options = { ...config };
      if (budget !== undefined && budget !== null) options.tokenBudget = budget;
      const view = await fn(structuredClone(history), options);
      if (!Array.isArray(view)) {
        throw new TypeError(`${fn.name || "the function"} returned ${view === null ? "null" : typeof view}, not an array: a history function returns the view, the messages to send`);
      }
      return view;
    },
    getMessages() {
      return structuredClone(history);
    },
    setMessages(messages) {
      messages.forEach(check);
      history = structuredClone(messages);
    },
    clear() {
      history = [];
    },
  };
}

async function build(target, config, hooks) {
  if (target.form === "function") return functionManager(target.make, config);
  const manager = isClass(target.make) ? new target.make(config, hooks) : await target.make(config, hooks);
  const missing = METHODS.filter((m) => typeof manager?.[m] !== "function");
  if (missing.length) {
    const what = manager === null || typeof manager !== "object" ? String(manager) : "the manager";
    throw new ContractError(
      `${what} lacks ${missing.join(", ")}; the context contract needs the methods ${METHODS.join(", ")}`,
    );
  }
  return manager;
}

// -- the worker ----------------------------------------------------------------------------------

class Worker {
  constructor() {
    this.target = null;
    this.manager = null;
    this.events = [];
    this.config = {};
    this.ignore = new Set();
    this.before = undefined;
  }

  hooks() {
    const events = this.events;
    return {
      emit: async (name, data) => {
        events.push({ name: String(name), data: toJSON(data ?? null) });
      },
    };
  }

  async hello({ protocol, target, config, ignore, form, digests }) {
    if (protocol !== PROTOCOL) {
      const error = new Error(`this harness speaks protocol ${PROTOCOL}, not ${protocol}`);
      error.name = "ProtocolVersion";
      error.protocol = true;
      throw error;
    }
    this.target = await loadTarget(target);
    this.target.form = formOf(this.target, form);
    this.config = config ?? {};
    this.ignore = new Set(ignore ?? []);
    this.digests = digests !== false;
    return {
      protocol: PROTOCOL,
      implementation: { name: "ctxkit-node-harness", version: VERSION, language: "javascript" },
      target: this.target.spec,
      events: true,
      form: this.target.form,
      ...speaks(this.target),
    };
  }

  async reset() {
    await this.close();
    this.events.length = 0;
    this.manager = await build(this.target, structuredClone(this.config), this.hooks());
    return null;
  }

  async close() {
    const manager = this.manager;
    this.manager = null;
    try {
      if (typeof manager?.close === "function") await manager.close();
    } catch {
      // closing is no part of the contract
    }
  }

  async edited(value, editAfter) {
    if (!editAfter) return;
    this.before = toJSON(await this.manager.getMessages());
    editInPlace(value);
  }

  async add({ message, edit_after }) {
    await this.manager.addMessage(message);
    await this.edited(message, edit_after);
    return null;
  }

  // One model call of a recorded conversation: the messages added in order, then the view.
  async turn({ messages, token_budget, provider }) {
    this.calling = "add_message";
    for (const message of messages) await this.manager.addMessage(message);
    this.calling = "get_messages_for_request";
    return this.view({ token_budget, provider, edit_after: false });
  }

  async add_many({ messages }) {
    // Every add at once; when some raise, one error that counts what raised and what returned
    // (the Python worker's ConcurrentAddsFailed), not the first error alone.
    const outcomes = await Promise.allSettled(messages.map((m) => this.manager.addMessage(m)));
    const raised = outcomes.filter((o) => o.status === "rejected").map((o) => o.reason);
    if (raised.length) {
      const said = new Map();
      for (const error of raised) {
        const type = error instanceof Error ? error.name || "Error" : typeof error;
        const line = String(error instanceof Error ? error.message : error).split("\n")[0].trim();
        const kind = line ? `${type}: ${line}` : type;
        said.set(kind, (said.get(kind) ?? 0) + 1);
      }
      const what = [...said].map(([kind, count]) => `${count} raised ${kind}`).join("; ");
      const error = new Error(
        `${outcomes.length} concurrent add_message calls: ${what}; ${outcomes.length - raised.length} returned`,
      );
      error.name = "ConcurrentAddsFailed";
      throw error;
    }
    return null;
  }

  async view({ token_budget, provider, edit_after }) {
    const request = {};
    if (provider) request.provider = { getInfo: () => ({ defaults: { ...provider } }) };
    if (token_budget !== null && token_budget !== undefined) request.tokenBudget = token_budget;
    const view = await this.manager.getMessagesForRequest(request);
    const snapshot = toJSON(view);
    await this.edited(view, edit_after);
    return snapshot;
  }

  async get({ edit_after }) {
    const history = await this.manager.getMessages();
    const snapshot = toJSON(history);
    await this.edited(history, edit_after);
    return snapshot;
  }

  async set({ messages, edit_after }) {
    await this.manager.setMessages(messages);
    await this.edited(messages, edit_after);
    return null;
  }

  async clear() {
    await this.manager.clear();
    return null;
  }

  async state() {
    const answer = { events: this.events.splice(0) };
    if (this.digests) {
      try {
        answer.digest = digest(toJSON(await this.manager.getMessages()), this.ignore);
      } catch {
        // no digest: the runner asks with get and sees what getMessages() does
      }
    }
    if (this.before !== undefined) answer.before = this.before;
    this.before = undefined;
    return answer;
  }

  async respond(op, args) {
    this.before = undefined;
    try {
      if (op !== "hello" && op !== "reset" && !this.manager) {
        throw Object.assign(new Error(`${op} before reset: no manager is built`), { protocol: true });
      }
      if (!["hello", "reset", "add", "add_many", "view", "get", "set", "clear", "turn"].includes(op)) {
        throw Object.assign(new Error(`unknown op ${stringify(op)}`), { protocol: true });
      }
      const value = await this[op](args ?? {});
      const answer = { ok: true, value };
      if (op !== "hello" && this.manager) Object.assign(answer, await this.state());
      return answer;
    } catch (error) {
      const answer = failure(error);
      if (op === "turn") answer.error.during = this.calling;
      if (answer.kind === "raised" && this.manager) {
        try {
          Object.assign(answer, await this.state());
        } catch (inner) {
          return failure(inner);
        }
      }
      return answer;
    }
  }
}

function failure(error) {
  let kind = "raised";
  if (error instanceof TargetExit) kind = "exit";
  else if (error instanceof LoadError) kind = "load";
  else if (error instanceof ContractError) kind = "contract";
  else if (error?.protocol) kind = "protocol";
  else if (error instanceof RangeError && /allocation|heap|memory/i.test(error.message)) kind = "memory";
  const type =
    error instanceof Error || (error && typeof error === "object" && "name" in error)
      ? String(error.name || "Error")
      : typeof error;
  const message = String(error instanceof Error ? error.message : toJSON(error)).slice(0, 2000);
  const traceback = typeof error?.stack === "string" ? error.stack.slice(-6000) : "";
  return { ok: false, kind, error: { type, message, traceback } };
}

// -- the channel ---------------------------------------------------------------------------------

async function serve() {
  const fds = (process.env.CTXKIT_PROTOCOL_FDS ?? "").split(",").map(Number);
  if (fds.length !== 2 || fds.some((fd) => !Number.isInteger(fd))) {
    process.stderr.write(
      "ctxkit node harness: CTXKIT_PROTOCOL_FDS must name two descriptors as 'REQUESTS,ANSWERS'; " +
        "this program is started by `ctxkit conformance`, not by hand\n",
    );
    realExit(2);
  }
  const [requests, answers] = fds;
  process.exit = (code) => {
    throw new TargetExit(code);
  };
  const worker = new Worker();
  const lines = createInterface({ input: createReadStream(null, { fd: requests }), crlfDelay: Infinity });
  let prefix = null;
  const send = (answer) => {
    let text;
    try {
      text = stringify(answer);
    } catch (error) {
      text = stringify({ ok: false, kind: "raised", error: { type: "UnserialisableAnswer", message: String(error) } });
    }
    write(answers, `${prefix}${text}\n`);
  };
  for await (const line of lines) {
    if (prefix === null) {
      let request;
      try {
        request = parse(line);
      } catch {
        process.stderr.write("ctxkit node harness: the first request is not JSON\n");
        realExit(70);
      }
      prefix = `${request?.args?.token} `;
      send(await worker.respond(request.op, request.args));
      continue;
    }
    if (!line.startsWith(prefix)) {
      const ours = line.indexOf(prefix);
      const shown = stringify(line.slice(0, ours > 0 ? ours : 60).slice(0, 60));
      send({ ok: false, kind: "protocol", error: { type: "Garbage", message: shown } });
      continue;
    }
    let request;
    try {
      request = parse(line.slice(prefix.length));
    } catch {
      send({ ok: false, kind: "protocol", error: { type: "Garbage", message: stringify(line.slice(0, 60)) } });
      continue;
    }
    const answer = await worker.respond(request.op, request.args);
    send(answer);
    if (answer.kind === "exit" || answer.kind === "memory") realExit(3);
  }
  await worker.close(); // the runner closed its end: let the manager release what it holds
  closeSync(answers);
  realExit(0);
}

process.on("uncaughtException", (error) => {
  process.stderr.write(`ctxkit node harness: the target threw outside a call: ${error?.stack ?? error}\n`);
  realExit(1);
});
process.on("unhandledRejection", () => {
  // a promise the target left rejected outside any call: not a verdict of this harness
});

await serve();
