"""Typed views of the message values events carry (the reference's ``dsh-llm`` shapes).

Events store their payloads as frozen JSON (``event.data``), which is the authority and keeps the
exact key order it was written with. These models are the typed way to build and read those
payloads: ``to_json()`` gives the wire dict, in the key order the reference writes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from agent_session.session.events.wire import WireModel

__all__ = [
    "AbortedFinish",
    "AssistantMessage",
    "BlockEndChunk",
    "BlockStartChunk",
    "ContentBlock",
    "ErrorFinish",
    "FinishChunk",
    "FinishReason",
    "ImageBlock",
    "LlmFailure",
    "Message",
    "ModelSource",
    "PluginSource",
    "ReasoningBlock",
    "ReasoningDeltaChunk",
    "SimpleFinish",
    "StreamChunk",
    "TextBlock",
    "TextDeltaChunk",
    "TokenUsage",
    "ToolCallBlock",
    "ToolCallDeltaChunk",
    "ToolResultBlock",
    "ToolResultMessage",
    "ToolSource",
    "UsageChunk",
    "UserMessage",
    "UserSource",
]


# --- content blocks -------------------------------------------------------------------------


class TextBlock(WireModel):
    """Visible text."""

    type: Literal["text"] = "text"
    text: str
    """The text, exactly as produced."""


class ReasoningBlock(WireModel):
    """Model reasoning ("thinking") text."""

    type: Literal["reasoning"] = "reasoning"
    text: str
    """The reasoning text."""


class ImageBlock(WireModel):
    """An image; ``attachment`` is opaque JSON describing it."""

    type: Literal["image"] = "image"
    attachment: Any
    """Provider- or application-defined JSON describing the image."""


class ToolCallBlock(WireModel):
    """A tool call the model asked for."""

    type: Literal["tool-call"] = "tool-call"
    id: str
    """The call id; tool results answer it by this id."""
    name: str
    """The tool's name."""
    arguments: str
    """The raw JSON string the model produced (not parsed, possibly invalid)."""


class ToolResultBlock(WireModel):
    """The one block of a tool result message."""

    type: Literal["tool-result"] = "tool-result"
    tool_call_id: str
    """The id of the call this answers; equals the message source's ``callId``."""
    content: list[ContentBlock]
    """What the tool returned, as content blocks."""
    is_error: bool | None = None
    """True when the call failed; the content then says why."""


ContentBlock = Annotated[
    TextBlock | ReasoningBlock | ImageBlock | ToolCallBlock | ToolResultBlock,
    Field(discriminator="type"),
]
"""One block of message content, told apart by ``type``."""


# --- sources --------------------------------------------------------------------------------


class UserSource(WireModel):
    """Input typed by the user."""

    kind: Literal["user"] = "user"


class PluginSource(WireModel):
    """Input injected by a plugin; further keys are the plugin's own."""

    kind: Literal["plugin"] = "plugin"
    plugin: str
    """The plugin's name."""


class ModelSource(WireModel):
    """Output of a model."""

    kind: Literal["model"] = "model"
    provider: str
    """Provider name, e.g. ``openai``."""
    model: str
    """Model name at that provider."""
    replay_state: Any = None
    """Opaque provider state the adapter needs to replay this message, if any."""


class ToolSource(WireModel):
    """The result of a tool call."""

    kind: Literal["tool"] = "tool"
    call_id: str
    """The id of the tool call this answers."""


# --- messages -------------------------------------------------------------------------------


class UserMessage(WireModel):
    """A user-role message: a prompt, steering, injected or runtime context."""

    content: list[ContentBlock]
    """The message content."""
    source: Annotated[UserSource | PluginSource, Field(discriminator="kind")]
    """Who produced it."""
    role: Literal["user"] = "user"
    id: str
    """Stable, non-empty message id (a UUID when minted here)."""


class AssistantMessage(WireModel):
    """A model's answer for one step."""

    role: Literal["assistant"] = "assistant"
    content: list[ContentBlock]
    """Text, reasoning and tool-call blocks in the order the model produced them."""
    source: ModelSource
    """The provider and model that produced it."""
    id: str
    """Stable, non-empty message id."""


class ToolResultMessage(WireModel):
    """A tool result, sent to the model with role ``user``."""

    source: ToolSource
    """The call this answers."""
    content: list[ContentBlock]
    """Exactly one ``tool-result`` block whose ``toolCallId`` equals ``source.callId``."""
    role: Literal["user"] = "user"
    id: str
    """Stable, non-empty message id."""


Message = UserMessage | AssistantMessage | ToolResultMessage
"""Any message the surface projects."""


# --- usage, failures, stream chunks ---------------------------------------------------------


class TokenUsage(WireModel):
    """Token counts of one model response."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None


class LlmFailure(WireModel):
    """Why a model request failed."""

    message: str
    """Human-readable explanation."""
    code: str
    """Machine-readable code (``UNKNOWN`` for non-LLM errors)."""
    status: int | None = None
    """HTTP status, when there was one."""
    provider_retry_after_ms: int | None = None
    """The provider's retry-after hint, in milliseconds."""
    request_id: str | None = None
    """The provider's request id, for support."""


class SimpleFinish(WireModel):
    """A normal end of a response."""

    kind: Literal["stop", "tool-calls", "max-tokens"]


class AbortedFinish(WireModel):
    """The provider aborted the response."""

    kind: Literal["aborted"] = "aborted"
    failure: LlmFailure


class ErrorFinish(WireModel):
    """The response ended in an error."""

    kind: Literal["error"] = "error"
    failure: LlmFailure


FinishReason = Annotated[SimpleFinish | AbortedFinish | ErrorFinish, Field(discriminator="kind")]
"""Why a response ended."""


class BlockStartChunk(WireModel):
    """A content block begins; tool-call blocks carry their id and name."""

    type: Literal["block-start"] = "block-start"
    index: int
    block_type: Literal["text", "reasoning", "tool-call", "image"]
    id: str | None = None
    name: str | None = None


class TextDeltaChunk(WireModel):
    """More text for block ``index``."""

    type: Literal["text-delta"] = "text-delta"
    index: int
    text: str


class ReasoningDeltaChunk(WireModel):
    """More reasoning for block ``index``."""

    type: Literal["reasoning-delta"] = "reasoning-delta"
    index: int
    text: str


class ToolCallDeltaChunk(WireModel):
    """More argument text for tool-call block ``index``."""

    type: Literal["tool-call-delta"] = "tool-call-delta"
    index: int
    id: str
    name: str | None = None
    arguments_delta: str


class BlockEndChunk(WireModel):
    """Block ``index`` is complete; ``block`` is its assembled form."""

    type: Literal["block-end"] = "block-end"
    index: int
    block: ContentBlock


class UsageChunk(WireModel):
    """Token usage of the response."""

    type: Literal["usage"] = "usage"
    usage: TokenUsage


class FinishChunk(WireModel):
    """The response ended."""

    type: Literal["finish"] = "finish"
    reason: FinishReason
    replay_state: Any = None


StreamChunk = Annotated[
    BlockStartChunk
    | TextDeltaChunk
    | ReasoningDeltaChunk
    | ToolCallDeltaChunk
    | BlockEndChunk
    | UsageChunk
    | FinishChunk,
    Field(discriminator="type"),
]
"""One raw chunk of a streamed model response."""

ToolResultBlock.model_rebuild()
