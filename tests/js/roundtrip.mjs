// Reads JSON histories, one a line, and writes each after a round trip through LangChain.js
// messages (the adapter's own conversion): tests/test_node_adapters.py compares them.
import { createInterface } from "node:readline";
import { fromLangChain, toLangChain } from "../../conformance/harnesses/node/adapters/langchain-trim-messages.mjs";

for await (const line of createInterface({ input: process.stdin })) {
  const history = JSON.parse(line);
  process.stdout.write(`${JSON.stringify(fromLangChain(toLangChain(history), history))}\n`);
}
