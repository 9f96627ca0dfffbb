"""Auditing what agents really send: recorded model requests, checked for the breakages the
conformance suite knows, with no change to the agent.

A map, in the order data flows:

* reading — :mod:`~ctxkit.audit.otlp` (OTLP/JSON lines and OTLP/HTTP bodies into records),
  :mod:`~ctxkit.audit.genai` (records into requests, for each GenAI recording form),
  :mod:`~ctxkit.audit.bodies` (raw request bodies into requests), :mod:`~ctxkit.audit.files`
  (files of either form); all yield :class:`~ctxkit.audit.request.Request`;
* judging — :mod:`~ctxkit.audit.auditor` (requests into conversations, in time order) and
  :mod:`~ctxkit.audit.checks` (each request, and each against the one before it);
  :mod:`~ctxkit.audit.windows` (models' context windows);
* reporting — :mod:`~ctxkit.audit.report` (text, JSON, JUnit, HTML), each conversation made
  once when it ends (:mod:`~ctxkit.audit.finished`, kept on disk);
  :mod:`~ctxkit.audit.in_flight` (an audit of files in two readings, holding the
  conversations in flight);
* live — :mod:`~ctxkit.audit.receiver` (``ctxkit watch``: an OTLP/HTTP receiver).
"""

from ctxkit.audit.auditor import Auditor
from ctxkit.audit.checks import Compaction, ConversationAudit, Finding
from ctxkit.audit.request import Problem, Request, Usage

__all__ = [
    "Auditor",
    "Compaction",
    "ConversationAudit",
    "Finding",
    "Problem",
    "Request",
    "Usage",
]
