"""The Anthropic Messages API as a model adapter, on the official ``anthropic`` SDK (extra
``[anthropic]``)::

    runtime.models.register("anthropic", AnthropicModel(AsyncAnthropic()))
    agent = runtime.agent(session, model="anthropic/claude-sonnet-4-5")

The request is the session's surface in the shape ``agent-session export --format anthropic``
writes (the same mapping), with the registry's tools. The stream maps to reference chunks:
text, thinking (as reasoning), tool uses with their streamed input JSON (the provider's
``tool_use`` id is the log's ``callId``), usage (cache reads and writes) and the stop reason
(``end_turn``/``stop_sequence``/``refusal``/``pause_turn`` → ``stop``, ``max_tokens`` →
``max-tokens``, ``tool_use`` → ``tool-calls``). Thinking and redacted thinking blocks are kept
verbatim, signatures included, in the message's ``replayState`` and sent back as they came,
so multi-turn reasoning with tools works.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

from agent_session.agent_loop.models import ModelRequest
from agent_session.interchange.export import to_anthropic
from agent_session.providers.base import (
    ProviderFailure,
    ProviderModel,
    missing_extra,
    sdk_client,
    sdk_failure,
    without_retries,
)
from agent_session.providers.blocks import Blocks, answered, failure, finish, usage
from agent_session.session.json.lossless import thaw

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicModel", "messages_request"]

DEFAULT_MAX_TOKENS: Final = 4096
"""The ``max_tokens`` sent when none is given (the API requires one)."""


def messages_request(
    request: ModelRequest, max_tokens: int, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The Messages API request body of ``request`` (streamed)."""
    mapped = to_anthropic(request.messages, request.system)
    body: dict[str, Any] = {"model": request.model, "max_tokens": max_tokens}
    if "system" in mapped:
        body["system"] = mapped["system"]
    body["messages"] = mapped["messages"]
    if request.tools:
        body["tools"] = [
            {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "input_schema": thaw(tool.get("parameters") or {"type": "object"}),
            }
            for tool in request.tools
        ]
    body["stream"] = True
    return {**body, **(extra or {})}


class AnthropicModel(ProviderModel):
    """Messages over an ``anthropic.AsyncAnthropic`` client (one is made from the environment
    when none is given: ``ANTHROPIC_API_KEY``). ``max_tokens`` is required by the API
    (:data:`DEFAULT_MAX_TOKENS` when not given, which the header records as the adapter's
    default); ``extra_body`` adds fields
    (``{"thinking": {"type": "enabled", "budget_tokens": 2048}}``). Retries are this
    adapter's (the client's own are turned off); ``timeout`` (seconds) bounds each attempt."""

    provider = "anthropic"
    mapping = "anthropic-messages/1"

    def __init__(
        self,
        client: Any = None,
        *,
        max_tokens: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        **retries: Any,
    ) -> None:
        super().__init__(**retries)
        try:
            import anthropic
        except ImportError:
            raise missing_extra("anthropic", "anthropic") from None
        client = sdk_client(
            client,
            anthropic.AsyncAnthropic,
            anthropic.AnthropicError,
            name="AsyncAnthropic",
            variable="ANTHROPIC_API_KEY",
            keyless=lambda made: made.api_key is None and made.auth_token is None,
        )
        self.client = without_retries(client, timeout)
        self.max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
        self.extra_body = dict(extra_body or {})
        self._chosen = max_tokens is not None or "max_tokens" in self.extra_body

    def _sent(self) -> Mapping[str, Any]:
        return {"max_tokens": self.max_tokens, **self.extra_body}

    def _defaults(self) -> frozenset[str]:
        return frozenset() if self._chosen else frozenset({"maxTokens"})

    async def _attempt(
        self, request: ModelRequest, blocks: Blocks
    ) -> AsyncIterator[dict[str, Any]]:
        # (extra fields go as the SDK's extra_body: its keyword arguments are not every field)
        body = messages_request(request, self.max_tokens)
        stream = await self.client.messages.create(**body, extra_body=self.extra_body or None)
        replay: dict[int, dict[str, Any]] = {}
        kinds: dict[int, str] = {}
        counts: dict[str, int | None] = {}
        stop: str | None = None
        answer_id: Any = None
        async for event in stream:
            kind = event.type
            if kind == "message_start":
                counts.update(_counts(event.message.usage))
                answer_id = getattr(event.message, "id", None)
            elif kind == "content_block_start":
                out, block = _started(blocks, event.index, event.content_block, replay)
                kinds[event.index] = block
                for chunk in out:
                    yield chunk
            elif kind == "content_block_delta":
                for chunk in _delta(blocks, event.index, event.delta, replay):
                    yield chunk
            elif kind == "content_block_stop":
                if kinds.get(event.index) == "tool_use":
                    _complete_call(blocks, event.index)
                for chunk in blocks.end(event.index):
                    yield chunk
            elif kind == "message_delta":
                stop = event.delta.stop_reason or stop
                counts.update({k: v for k, v in _counts(event.usage).items() if v is not None})
        for chunk in blocks.end_all():
            yield chunk
        if counts:
            yield usage(
                counts.get("input"),
                counts.get("output"),
                cache_read=counts.get("cache_read"),
                cache_write=counts.get("cache_write"),
            )
        end = _finish(stop, blocks)
        if replay:
            end["replayState"] = {
                "provider": "anthropic",
                "blocks": [replay[index] for index in sorted(replay)],
            }
        yield answered(end, "anthropic", answer_id, stop)

    def _classify(self, error: Exception) -> ProviderFailure:
        import anthropic

        return sdk_failure(error, anthropic.APIStatusError, anthropic.APIConnectionError)


