"""A context module served over gRPC (amplifier-core's ``ContextService``), as a Python
target: ``ctxkit conformance grpc://HOST:PORT``.

Each call is one RPC; messages cross as :mod:`ctxkit.conformance.targets.grpc_messages` says. The
service has no call that makes a fresh instance, so building a manager connects and calls
``Clear``: the module is checked as one long-lived instance, emptied between examples. The
proto carries no provider: a request through a provider's defaults becomes a token budget
(``context_window - max_output_tokens``), and ``provider_name`` is ``"ctxkit-conformance"``.
The proto has no events either, so ``events`` is not observed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ctxkit.conformance.targets.grpc_messages import Crossing

__all__ = ["CONNECT_TIMEOUT_S", "GrpcContextManager", "RpcError", "address_of"]

CONNECT_TIMEOUT_S = 5.0


class RpcError(Exception):
    """The service answered a call with an error status: what the module raised."""


def address_of(spec: str) -> str:
    """``HOST:PORT`` of a ``grpc://HOST:PORT`` target. Raises ValueError with a sentence."""
    address = spec.removeprefix("grpc://").rstrip("/")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{spec!r} is not grpc://HOST:PORT (e.g. grpc://127.0.0.1:50051)")
    return address


class GrpcContextManager:
    """The context contract over a ``ContextService`` at ``address``."""

    def __init__(self, address: str, **_config: Any) -> None:
        import grpc
        from amplifier_core._grpc_gen import amplifier_module_pb2_grpc

        self._grpc = grpc
        self._channel = grpc.insecure_channel(address)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=CONNECT_TIMEOUT_S)
        except grpc.FutureTimeoutError:
            self._channel.close()
            raise ConnectionError(
                f"no gRPC service answers at {address} (waited {CONNECT_TIMEOUT_S:g} s)"
            ) from None
        self._stub = amplifier_module_pb2_grpc.ContextServiceStub(self._channel)
        self._crossing = Crossing()
        self._rpc("Clear", self._empty())

    def _empty(self) -> Any:
        from amplifier_core._grpc_gen import amplifier_module_pb2

        return amplifier_module_pb2.Empty()

    def _rpc(self, name: str, request: Any) -> Any:
        try:
            return getattr(self._stub, name)(request)
        except self._grpc.RpcError as exc:
            code = exc.code().name if exc.code() else "UNKNOWN"
            if code == "UNAVAILABLE":
                raise ConnectionError(
                    f"the service went away during {name}: {exc.details()}"
                ) from None
            raise RpcError(f"{name} returned {code}: {exc.details()}") from None

    async def _call(self, name: str, request: Any) -> Any:
        return await asyncio.to_thread(self._rpc, name, request)

    async def add_message(self, message: dict[str, Any]) -> None:
        from amplifier_core._grpc_gen import amplifier_module_pb2 as pb

        await self._call(
            "AddMessage", pb.AddMessageRequest(message=self._crossing.to_proto(message))
        )

    async def get_messages(self) -> list[dict[str, Any]]:
        answer = await self._call("GetMessages", self._empty())
        return [self._crossing.from_proto(m) for m in answer.messages]

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict[str, Any]]:
        from amplifier_core._grpc_gen import amplifier_module_pb2 as pb

        params = pb.GetMessagesForRequestParams(provider_name="ctxkit-conformance")
        defaults = getattr(provider.get_info(), "defaults", None) if provider else None
        if isinstance(defaults, dict) and "context_window" in defaults:
            token_budget = defaults["context_window"] - defaults.get("max_output_tokens", 0)
        if token_budget is not None:
            params.token_budget = token_budget
        answer = await self._call("GetMessagesForRequest", params)
        return [self._crossing.from_proto(m) for m in answer.messages]

    async def set_messages(self, messages: Sequence[dict[str, Any]]) -> None:
        from amplifier_core._grpc_gen import amplifier_module_pb2 as pb

        converted = [self._crossing.to_proto(m) for m in messages]
        await self._call("SetMessages", pb.SetMessagesRequest(messages=converted))

    async def clear(self) -> None:
        await self._call("Clear", self._empty())

    def close(self) -> None:
        self._channel.close()
