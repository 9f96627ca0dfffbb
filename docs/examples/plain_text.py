# plain_text.py: keeps everything, a content of one text part as its string (as llama-index's
# Memory does): providers read both the same, so the suite passes it and says where
import copy


def _stored(message):
    message = copy.deepcopy(message)
    content = message.get("content")
    if isinstance(content, list) and len(content) == 1 and content[0].get("type") == "text":
        message["content"] = content[0]["text"]
    return message


class PlainText:
    def __init__(self, **config):
        self.messages = []

    async def add_message(self, message):
        self.messages.append(_stored(message))

    async def get_messages_for_request(self, token_budget=None, provider=None):
        return copy.deepcopy(self.messages)

    async def get_messages(self):
        return copy.deepcopy(self.messages)

    async def set_messages(self, messages):
        self.messages = [_stored(m) for m in messages]

    async def clear(self):
        self.messages = []
