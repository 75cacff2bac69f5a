"""Turning a model's chunk stream into a response: the :class:`Assembler` of content blocks,
:func:`until_cancelled`, which stops reading a stream the moment a turn is cancelled, and
:func:`append_chunk`, which records a chunk."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

from agent_session.agent_loop.cancel import CancelSignal
from agent_session.session.events.livelog import DELTA_KEYS, DELTA_KINDS
from agent_session.session.events.types import ASSISTANT_CHUNK
from agent_session.session.json.lossless import thaw
from agent_session.session.live.session import Session

__all__ = [
    "RETRY_CHUNKS",
    "Assembler",
    "Cancelled",
    "append_chunk",
    "error_chain",
    "until_cancelled",
]


class Cancelled(Exception):
    """The turn was cancelled while a model stream was being read."""


_BLOCK_CHUNKS = frozenset(
    {"block-start", "text-delta", "reasoning-delta", "tool-call-delta", "block-end"}
)


RETRY_CHUNKS = frozenset({"retry", "retry-started"})
"""Chunks an adapter yields to announce a retry of a failed attempt (not the reference's)."""


class Assembler:
    """Builds the content blocks of a response from its chunks."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.ended: set[int] = set()
        """Indexes whose block ended: as in the reference, a block a stream starts again at
        such an index is not assembled (the first one stays)."""
        self.usage: Any = None
        self.finish: Any = None
        self.replay_state: Any = None
        """What the ``finish`` chunk's ``replayState`` says the provider needs to replay the
        answer (signed reasoning, say), kept in the message's source."""

    def failure(self) -> dict[str, Any] | None:
        """The reference's ``LlmFailure`` of a stream that finished with an error or was
        aborted (code ``ABORTED``); ``None`` for any other finish."""
        finish = self.finish or {"kind": "stop"}
        kind = finish.get("kind")
        if kind not in ("error", "aborted"):
            return None
        failure = dict(
            finish.get("failure") or {"message": f"model stream {kind}", "code": "UNKNOWN"}
        )
        if kind == "aborted":
            failure["code"] = "ABORTED"
        return failure

    def feed(self, chunk: Mapping[str, Any]) -> None:
        kind = chunk.get("type")
        index = int(chunk.get("index", 0))
        if index in self.ended and kind in _BLOCK_CHUNKS:
            return
        if kind == "block-start":
            if chunk["blockType"] == "tool-call":
                self.blocks[index] = {
                    "type": "tool-call",
                    "id": chunk.get("id"),
                    "name": chunk.get("name"),
                    "arguments": "",
                }
            else:
                self.blocks[index] = {"type": chunk["blockType"], "text": ""}
        elif kind in ("text-delta", "reasoning-delta"):
            block = self.blocks.setdefault(index, {"type": str(kind)[:-6], "text": ""})
            block["text"] += chunk["text"]
        elif kind == "tool-call-delta":
            block = self.blocks.setdefault(
                index,
                {
                    "type": "tool-call",
                    "id": chunk["id"],
                    "name": chunk.get("name"),
                    "arguments": "",
                },
            )
            block["arguments"] += chunk["argumentsDelta"]
        elif kind == "block-end":
            self.blocks[index] = thaw(chunk["block"])
            self.ended.add(index)
        elif kind == "usage":
            self.usage = chunk["usage"]
        elif kind == "finish":
            self.finish = chunk["reason"]
            self.replay_state = chunk.get("replayState")

    def content(self) -> list[dict[str, Any]]:
        return [self.blocks[i] for i in sorted(self.blocks)]

    def visible(self) -> list[dict[str, Any]]:
        """Text and reasoning blocks with something in them (what a cancel keeps)."""
        return [
            b
            for b in self.content()
            if b["type"] in ("text", "reasoning") and b.get("text", "").strip()
        ]


async def until_cancelled(stream: AsyncIterator[Any], cancel: CancelSignal) -> AsyncIterator[Any]:
    """Yield from ``stream`` until it ends; raise :class:`Cancelled` as soon as ``cancel`` is set,
    even while the stream is waiting."""
    iterator = aiter(stream)
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        while True:
            if cancel.cancelled:
                raise Cancelled
            step = asyncio.ensure_future(anext(iterator))
            done, _ = await asyncio.wait({step, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if step not in done:
                step.cancel()
                raise Cancelled
            try:
                chunk = step.result()
            except StopAsyncIteration:
                return
            yield chunk
    finally:
        waiter.cancel()
        close = getattr(iterator, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()


def error_chain(error: BaseException) -> str:
    """An exception and its causes, in words (at most ten)."""
    parts: list[str] = []
    current: BaseException | None = error
    while current is not None and len(parts) < 10:
        parts.append(str(current) or type(current).__name__)
        current = current.__cause__
    return ": ".join(parts)


def append_chunk(session: Session, turn: int, step: int, chunk: Mapping[str, Any]) -> int:
    """Record a streamed chunk; a text or reasoning delta of the usual shape as a delta (the
    same event, kept as a run of columns: ``Session.append_delta``)."""
    if chunk.get("type") in DELTA_KINDS and tuple(chunk) == DELTA_KEYS:
        return session.append_delta(
            turn, step, chunk["text"], index=chunk["index"], kind=chunk["type"]
        )
    return session.append(ASSISTANT_CHUNK, {"turn": turn, "step": step, "chunk": chunk}).seq
