// Replay candidates in JavaScript that attack the process that runs them: each keeps every
// message and, at the second view of a conversation, does what `config.how` says: `exit`
// (process.exit(0)) or `loop` (a loop that never ends). Node built-ins only.

export class Hostile {
  constructor(config = {}) {
    this.how = config.how;
    this.messages = [];
    this.views = 0;
  }

  async addMessage(message) {
    this.messages.push(structuredClone(message));
  }

  async getMessages() {
    return structuredClone(this.messages);
  }

  async setMessages(messages) {
    this.messages = structuredClone(messages);
  }

  async clear() {
    this.messages = [];
  }

  async getMessagesForRequest() {
    this.views += 1;
    if (this.views === 2 && this.how === "exit") process.exit(0);
    if (this.views === 2 && this.how === "loop") for (;;);
    return structuredClone(this.messages);
  }
}
