# keepall.py: keeps and returns everything
import copy


class KeepAll:
    def __init__(self, **config):
        self.messages = []

    async def add_message(self, message):
        self.messages.append(copy.deepcopy(message))

    async def get_messages_for_request(self, token_budget=None, provider=None):
        return copy.deepcopy(self.messages)

    async def get_messages(self):
        return copy.deepcopy(self.messages)

    async def set_messages(self, messages):
        self.messages = copy.deepcopy(list(messages))

    async def clear(self):
        self.messages = []
