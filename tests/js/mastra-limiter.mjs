// Reads requests, one JSON line each ({ config, history, budget }), builds the Mastra adapter
// (js:@mastra/core:TokenLimiter) with the config, views the history at the budget, and writes
// what came of it: { view, limiter } or { refused } (the build threw) or { raised } (the view
// did). `limiter` is what the TokenLimiter that made the view holds, read from the instance, so
// tests/test_adapters_mastra.py can see each option reach Mastra as written.
import { createInterface } from "node:readline";
import { importFromHere } from "../../conformance/harnesses/node/adapters/library.mjs";
import { TokenLimiter } from "../../conformance/harnesses/node/adapters/mastra-token-limiter.mjs";

// The build the adapter loads (resolved as it resolves it), not a second copy of the class.
const { TokenLimiterProcessor } = await importFromHere("@mastra/core/processors", "@mastra/core");

let seen = null;
const processLLMRequest = TokenLimiterProcessor.prototype.processLLMRequest;
TokenLimiterProcessor.prototype.processLLMRequest = function (args) {
  const { maxTokens, strategy, countMode, trimMode, atMaxRemoveTokens, tokenCounter, onMemoryTrim } = this;
  seen = { limit: maxTokens, strategy, countMode, trimMode, atMaxRemoveTokens, tokenCounter, onMemoryTrim };
  for (const [key, value] of Object.entries(seen)) if (value === undefined) seen[key] = "<undefined>";
  return processLLMRequest.call(this, args);
};

async function answer({ config, history, budget }) {
  let manager;
  try {
    manager = new TokenLimiter(config);
  } catch (error) {
    return { refused: `${error.name}: ${error.message}` };
  }
  await manager.setMessages(history);
  seen = null;
  try {
    return { view: await manager.getMessagesForRequest({ tokenBudget: budget }), limiter: seen };
  } catch (error) {
    return { raised: `${error.constructor.name}: ${error.message}`, limiter: seen };
  }
}

for await (const line of createInterface({ input: process.stdin })) {
  process.stdout.write(`${JSON.stringify(await answer(JSON.parse(line)))}\n`);
}
