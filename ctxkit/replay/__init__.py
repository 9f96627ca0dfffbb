"""``ctxkit replay``: run recorded traffic through candidate context managers and compare what
each would have sent, broken, cost and lost.

The recording is read as ``ctxkit audit`` reads it (:mod:`ctxkit.audit.files`), keyed into
conversations the same way, and each conversation is rebuilt (:mod:`.conversation`): the
messages the agent added, in order, and the point of every model call. Each manager then gets
a fresh instance per conversation, the messages as the agent added them, and a view asked for
at every call under the budget the request had (:mod:`.run`); ``recorded`` is what the agent
really sent, measured by the same code. :mod:`.references` defines *references kept*.
"""
