// Reads JSON histories, one a line, and writes each after a round trip through a JavaScript
// library's messages (an adapter's own conversion, named by the first argument: `langchain`,
// `ai` or `mastra`): tests/test_node_adapters.py compares them.
import { createInterface } from "node:readline";

const ADAPTERS = {
  langchain: ["langchain-trim-messages.mjs", "toLangChain", "fromLangChain"],
  ai: ["ai-sdk-prune-messages.mjs", "toAiSdk", "fromAiSdk"],
  mastra: ["mastra-token-limiter.mjs", "toPrompt", "fromPrompt"],
};
const [file, to, from] = ADAPTERS[process.argv[2]];
const adapter = await import(`../../conformance/harnesses/node/adapters/${file}`);

for await (const line of createInterface({ input: process.stdin })) {
  const history = JSON.parse(line);
  process.stdout.write(`${JSON.stringify(adapter[from](adapter[to](history), history))}\n`);
}
