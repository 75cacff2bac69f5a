"""A stand-in for the providers' HTTP APIs on 127.0.0.1, to try the model adapters with no
network and no key: ``python -m agent_session.providers.standin [--port N] [--call TOOL
[--arguments JSON]]`` prints the environment that points the SDKs at it, then serves until
Ctrl-C; :func:`serving` does the same inside a ``with`` block.

Chat Completions (``/v1/chat/completions``), Responses (``/v1/responses``) and Messages
(``/v1/messages``) answer every streamed request in the API's SSE shapes: with one tool call
of ``TOOL`` (``call``), when the request's last message is the user's, else with one short
text (:data:`ANSWER`). Each tool call gets an id of its own (``call_1``, ``call_2``, ...).
Nothing is checked and nothing is kept: it is a stand-in, not a mock of a provider's rules.
"""

from __future__ import annotations

import argparse
import itertools
import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ANSWER", "serving"]

ANSWER = "Hello from the stand-in provider."
"""The text every answer that is not a tool call holds."""

Call = tuple[str, str]
"""A tool call the stand-in asks for: its tool's name and its arguments' JSON text."""


def _chat(call: Call | None, id: str) -> list[dict[str, Any]]:
    base = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "stand-in",
    }
    if call is None:
        delta: dict[str, Any] = {"role": "assistant", "content": ANSWER}
    else:
        function = {"name": call[0], "arguments": call[1]}
        delta = {
            "role": "assistant",
            "tool_calls": [{"index": 0, "id": id, "type": "function", "function": function}],
        }
    finish = "stop" if call is None else "tool_calls"
    return [
        {**base, "choices": [{"index": 0, "delta": delta}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        {
            **base,
            "choices": [],
            "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16},
        },
    ]


def _messages(call: Call | None, id: str) -> list[tuple[str, dict[str, Any]]]:
    usage = {"input_tokens": 9, "output_tokens": 1}
    message: dict[str, Any] = {
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
                "content_block": {"type": "text", "text": ""}
                if call is None
                else {"type": "tool_use", "id": id, "name": call[0], "input": {}},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": ANSWER}
                if call is None
                else {"type": "input_json_delta", "partial_json": call[1]},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "end_turn" if call is None else "tool_use",
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": 7},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def _responses(call: Call | None, id: str) -> list[tuple[str, dict[str, Any]]]:
    if call is None:
        item: dict[str, Any] = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        text = {"type": "output_text", "text": ANSWER, "annotations": []}
        done = {**item, "status": "completed", "content": [text]}
        delta = (
            "response.output_text.delta",
            {"item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": ANSWER},
        )
    else:
        item = {
            "id": "fc_" + id,
            "type": "function_call",
            "call_id": id,
            "name": call[0],
            "arguments": "",
            "status": "in_progress",
        }
        done = {**item, "arguments": call[1], "status": "completed"}
        delta = (
            "response.function_call_arguments.delta",
            {"item_id": "fc_" + id, "output_index": 0, "delta": call[1]},
        )
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
        (delta[0], {**delta[1], **({"logprobs": []} if call is None else {})}),
        ("response.output_item.done", {"output_index": 0, "item": done}),
        ("response.completed", {"response": response}),
    ]
    return [
        (name, {"type": name, "sequence_number": n, **data})
        for n, (name, data) in enumerate(events)
    ]


def _users_turn(path: str, request: Mapping[str, Any]) -> bool:
    """Whether the request's last message is the user's (not a tool's result)."""
    items = request.get("input") if path.endswith("/responses") else request.get("messages")
    if not isinstance(items, list) or not items or not isinstance(items[-1], Mapping):
        return isinstance(items, str)  # (Responses takes a bare string as the user's)
    last = items[-1]
    if last.get("role") != "user":
        return False
    content = last.get("content")
    blocks = content if isinstance(content, list) else []
    return not any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in blocks)


class _Handler(BaseHTTPRequestHandler):
    call: Call | None = None
    ids: Iterator[int] = itertools.count(1)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        try:
            request = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            request = {}
        asks = self.call if _users_turn(self.path, request) else None
        id = f"call_{next(self.ids)}"
        if self.path.endswith("/chat/completions"):
            chunks = _chat(asks, id)
            body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        elif self.path.endswith("/responses"):
            events = _responses(asks, id)
            body = "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events)
        elif self.path.endswith("/messages"):
            events = _messages(asks, id)
            body = "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events)
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
def serving(
    call: tuple[str, Mapping[str, Any]] | None = None, *, port: int = 0
) -> Iterator[dict[str, str]]:
    """Serve on 127.0.0.1 (``port``; 0: a free one) until the block ends; yield the
    environment that points the OpenAI and Anthropic SDKs at it (base URLs and stand-in
    keys). ``call``: ``(tool, arguments)`` to ask for when the user spoke last."""
    asked = None if call is None else (call[0], json.dumps(dict(call[1])))
    handler = type("Handler", (_Handler,), {"call": asked, "ids": itertools.count(1)})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
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


def main(argv: list[str] | None = None) -> None:
    """``python -m agent_session.providers.standin``: serve until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m agent_session.providers.standin",
        description="Serve a stand-in for the OpenAI and Anthropic APIs on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    parser.add_argument("--call", metavar="TOOL", help="ask for this tool when the user spoke")
    parser.add_argument("--arguments", default="{}", help="the call's arguments (JSON object)")
    args = parser.parse_args(argv)
    try:
        arguments = json.loads(args.arguments)
    except ValueError as e:
        parser.error(f"--arguments is not JSON: {e}")
    if not isinstance(arguments, dict):
        parser.error("--arguments must be a JSON object")
    with serving(None if args.call is None else (args.call, arguments), port=args.port) as env:
        for name, value in env.items():
            print(f"export {name}={value}", flush=True)
        print("# serving; Ctrl-C stops", flush=True)
        with suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
