// The function form in JavaScript: `(messages, { tokenBudget }) => view`, the history kept by
// ctxkit's Node harness. Node built-ins only, nothing of ctxkit.

/** Correct: every message, whatever the budget (it passes every required property). */
export async function keepAll(messages, { tokenBudget } = {}) {
  return messages;
}

/** Broken: the newest 5 messages, whatever they split (tool_pair_integrity). */
export const lastFive = (messages) => messages.slice(-5);

/** Correct because the harness passes a copy: it empties the list it is given. */
export function emptiesItsArgument(history) {
  history.splice(0, history.length);
  return history;
}

/** Records the options it was called with, as its only message. */
export function echoOptions(messages, options) {
  return [{ role: "user", content: JSON.stringify(options ?? null) }];
}

/** Not an array: a clear error. */
export function returnsCount(messages) {
  return messages.length;
}

/** A factory whose first parameter is config: the contract form, as before. */
export function makeKeepAll(config, hooks) {
  let stored = [];
  return {
    addMessage: (m) => { stored.push(structuredClone(m)); },
    getMessagesForRequest: () => structuredClone(stored),
    getMessages: () => structuredClone(stored),
    setMessages: (ms) => { stored = structuredClone(ms); },
    clear: () => { stored = []; },
  };
}
