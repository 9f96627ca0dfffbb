"""``ctxkit watch --otlp-grpc``: OTLP over gRPC, what the Collector's ``otlp`` exporter and
most SDKs' gRPC exporters send (port 4317 by convention), beside OTLP/HTTP.

Like the HTTP side it only decodes and queues: an export is answered at once, and when the
queue is full the answer is ``UNAVAILABLE``, a status OTLP exporters retry. gRPC itself
refuses a message past :data:`~ctxkit.audit.receiver.MAX_BODY_BYTES` and one that does not
decode. Needs ``grpcio`` (``pip install 'ctxkit-llm[grpc]'``).
"""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from ctxkit.audit.otlp import Record, Sink, collector_line, decode_logs, decode_traces

__all__ = ["OtlpGrpcReceiver"]

QUEUE_FULL = "the audit queue is full; retry"


class OtlpGrpcReceiver:
    """OTLP/gRPC on ``host:port`` (port 0: any free port); decoded exports go to ``sink``,
    which returns False when it cannot take more (the sender is told to retry)."""

    def __init__(
        self,
        sink: Sink,
        *,
        host: str = "127.0.0.1",
        port: int = 4317,
        max_message_bytes: int,
    ) -> None:
        self.sink = sink
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="otlp-grpc"),
            # gRPC shares a port with any other process that asks by default (SO_REUSEPORT):
            # a second watch would take half the exports silently instead of failing to start.
            options=[
                ("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.so_reuseport", 0),
            ],
        )
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Traces(self), self.server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_Logs(self), self.server)
        try:
            self.port = self.server.add_insecure_port(f"{host}:{port}")
        except RuntimeError:  # grpcio 1.5x and later raise where older ones returned 0
            self.port = 0
        if self.port == 0:
            raise OSError(
                f"cannot receive OTLP/gRPC on {host}:{port}: in use, or no such address here"
            )

    def start(self) -> OtlpGrpcReceiver:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop(grace=2).wait(5)

    def take(self, request: Any, records: list[Record], signal: str, context: Any) -> None:
        if not self.sink(records, f"otlp/grpc {signal}", lambda: collector_line(request)):
            context.abort(grpc.StatusCode.UNAVAILABLE, QUEUE_FULL)


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpGrpcReceiver) -> None:
        self.receiver = receiver

    def Export(self, request: Any, context: Any) -> Any:
        self.receiver.take(request, list(decode_traces(request)), "traces", context)
        return trace_service_pb2.ExportTraceServiceResponse()


class _Logs(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, receiver: OtlpGrpcReceiver) -> None:
        self.receiver = receiver

    def Export(self, request: Any, context: Any) -> Any:
        self.receiver.take(request, list(decode_logs(request)), "logs", context)
        return logs_service_pb2.ExportLogsServiceResponse()
