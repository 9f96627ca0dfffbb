"""Context modules served over gRPC for the tests: amplifier-core's ContextService on
127.0.0.1, in a thread of the test process. ``keep_all`` is correct (a view is the whole
history, which the tests keep small); ``newest`` keeps the newest messages by count, so its
cut can fall inside a tool call and its results."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import grpc
from amplifier_core._grpc_gen import amplifier_module_pb2 as pb
from amplifier_core._grpc_gen import amplifier_module_pb2_grpc as rpc


class ContextModule(rpc.ContextServiceServicer):
    def __init__(self, keep: str) -> None:
        self.keep = keep
        self.messages: list[Any] = []

    def AddMessage(self, request: Any, context: Any) -> Any:
        copy = pb.Message()
        copy.CopyFrom(request.message)
        self.messages.append(copy)
        return pb.Empty()

    def GetMessages(self, request: Any, context: Any) -> Any:
        return pb.GetMessagesResponse(messages=self.messages)

    def GetMessagesForRequest(self, request: Any, context: Any) -> Any:
        view = self.messages
        if self.keep == "newest" and request.token_budget:
            view = self.messages[-max(1, request.token_budget // 60) :]
        return pb.GetMessagesResponse(messages=view)

    def SetMessages(self, request: Any, context: Any) -> Any:
        self.messages = list(request.messages)
        return pb.Empty()

    def Clear(self, request: Any, context: Any) -> Any:
        self.messages = []
        return pb.Empty()


@contextmanager
def served(keep: str) -> Iterator[str]:
    """``grpc://127.0.0.1:PORT`` of a module served until the block ends."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    rpc.add_ContextServiceServicer_to_server(ContextModule(keep), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"grpc://127.0.0.1:{port}"
    finally:
        server.stop(grace=None).wait(5)
