"""The ctxkit conformance suite: properties any context manager should hold.

Four jobs, one sub-package each; imports run one way, from the bottom of this list up
(``tests/test_imports.py`` checks it):

- ``judge/``: what must hold, as pure functions and data: the property catalogue, the
  invariants over (history, view, events), which history message a view message comes from,
  the checks a run makes after each step with ``--allow`` in force, the steps as data. It
  imports nothing heavy, so production code (``instrument()``, ``ctxkit audit``) uses it.
- ``targets/``: reaching the manager under test: building it from a TARGET string, the
  Amplifier coordinator it is mounted with, the wire protocol, the worker process seen from
  the parent, the sandbox that contains it, routes to other languages and gRPC.
- ``search/``: the Hypothesis search that drives a target and judges every step: generated
  conversations, the state machine, cache stability, minimizing a failure.
- ``reports/``: what a run shows: text, JSON and JUnit formats, reproducer scripts and their
  verification.

At the top, the entry points a user names: ``runner`` (one run, a status per property),
``plugin`` and ``suite`` (pytest), ``worker`` (``python -m ctxkit.conformance.worker``, the
Python side of the protocol) and ``replay`` (the API every reproducer imports).
"""
