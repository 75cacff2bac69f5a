"""The OpenAI Chat Completions API as a model adapter, on the official ``openai`` SDK (extra
``[openai]``)::

    runtime.models.register("openai", OpenAIChatModel(AsyncOpenAI()))
    agent = runtime.agent(session, model="openai/gpt-4.1")

The request is the session's surface in the shape ``agent-session export --format openai``
writes (the same mapping: repaired calls are error tool results, every call has one result),
with the registry's tools as ``function`` tools. The stream maps to reference chunks: text,
``reasoning_content`` (as reasoning), refusals (as text the model said), tool calls with
streamed arguments (parallel calls by their index, interleaved or not; the provider's call id
is the log's ``callId``), usage (cached and reasoning tokens when reported) and the finish
reason (``stop``, ``length`` → ``max-tokens``, ``tool_calls``, ``content_filter`` → an error).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from agent_session.agent_loop.models import ModelRequest
from agent_session.interchange.export import to_openai
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

__all__ = ["OpenAIChatModel", "chat_request"]

_TEXT, _REASONING = "text", "reasoning"


def chat_request(request: ModelRequest) -> dict[str, Any]:
    """The Chat Completions request body of ``request`` (streamed, with usage)."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": to_openai(request.messages, request.system),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool["name"],
                    "description": tool.get("description", ""),
                    "parameters": thaw(tool.get("parameters") or {"type": "object"}),
                },
            }
            for tool in request.tools
        ]
    return body


class OpenAIChatModel(ProviderModel):
    """Chat Completions over an ``openai.AsyncOpenAI`` client (one is made from the
    environment when none is given: ``OPENAI_API_KEY``). Retries are this adapter's (the
    client's own are turned off), so each one is recorded in the log; ``timeout`` (seconds)
    bounds each attempt; ``extra_body`` adds request fields."""

    provider = "openai"
    mapping = "openai-chat-completions/1"

    def __init__(
        self,
        client: Any = None,
        *,
        extra_body: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        **retries: Any,
    ) -> None:
        super().__init__(**retries)
        try:
            import openai
        except ImportError:
            raise missing_extra("openai", "openai") from None
        client = sdk_client(
            client,
            openai.AsyncOpenAI,
            openai.OpenAIError,
            name="AsyncOpenAI",
            variable="OPENAI_API_KEY",
        )
        self.client = without_retries(client, timeout)
        self.extra_body = dict(extra_body or {})

    def _sent(self) -> Mapping[str, Any]:
        return self.extra_body

    async def _attempt(
        self, request: ModelRequest, blocks: Blocks
    ) -> AsyncIterator[dict[str, Any]]:
        # (extra fields go as the SDK's extra_body: its keyword arguments are not every field)
        body = chat_request(request)
        extra = self.extra_body or None
        stream = await self.client.chat.completions.create(**body, extra_body=extra)
        reason: str | None = None
        counted: Any = None
        answer_id: Any = None
        async for chunk in stream:
            answer_id = getattr(chunk, "id", None) or answer_id
            if getattr(chunk, "usage", None) is not None:
                counted = chunk.usage
            for choice in chunk.choices or ():
                delta = choice.delta
                extra = getattr(delta, "model_extra", None) or {}
                thought = extra.get("reasoning_content") or extra.get("reasoning")
                if isinstance(thought, str) and thought:
                    for out in blocks.text(_REASONING, "reasoning", thought):
                        yield out
                if delta.content:
                    for out in blocks.end(_REASONING) + blocks.text(_TEXT, "text", delta.content):
                        yield out
                if delta.refusal:
                    for out in blocks.end(_REASONING) + blocks.text(_TEXT, "text", delta.refusal):
                        yield out
                for call in delta.tool_calls or ():
                    function = call.function
                    name = function.name if function is not None else None
                    arguments = (function.arguments if function is not None else None) or ""
                    head = blocks.end(_REASONING) + blocks.end(_TEXT)
                    for out in head + blocks.call(("call", call.index), call.id, name, arguments):
                        yield out
                if choice.finish_reason:
                    reason = choice.finish_reason
        for out in blocks.end_all():
            yield out
        if counted is not None:
            yield _usage(counted)
        yield answered(_finish(reason, blocks), "openai-chat", answer_id, reason)

    def _classify(self, error: Exception) -> ProviderFailure:
        import openai

        return sdk_failure(error, openai.APIStatusError, openai.APIConnectionError)


def _usage(counted: Any) -> dict[str, Any]:
    details = getattr(counted, "prompt_tokens_details", None)
    output = getattr(counted, "completion_tokens_details", None)
    return usage(
        counted.prompt_tokens,
        counted.completion_tokens,
        cache_read=getattr(details, "cached_tokens", None),
        reasoning=getattr(output, "reasoning_tokens", None),
    )


def _finish(reason: str | None, blocks: Blocks) -> dict[str, Any]:
    if reason == "length":
        return finish("max-tokens")
    if reason == "content_filter":
        return finish(
            "error", failure("the provider's content filter stopped the answer", "CONTENT_FILTER")
        )
    if reason in ("tool_calls", "function_call") or (reason is None and blocks.has_calls()):
        return finish("tool-calls")
    if reason is None:
        return finish("error", failure("the stream ended without a finish reason", "STREAM_ENDED"))
    return finish("stop")
