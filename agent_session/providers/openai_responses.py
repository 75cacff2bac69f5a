"""The OpenAI Responses API as a model adapter, on the official ``openai`` SDK (extra
``[openai]``)::

    runtime.models.register("openai", OpenAIResponsesModel(AsyncOpenAI()))
    agent = runtime.agent(session, model="openai/gpt-5")

Stateless (``store: false``): every request carries the session's surface as input items
(:func:`agent_session.interchange.export.to_responses`), with the registry's tools as
``function`` tools, and asks for ``reasoning.encrypted_content``: the reasoning items of an
answer are kept verbatim in its message's ``replayState`` and sent back as they came, so
reasoning carries
across tool calls. The stream maps to reference chunks: output text and refusals (text),
reasoning summaries and text (reasoning), function calls with streamed arguments (the
provider's ``call_id`` is the log's ``callId``), usage (cached and reasoning tokens) and how
the response ended (``completed``; ``incomplete`` for ``max_output_tokens`` → ``max-tokens``,
for ``content_filter`` → an error; ``failed`` and ``error`` → an error).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agent_session.agent_loop.models import ModelRequest
from agent_session.interchange.export import to_responses
from agent_session.providers.base import ProviderFailure
from agent_session.providers.blocks import Blocks, answered, failure, finish, usage
from agent_session.providers.openai_chat import OpenAIChatModel
from agent_session.session.json.lossless import thaw

__all__ = ["OpenAIResponsesModel", "responses_request"]


def responses_request(request: ModelRequest) -> dict[str, Any]:
    """The Responses request body of ``request`` (streamed, stateless)."""
    body: dict[str, Any] = {
        "model": request.model,
        **to_responses(request.messages, request.system),
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": tool["name"],
                "description": tool.get("description", ""),
                "parameters": thaw(tool.get("parameters") or {"type": "object"}),
            }
            for tool in request.tools
        ]
    body["stream"] = True
    body["store"] = False
    body["include"] = ["reasoning.encrypted_content"]
    return body


class OpenAIResponsesModel(OpenAIChatModel):
    """Responses over an ``openai.AsyncOpenAI`` client (see :class:`OpenAIChatModel` for the
    client, the key and the retries)."""

    mapping = "openai-responses/1"

    async def _attempt(
        self, request: ModelRequest, blocks: Blocks
    ) -> AsyncIterator[dict[str, Any]]:
        body = responses_request(request)  # (extra fields: as in OpenAIChatModel)
        stream = await self.client.responses.create(**body, extra_body=self.extra_body or None)
        replay: dict[int, dict[str, Any]] = {}
        ended: dict[str, Any] | None = None
        counted: Any = None
        answer_id: Any = None
        reason: Any = None
        async for event in stream:
            kind = event.type
            if kind == "response.output_item.added":
                item = event.item
                if item.type == "function_call":
                    for out in blocks.call(event.output_index, item.call_id, item.name, ""):
                        yield out
            elif kind in ("response.output_text.delta", "response.refusal.delta"):
                for out in blocks.text(("text", event.output_index), "text", event.delta):
                    yield out
            elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
                key = ("reasoning", event.output_index)
                for out in blocks.text(key, "reasoning", event.delta):
                    yield out
            elif kind == "response.function_call_arguments.delta":
                for out in blocks.call(event.output_index, None, None, event.delta):
                    yield out
            elif kind == "response.output_item.done":
                item, index = event.item, event.output_index
                if item.type == "reasoning":
                    replay[index] = item.model_dump(mode="json", exclude_none=True)
                elif item.type == "function_call":
                    blocks.replace(index, arguments=item.arguments)
                for key in (index, ("text", index), ("reasoning", index)):
                    for out in blocks.end(key):
                        yield out
            elif kind in ("response.completed", "response.incomplete", "response.failed"):
                counted = event.response.usage
                ended = _ending(event.response)
                answer_id, reason = event.response.id, _reason(event.response)
            elif kind == "error":
                problem = failure(f"{event.code or 'error'}: {event.message}", "STREAM_ERROR")
                raise ProviderFailure(problem, retryable=False)
        for out in blocks.end_all():
            yield out
        if counted is not None:
            yield _usage(counted)
        end = ended or finish(
            "error", failure("the stream ended without a response", "STREAM_ENDED")
        )
        if end["reason"]["kind"] == "stop" and blocks.has_calls():
            end = finish("tool-calls")
        if replay:
            items = [replay[index] for index in sorted(replay)]
            end["replayState"] = {"provider": "openai-responses", "blocks": items}
        yield answered(end, "openai-responses", answer_id, reason)


def _reason(response: Any) -> Any:
    """Why the provider says the response ended: its status, or why it is incomplete."""
    details = getattr(response, "incomplete_details", None)
    return getattr(details, "reason", None) or response.status


def _ending(response: Any) -> dict[str, Any]:
    status = response.status
    if status == "incomplete":
        details = response.incomplete_details
        reason = getattr(details, "reason", None)
        if reason == "content_filter":
            return finish(
                "error",
                failure("the provider's content filter stopped the answer", "CONTENT_FILTER"),
            )
        return finish("max-tokens")
    if status == "failed":
        error = response.error
        message = getattr(error, "message", None) or "the response failed"
        code = getattr(error, "code", None)
        return finish("error", failure(f"{code}: {message}" if code else message, "PROVIDER_ERROR"))
    return finish("stop")


def _usage(counted: Any) -> dict[str, Any]:
    details = getattr(counted, "input_tokens_details", None)
    output = getattr(counted, "output_tokens_details", None)
    return usage(
        counted.input_tokens,
        counted.output_tokens,
        cache_read=getattr(details, "cached_tokens", None),
        reasoning=getattr(output, "reasoning_tokens", None),
    )
