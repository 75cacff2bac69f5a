"""Typed payloads of the known event types.

``event.payload`` returns one of these for a known type; producers may pass one to
``Session.append`` instead of a dict. ``to_json()`` writes the reference's key order.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from agent_session.session.events.messages import (
    AssistantMessage,
    LlmFailure,
    StreamChunk,
    TokenUsage,
    ToolResultMessage,
    UserMessage,
)
from agent_session.session.events.wire import WireModel

__all__ = [
    "AbortReason",
    "AbortedTurn",
    "AssistantChunkData",
    "AssistantMessageData",
    "EndSeedData",
    "ErrorTurn",
    "InboxSplicedData",
    "LlmRetryData",
    "LlmRetryStartedData",
    "RequestContextData",
    "RequestHeader",
    "RequestHeaderData",
    "SimpleTurnEnd",
    "StepData",
    "TodoItem",
    "TodoWriteData",
    "ToolCallData",
    "ToolErrorInfo",
    "ToolResultData",
    "TurnEndData",
    "TurnEndReason",
    "TurnStartData",
]


class InboxSplicedData(WireModel):
    """``agent/inbox/spliced``: one normalized change of a pending input list."""

    target: Literal["next-turn", "next-step"]
    """Which list changed."""
    start: int
    """Index of the first removed or inserted item."""
    removed_count: int | None = None
    """How many items were removed at ``start``; omitted when 0."""
    inserted: list[UserMessage]
    """Messages inserted at ``start``."""
    outcome: Literal["canceled"] | None = None
    """``canceled`` when the removal discarded input rather than claiming it."""


class TurnStartData(WireModel):
    """``turn/start``."""

    turn: int
    """Turn number, from 1, continuing after the last ``turn/start`` in the log."""


class StepData(WireModel):
    """``step/start`` and ``step/end``."""

    turn: int
    """The open turn."""
    step: int
    """Step number within the turn, from 1."""


class RequestHeader(WireModel):
    """The canonical request snapshot a model request was built from."""

    config: dict[str, Any]
    """Request configuration; always has ``provider`` and ``model``."""
    adapter_defaults: dict[str, bool] | None = None
    """Which config fields (``reasoningEffort``, ``maxTokens``) came from adapter defaults."""
    system: str | None = None
    """The system prompt; omitted when empty."""
    tools: list[dict[str, Any]] | None = None
    """Tool definitions (``name``, ``description``, ``parameters``); omitted when empty."""


class RequestHeaderData(WireModel):
    """``request/header``: logged on the first request and whenever the header changes."""

    header: RequestHeader
    reason: Literal["initial", "resume", "change"]
    """``initial`` for a fresh log, ``resume`` for a loop over an existing log, else ``change``."""


class RequestContextData(WireModel):
    """``request/context``: logged when the route or capacity changes."""

    provider: str
    model: str
    context_window: int | None = None


class AssistantChunkData(WireModel):
    """``assistant/chunk``: one raw stream chunk."""

    turn: int
    step: int
    chunk: StreamChunk


class AssistantMessageData(WireModel):
    """``assistant/message``: the assembled answer of one model attempt (surface event)."""

    turn: int
    step: int
    message: AssistantMessage
    usage: TokenUsage | None = None
    """Token usage, when the stream reported it."""
    interrupted: Literal[True] | None = None
    """Set when a cancellation cut the stream; the content is what was visible."""


class ToolCallData(WireModel):
    """``tool/call``: a tool call was recorded before policy and dispatch."""

    turn: int
    step: int
    call_id: str
    name: str
    arguments: str
    """The raw argument string the model produced."""


class ToolErrorInfo(WireModel):
    """Machine-readable error of a failed tool call."""

    name: str
    """Error class name, e.g. ``ToolOutcomeUnknownError``."""
    code: str
    """Error code, e.g. ``TOOL_OUTCOME_UNKNOWN``."""


class ToolResultData(WireModel):
    """``tool/result``: the result of one call (surface event)."""

    turn: int
    step: int
    message: ToolResultMessage
    error: ToolErrorInfo | None = None
    meta: Any = None
    """Tool-defined JSON metadata, not shown to the model."""


class AbortReason(WireModel):
    """Why a turn was aborted: ``user``, ``parent``, ``hook`` (with ``reason``), ``disposed``
    or ``legacy``."""

    kind: Literal["user", "parent", "hook", "disposed", "legacy"]
    reason: Any = None


class SimpleTurnEnd(WireModel):
    """A turn end without details."""

    kind: Literal["completed", "blocked", "max-tokens", "interrupted"]
    """``interrupted`` is written by crash repair, and by a settlement stopped midway, which
    ends as a crash would have left it (``agent_loop.settle``)."""


class AbortedTurn(WireModel):
    """The turn was cancelled."""

    kind: Literal["aborted"] = "aborted"
    reason: AbortReason


class ErrorTurn(WireModel):
    """The turn failed."""

    kind: Literal["error"] = "error"
    error: LlmFailure


TurnEndReason = Annotated[SimpleTurnEnd | AbortedTurn | ErrorTurn, Field(discriminator="kind")]
"""Why a turn ended."""


class TurnEndData(WireModel):
    """``turn/end``."""

    turn: int
    reason: TurnEndReason


class LlmRetryData(WireModel):
    """``llm/retry``: a failed request will be retried after ``delayMs``."""

    retry_id: str
    turn: int
    step: int
    provider: str
    mode: str
    policy_key: str
    retry: int
    max_retries: int | None = None
    delay_ms: int
    failure: LlmFailure


class LlmRetryStartedData(WireModel):
    """``llm/retry-started``: the retry's wait is over."""

    retry_id: str
    turn: int
    step: int
    retry: int


class TodoItem(WireModel):
    """One entry of the agent's todo list."""

    content: str
    status: Literal["pending", "in_progress", "completed"]


class TodoWriteData(WireModel):
    """``todo/write``: replaces the whole todo list."""

    todos: list[TodoItem]


class EndSeedData(WireModel):
    """``session/end-seed``: marks the end of a seed; always ``{}``."""