def _counts(counted: Any) -> dict[str, int | None]:
    return {
        "input": getattr(counted, "input_tokens", None),
        "output": getattr(counted, "output_tokens", None),
        "cache_read": getattr(counted, "cache_read_input_tokens", None),
        "cache_write": getattr(counted, "cache_creation_input_tokens", None),
    }


def _started(
    blocks: Blocks, index: int, block: Any, replay: dict[int, dict[str, Any]]
) -> tuple[list[dict[str, Any]], str]:
    """A block starts: text, thinking (reasoning, kept for replay), redacted thinking (kept
    only for replay) or a tool use."""
    kind = block.type
    if kind == "text":
        return blocks.text(index, "text", block.text or ""), kind
    if kind == "thinking":
        replay[index] = {
            "type": "thinking",
            "thinking": block.thinking or "",
            "signature": block.signature or "",
        }
        return blocks.text(index, "reasoning", block.thinking or ""), kind
    if kind == "redacted_thinking":
        replay[index] = {"type": "redacted_thinking", "data": block.data}
        return [], kind
    if kind == "tool_use":
        return blocks.call(index, block.id, block.name, ""), kind
    return [], kind


def _delta(
    blocks: Blocks, index: int, delta: Any, replay: dict[int, dict[str, Any]]
) -> list[dict[str, Any]]:
    kind = delta.type
    if kind == "text_delta":
        return blocks.text(index, "text", delta.text)
    if kind == "thinking_delta":
        if index in replay:
            replay[index]["thinking"] += delta.thinking
        return blocks.text(index, "reasoning", delta.thinking)
    if kind == "signature_delta":
        if index in replay:
            replay[index]["signature"] += delta.signature
        return []
    if kind == "input_json_delta":
        return blocks.call(index, None, None, delta.partial_json)
    return []


def _complete_call(blocks: Blocks, index: int) -> None:
    """A tool use whose input streamed nothing has the input ``{}``."""
    block = blocks.block(index)
    if block is not None and not block["arguments"].strip():
        blocks.replace(index, arguments="{}")


def _finish(stop: str | None, blocks: Blocks) -> dict[str, Any]:
    if stop in ("max_tokens", "model_context_window_exceeded"):
        return finish("max-tokens")
    if stop == "tool_use" or (stop is None and blocks.has_calls()):
        return finish("tool-calls")
    if stop is None:
        return finish("error", failure("the stream ended without a stop reason", "STREAM_ENDED"))
    return finish("stop")
