// The Vercel AI SDK's pruneMessages behind the context contract, for `ctxkit conformance
// js:ai:pruneMessages`.
//
// pruneMessages is the SDK's helper for shrinking a conversation before a model call (its docs
// put it in `prepareStep`): it removes reasoning and tool calls with their results from all but
// the newest messages, and then the messages left empty. It takes no budget: it prunes by
// position. Options come from --config (`reasoning`, `toolCalls`, `emptyMessages`), passed as
// written; the defaults, for keys not written, are the SDK docs' example.
//
// Conversion: model-messages.mjs (ModelMessages whose providerOptions.ctxkit name the history
// message, block or tool call each came from; the way back rebuilds each message in its shape).

import { importFromHere } from "./library.mjs";
import { fromAiSdk, toAiSdk } from "./model-messages.mjs";
import { TrimmingStore, libraryOptions } from "./store.mjs";

export { fromAiSdk, toAiSdk };

const ai = await importFromHere("ai", "ai");

// Options reach pruneMessages exactly as written (null included); the SDK docs' example fills
// only the keys not written.
const OPTIONS = ["reasoning", "toolCalls", "emptyMessages"];
const DEFAULTS = { reasoning: "before-last-message", toolCalls: "before-last-2-messages", emptyMessages: "remove" };

export class PruneMessages extends TrimmingStore {
  constructor(config = {}, hooks = null) {
    super(config, hooks);
    this.options = libraryOptions("js:ai:pruneMessages (pruneMessages)", config, OPTIONS, DEFAULTS, {
      messages: "the adapter gives the SDK the stored history on each request",
    });
    // The SDK's own refusal of a value (toolCalls: null is not a list) comes now, while the
    // manager is built, not on every request.
    ai.pruneMessages({ messages: [], ...this.options });
  }

  async view(history) {
    return fromAiSdk(ai.pruneMessages({ messages: toAiSdk(history), ...this.options }), history);
  }
}
