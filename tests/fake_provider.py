"""A loopback stand-in for the OpenAI, Anthropic, Gemini and Bedrock Converse HTTP APIs, so the
real ``openai``, ``anthropic``, ``google-genai`` and ``boto3`` clients (and the instrumentations
that wrap them) make real requests with no network. Each answer is a short text reply with
provider-style usage; every request body is kept in ``requests`` for the test to compare with what
the traces recorded."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _usage_tokens(body: dict[str, Any]) -> int:
    """A stand-in for the provider's count: the request's bytes over four."""
    return max(1, len(json.dumps(body)) // 4)


def _chat_completion(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body.get("model", "gpt-4o-mini"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ok"},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": _usage_tokens(body),
            "completion_tokens": 1,
            "total_tokens": _usage_tokens(body) + 1,
        },
    }


def _response(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": 1_700_000_000,
        "model": body.get("model", "gpt-4o-mini"),
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "msg_fake",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": _usage_tokens(body),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 1,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": _usage_tokens(body) + 1,
        },
    }


def _anthropic_message(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-sonnet-4-5"),
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": _usage_tokens(body), "output_tokens": 1},
    }


def _gemini_content(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "ok"}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": _usage_tokens(body),
            "candidatesTokenCount": 1,
            "totalTokenCount": _usage_tokens(body) + 1,
        },
        "modelVersion": "gemini-2.0-flash",
    }


def _bedrock_converse(body: dict[str, Any]) -> dict[str, Any]:
    """Bedrock's Converse answer: no id and no model in it (the model is in the path)."""
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
        "stopReason": "end_turn",
        "usage": {
            "inputTokens": _usage_tokens(body),
            "outputTokens": 1,
            "totalTokens": _usage_tokens(body) + 1,
        },
        "metrics": {"latencyMs": 1},
    }


ROUTES = {
    "/v1/chat/completions": _chat_completion,
    "/v1/responses": _response,
    "/v1/messages": _anthropic_message,
}


class FakeProvider:
    """``with FakeProvider() as fake:`` then ``base_url=fake.url`` (``/v1`` included)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                path = self.path.split("?")[0]
                answer = ROUTES.get(path)
                if path.endswith(":generateContent"):  # /v1beta/models/{model}:generateContent
                    answer = _gemini_content
                if path.startswith("/model/") and path.endswith("/converse"):
                    answer = _bedrock_converse  # /model/{modelId}/converse, no /v1
                if answer is None:
                    self.send_error(404)
                    return
                provider.requests.append((self.path, body))
                data = json.dumps(answer(body)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeProvider:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
