"""``ScriptedModel``: a model adapter that replays a script, for demos, tests and benchmarks.

Each request consumes the next :class:`ScriptedStep` and streams it the way a provider would:
reasoning, then text, then tool calls (each as several deltas), then usage and the finish
chunk, in the reference's chunk shapes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_session.agent_loop.models import ModelRequest, ModelUnavailableError, RequestSettings

__all__ = ["ScriptedCall", "ScriptedModel", "ScriptedStep"]


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """A tool call the script makes; ``arguments`` is streamed piece by piece."""

    id: str
    name: str
    arguments: Sequence[str]


@dataclass(frozen=True, slots=True)
class ScriptedStep:
    """One model response."""

    text: Sequence[str] = ()
    """Text deltas (empty: no text block)."""
    reasoning: Sequence[str] = ()
    """Reasoning deltas (empty: no reasoning block)."""
    calls: Sequence[ScriptedCall] = ()
    """Tool calls, in order."""
    usage: tuple[int, int] | None = None
    """``(input tokens, output tokens)``, streamed as a usage chunk."""
    finish: dict[str, Any] | None = None
    """The finish reason; default ``tool-calls`` when there are calls, else ``stop``."""


Hook = Callable[[int, ModelRequest, dict[str, Any] | None], Awaitable[None] | None]


@dataclass
class ScriptedModel:
    """Replays ``steps``, one per request; ``on_chunk(request_number, request, chunk)`` runs
    before each chunk is yielded (and once with ``None`` before the first), which is where
    tests put failpoints and delays."""

    steps: Sequence[ScriptedStep]
    on_chunk: Hook | None = None
    requests: list[ModelRequest] = field(default_factory=list)
    """Every request received, in order."""
    max_tokens: int | None = None
    """The ``maxTokens`` its requests say they send (none by default), as an adapter's
    request settings do: a budget's bound of each request."""

    def request_settings(self) -> RequestSettings:
        """``{"maxTokens": max_tokens}`` when set (what a provider adapter reports)."""
        return RequestSettings({} if self.max_tokens is None else {"maxTokens": self.max_tokens})

    def check(self, model: str) -> None:
        """Raise :class:`ModelUnavailableError` once every step was replayed (a turn would
        fail at its first request)."""
        if len(self.requests) >= len(self.steps):
            raise ModelUnavailableError(self._exhausted(len(self.requests)))

    def _exhausted(self, number: int) -> str:
        return (
            f"the script has {len(self.steps)} steps; request {number + 1} has none (script "
            "what the model answers after the last step it replayed)"
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
        number = len(self.requests)
        self.requests.append(request)
        if number >= len(self.steps):
            raise ModelUnavailableError(self._exhausted(number))
        await self._hook(number, request, None)
        for chunk in chunks(self.steps[number]):
            await self._hook(number, request, chunk)
            yield chunk

    async def _hook(self, number: int, request: ModelRequest, chunk: dict[str, Any] | None) -> None:
        if self.on_chunk is not None:
            result = self.on_chunk(number, request, chunk)
            if result is not None:
                await result


def chunks(step: ScriptedStep) -> list[dict[str, Any]]:
    """The chunks a step streams."""
    out: list[dict[str, Any]] = []
    index = 0
    for kind, pieces in (("reasoning", step.reasoning), ("text", step.text)):
        if not pieces:
            continue
        out.append({"type": "block-start", "index": index, "blockType": kind})
        out += [{"type": f"{kind}-delta", "index": index, "text": p} for p in pieces]
        out.append(
            {"type": "block-end", "index": index, "block": {"type": kind, "text": "".join(pieces)}}
        )
        index += 1
    for call in step.calls:
        out.append(
            {
                "type": "block-start",
                "index": index,
                "blockType": "tool-call",
                "id": call.id,
                "name": call.name,
            }
        )
        for position, piece in enumerate(call.arguments):
            delta: dict[str, Any] = {"type": "tool-call-delta", "index": index, "id": call.id}
            if position == 0:
                delta["name"] = call.name
            delta["argumentsDelta"] = piece
            out.append(delta)
        out.append(
            {
                "type": "block-end",
                "index": index,
                "block": {
                    "type": "tool-call",
                    "id": call.id,
                    "name": call.name,
                    "arguments": "".join(call.arguments),
                },
            }
        )
        index += 1
    if step.usage is not None:
        out.append(
            {
                "type": "usage",
                "usage": {"inputTokens": step.usage[0], "outputTokens": step.usage[1]},
            }
        )
    finish = step.finish or {"kind": "tool-calls" if step.calls else "stop"}
    out.append({"type": "finish", "reason": finish})
    return out
