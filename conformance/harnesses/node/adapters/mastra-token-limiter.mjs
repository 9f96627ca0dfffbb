// Mastra's TokenLimiter (`@mastra/core/processors`, an alias of TokenLimiterProcessor) behind
// the context contract, for `ctxkit conformance js:@mastra/core:TokenLimiter`.
//
// In a Mastra agent the limiter trims at the request stage: processLLMRequest({ prompt }) gets
// the provider prompt, system messages first, just before the model call, and returns the
// trimmed prompt (or nothing when all of it fits); it throws a TripWire when not even one
// message fits. The view here is exactly that answer for a limiter built with `limit` set to
// the request's budget: the history becomes the prompt (model-messages.mjs, each user message's
// text as a part, as prompts carry it), and the messages the limiter kept come back from the
// history in their own shape, repairing nothing.
//
// Every other TokenLimiterOptions key comes from --config and reaches the constructor as
// written (null included). With trimMode "memory-only" the limiter leaves the request alone
// (that mode trims a Memory's stored messages before this stage, which an adapter without a
// Memory does not have): the view is then the whole history.

import { importFromHere } from "./library.mjs";
import { fromAiSdk, toAiSdk } from "./model-messages.mjs";
import { TrimmingStore, libraryOptions } from "./store.mjs";

const mastra = await importFromHere("@mastra/core/processors", "@mastra/core");

const OPTIONS = ["encoding", "strategy", "countMode", "trimMode", "atMaxRemoveTokens", "tokenCounter", "onMemoryTrim"];
const SET_BY_ADAPTER = { limit: "it is each request's budget (a request without one uses max_tokens)" };

/** The provider prompt for a history: ModelMessages, each user text as a part. */
export function toPrompt(history) {
  return toAiSdk(history).map((message) =>
    message.role === "user" && typeof message.content === "string"
      ? { ...message, content: [{ type: "text", text: message.content, providerOptions: { ctxkit: { whole: true } } }] }
      : message,
  );
}

/** The history messages, in their own shape, that a prompt made by toPrompt came from. */
export function fromPrompt(prompt, history) {
  return fromAiSdk(prompt, history);
}

export class TokenLimiter extends TrimmingStore {
  constructor(config = {}, hooks = null) {
    super(config, hooks);
    this.options = libraryOptions("js:@mastra/core:TokenLimiter (TokenLimiter)", config, OPTIONS, {}, SET_BY_ADAPTER);
    // Mastra's own refusal of a value (a memory-only atMaxRemoveTokens over the limit) comes
    // now, while the manager is built.
    new mastra.TokenLimiter({ limit: this.maxTokens, ...this.options });
  }

  async view(history, budget) {
    const limiter = new mastra.TokenLimiter({ limit: budget, ...this.options });
    const prompt = toPrompt(history);
    const answer = await limiter.processLLMRequest({ prompt });
    return fromPrompt(answer?.prompt ?? prompt, history);
  }
}
