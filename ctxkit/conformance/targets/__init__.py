"""Reaching the context manager under test, wherever and in whatever language it lives.

- ``load``: finding and building the manager from one TARGET string.
- ``coordinator``: the Amplifier coordinator a mounted target sees.
- ``protocol``: the wire protocol's constants (``conformance/PROTOCOL.md`` is the spec).
- ``worker_client``: the parent's side of the worker process: send an operation, wait.
- ``sandbox``: run a command contained: whatever it starts ends with it.
- ``routes``: which program speaks the protocol for a target (Python, ``--command``, Node, gRPC).
- ``remote``: a manager held by another process, called through the protocol.
- ``grpc_target``, ``grpc_messages``: amplifier-core's gRPC ``ContextService`` as a target.
"""
