"""Reads JSON histories, one a line, and writes each after a round trip through autogen-core's
messages (the adapter's conversion). Runs in the AutoGen environment (.venvs/autogen):
tests/test_adapters_autogen.py compares what comes back."""

import json
import sys

from ctxkit.adapters.autogen import from_autogen, to_autogen

for line in sys.stdin:
    history = json.loads(line)
    messages, origins = to_autogen(history)
    print(json.dumps(from_autogen(messages, origins, history)), flush=True)
