"""A stand-in for a provider's HTTP API on 127.0.0.1 (a free port, a thread), for the pages and
commands that show a real model: Chat Completions (``/v1/chat/completions``), Responses
(``/v1/responses``) and Messages (``/v1/messages``) answer every streamed request with one
short text, in the API's SSE shapes. Point the SDKs at it with ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ANSWER", "serving"]

ANSWER = "Hello from the stand-in provider."


def _chat() -> list[dict[str, Any]]:
    base = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "stand-in",
    }
    return [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ANSWER}}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {
            **base,
            "choices": [],
            "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16},
        },
    ]


def _messages() -> list[tuple[str, dict[str, Any]]]:
    usage = {"input_tokens": 9, "output_tokens": 1}
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "stand-in",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return [
        ("message_start", {"type": "message_start", "message": message}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": ANSWER},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 7},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def _responses() -> list[tuple[str, dict[str, Any]]]:
    item = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    text = {"type": "output_text", "text": ANSWER, "annotations": []}
    done = {**item, "status": "completed", "content": [text]}
    usage = {
        "input_tokens": 9,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 7,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 16,
    }
    response = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "stand-in",
        "output": [done],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.output_item.added", {"output_index": 0, "item": item}),
        (
            "response.output_text.delta",
            {
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": ANSWER,
                "logprobs": [],
            },
        ),
        ("response.output_item.done", {"output_index": 0, "item": done}),
        ("response.completed", {"response": response}),
    ]
    return [
        (name, {"type": name, "sequence_number": n, **data})
        for n, (name, data) in enumerate(events)
    ]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        if self.path.endswith("/chat/completions"):
            body = "".join(f"data: {json.dumps(c)}\n\n" for c in _chat()) + "data: [DONE]\n\n"
        elif self.path.endswith("/responses"):
            body = "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in _responses())
        elif self.path.endswith("/messages"):
            body = "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in _messages())
        else:
            self.send_error(404)
            return
        data = body.encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        return None


@contextmanager
def serving() -> Iterator[dict[str, str]]:
    """Serve until the block ends; yield the environment that points the SDKs at it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield {
            "OPENAI_BASE_URL": f"{url}/v1",
            "OPENAI_API_KEY": "sk-stand-in",
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": "sk-ant-stand-in",
        }
    finally:
        server.shutdown()
        server.server_close()
