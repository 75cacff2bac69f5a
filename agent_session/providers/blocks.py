"""Turning a provider's streamed deltas into the reference's stream chunks.

Providers number their output differently (a Chat Completions tool call by its index among
the calls, an Anthropic block by its index among the blocks, text without any index at all).
:class:`Blocks` gives each block the reference's index in the order blocks start, emits
``block-start`` when one starts, its deltas, and ``block-end`` with the whole block when it
ends (or when the response ends), then ``usage`` and ``finish``. So every adapter emits what
the loop's assembler and the log expect, in the same shape the scripted model does.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

__all__ = ["Blocks", "failure", "usage"]

Chunk = dict[str, Any]


class Blocks:
    """The open blocks of one response, keyed by the provider's own key for each."""

    def __init__(self) -> None:
        self._index: dict[Hashable, int] = {}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._open: list[int] = []
        self._next = 0

    @property
    def started(self) -> bool:
        """Whether any block started (output was streamed)."""
        return self._next > 0

    def _start(self, key: Hashable, block: dict[str, Any], start: Chunk) -> list[Chunk]:
        index = self._next
        self._next += 1
        self._index[key] = index
        self._blocks[index] = block
        self._open.append(index)
        return [{"type": "block-start", "index": index, **start}]

    def text(self, key: Hashable, kind: str, text: str) -> list[Chunk]:
        """A delta of a ``text`` or ``reasoning`` block (started on its first delta)."""
        out: list[Chunk] = []
        index = self._index.get(key)
        if index is None or index not in self._open:
            out += self._start(key, {"type": kind, "text": ""}, {"blockType": kind})
            index = self._index[key]
        if text:
            self._blocks[index]["text"] += text
            out.append({"type": f"{kind}-delta", "index": index, "text": text})
        return out

    def call(self, key: Hashable, id: str | None, name: str | None, arguments: str) -> list[Chunk]:
        """A delta of a tool call (started on its first delta, which names it)."""
        out: list[Chunk] = []
        index = self._index.get(key)
        if index is None:
            block = {"type": "tool-call", "id": id or "", "name": name or "", "arguments": ""}
            out += self._start(key, block, {"blockType": "tool-call", "id": id, "name": name})
            index = self._index[key]
            first = True
        else:
            first = False
        block = self._blocks[index]
        if id and not block["id"]:
            block["id"] = id
        if name and not block["name"]:
            block["name"] = name
        if arguments or first:
            delta: Chunk = {"type": "tool-call-delta", "index": index, "id": block["id"]}
            if first:
                delta["name"] = block["name"]
            delta["argumentsDelta"] = arguments
            block["arguments"] += arguments
            out.append(delta)
        return out

    def replace(self, key: Hashable, **fields: Any) -> None:
        """Set fields of an open block (a signature, the arguments a provider sent whole)."""
        index = self._index.get(key)
        if index is not None:
            self._blocks[index].update(fields)

    def block(self, key: Hashable) -> dict[str, Any] | None:
        """The block (as it stands) the provider's ``key`` names, if it started."""
        index = self._index.get(key)
        return None if index is None else self._blocks[index]

    def end(self, key: Hashable) -> list[Chunk]:
        """End one block (nothing when it is not open)."""
        index = self._index.get(key)
        if index is None or index not in self._open:
            return []
        self._open.remove(index)
        return [{"type": "block-end", "index": index, "block": dict(self._blocks[index])}]

    def end_all(self) -> list[Chunk]:
        """End every open block, in the order they started."""
        out = [
            {"type": "block-end", "index": i, "block": dict(self._blocks[i])} for i in self._open
        ]
        self._open = []
        return out

    def has_calls(self) -> bool:
        """Whether the response asked for any tool."""
        return any(b["type"] == "tool-call" for b in self._blocks.values())


def usage(
    input: int | None,
    output: int | None,
    *,
    cache_read: int | None = None,
    cache_write: int | None = None,
    reasoning: int | None = None,
) -> Chunk:
    """The reference's ``usage`` chunk (``TokenUsage``: optional counts omitted)."""
    counts: dict[str, int] = {"inputTokens": input or 0, "outputTokens": output or 0}
    for key, value in (
        ("cacheReadTokens", cache_read),
        ("cacheWriteTokens", cache_write),
        ("reasoningTokens", reasoning),
    ):
        if value:
            counts[key] = value
    return {"type": "usage", "usage": counts}


def failure(
    message: str,
    code: str,
    *,
    status: int | None = None,
    retry_after_ms: int | None = None,
    request_id: str | None = None,
) -> dict[str, Any]:
    """The reference's ``LlmFailure``."""
    out: dict[str, Any] = {"message": message, "code": code}
    if status is not None:
        out["status"] = status
    if retry_after_ms is not None:
        out["providerRetryAfterMs"] = retry_after_ms
    if request_id is not None:
        out["requestId"] = request_id
    return out


def finish(kind: str, failed: Mapping[str, Any] | None = None) -> Chunk:
    """The ``finish`` chunk."""
    reason: dict[str, Any] = {"kind": kind}
    if failed is not None:
        reason["failure"] = dict(failed)
    return {"type": "finish", "reason": reason}


def answered(end: Chunk, provider: str, response_id: Any, reason: Any) -> Chunk:
    """The ``finish`` chunk ``end`` with the provider's own account of the response in its
    ``replayState``'s ``response``: the id the provider gave it and its finish reason as the
    provider named it (what a trace reports as ``gen_ai.response.id`` and
    ``gen_ai.response.finish_reasons``). The replayed blocks, if any, are kept."""
    said = {"id": response_id, "finishReason": reason}
    kept = {key: value for key, value in said.items() if isinstance(value, str) and value}
    if not kept:
        return end
    state = dict(end.get("replayState") or {"provider": provider})
    state["response"] = kept
    return {**end, "replayState": state}
