"""A provider served from recorded responses through the SDK's own HTTP transport
(``httpx2.MockTransport``): each request the client sends is kept (its JSON body), and is
answered by the next scripted reply: an SSE stream or an error status. No network."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2


@dataclass
class Reply:
    """One scripted answer: SSE ``events`` (``(event name or None, data)``) or an error."""

    events: Sequence[tuple[str | None, Any]] = ()
    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    done: bool = True
    """Whether an SSE stream ends with ``data: [DONE]`` (Chat Completions)."""
    drop: bool = False
    """The connection drops instead (a timeout as the client sees one)."""


def sse(events: Sequence[tuple[str | None, Any]], done: bool) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {json.dumps(data)}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


class Served:
    """The transport: answers requests with ``replies`` in order and records them."""

    def __init__(self, replies: Sequence[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(json.loads(request.content))
        self.paths.append(request.url.path)
        if not self.replies:
            return httpx2.Response(500, json={"error": {"message": "no reply scripted"}})
        reply = self.replies.pop(0)
        if reply.drop:
            raise httpx2.ReadTimeout("the provider did not answer in time", request=request)
        if reply.status != 200:
            return httpx2.Response(reply.status, json=reply.body, headers=dict(reply.headers))
        return httpx2.Response(
            200,
            content=sse(reply.events, reply.done),
            headers={"content-type": "text/event-stream", **reply.headers},
        )

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))
