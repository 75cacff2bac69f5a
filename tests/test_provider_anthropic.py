"""The Anthropic Messages adapter with the real ``anthropic`` client over recorded SSE streams
(the API's documented event shapes): the exact events the loop logs and the exact request
bodies sent, for text, thinking with its signature carried back verbatim, one and parallel
tool uses, a max-tokens stop, a mid-stream error, an overloaded 529 then success, and a 400."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from agent_session.agent_loop import AgentRuntime
from agent_session.providers import AnthropicModel
from tests.providers import Reply, Served

SYSTEM = "Be brief."


def ev(name: str, **data: Any) -> tuple[str, Any]:
    return name, {"type": name, **data}


def start(input_tokens: int = 10, cache_read: int = 0) -> tuple[str, Any]:
    return ev(
        "message_start",
        message={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": 1,
                "cache_read_input_tokens": cache_read,
                "cache_creation_input_tokens": 0,
            },
        },
    )


def end(stop: str, output_tokens: int) -> list[tuple[str, Any]]:
    return [
        ev(
            "message_delta",
            delta={"stop_reason": stop, "stop_sequence": None},
            usage={"output_tokens": output_tokens},
        ),
        ev("message_stop"),
    ]


def text(index: int, *pieces: str) -> list[tuple[str, Any]]:
    out = [ev("content_block_start", index=index, content_block={"type": "text", "text": ""})]
    out += [
        ev("content_block_delta", index=index, delta={"type": "text_delta", "text": p})
        for p in pieces
    ]
    return [*out, ev("content_block_stop", index=index)]


def tool_use(index: int, id: str, *json: str) -> list[tuple[str, Any]]:
    block = {"type": "tool_use", "id": id, "name": "lookup", "input": {}}
    out = [ev("content_block_start", index=index, content_block=block)]
    out += [
        ev(
            "content_block_delta",
            index=index,
            delta={"type": "input_json_delta", "partial_json": j},
        )
        for j in json
    ]
    return [*out, ev("content_block_stop", index=index)]


def stack(served: Served, **options: Any) -> tuple[Any, Any, list[str]]:
    runtime = AgentRuntime()
    client = anthropic.AsyncAnthropic(
        api_key="sk-ant-test", base_url="http://provider", http_client=served.client()
    )

    async def sleep(seconds: float) -> None:
        return None

    runtime.models.register("anthropic", AnthropicModel(client, sleep=sleep, **options))
    ran: list[str] = []

    @runtime.tools.tool(description="Look something up.")
    async def lookup(args: Any, call: Any) -> str:
        ran.append(f"lookup:{call.call_id}")
        return f"found {args['q']}"

    session = runtime.sessions.create("s")
    return session, runtime.agent(session, model="anthropic/claude-test", system=SYSTEM), ran


def logged(session: Any, *types: str) -> list[Any]:
    return [e.data for e in session.events if e.type in types]


async def test_text_is_one_answer_and_the_request_is_the_surface() -> None:
    served = Served(
        [Reply([start(12, cache_read=8), *text(0, "Hel", "lo."), *end("end_turn", 3)], done=False)]
    )
    session, agent, _ = stack(served)
    assert await agent.run_turn("Say hello.") == {"kind": "completed"}
    assert served.paths == ["/v1/messages"]
    assert served.requests[0] == {
        "model": "claude-test",
        "max_tokens": 4096,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hello."}]}],
        "tools": [
            {
                "name": "lookup",
                "description": "Look something up.",
                "input_schema": {"type": "object"},
            }
        ],
        "stream": True,
    }
    assert [c["chunk"] for c in logged(session, "assistant/chunk")] == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "Hel"},
        {"type": "text-delta", "index": 0, "text": "lo."},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Hello."}},
        {"type": "usage", "usage": {"inputTokens": 12, "outputTokens": 3, "cacheReadTokens": 8}},
        {
            "type": "finish",
            "reason": {"kind": "stop"},
            # (the provider's own id and finish reason, which traces report)
            "replayState": {
                "provider": "anthropic",
                "response": {"id": "msg_1", "finishReason": "end_turn"},
            },
        },
    ]


async def test_thinking_and_tool_uses_run_and_the_signature_goes_back_verbatim() -> None:
    thinking = [
        ev(
            "content_block_start",
            index=0,
            content_block={"type": "thinking", "thinking": "", "signature": ""},
        ),
        ev(
            "content_block_delta",
            index=0,
            delta={"type": "thinking_delta", "thinking": "Two lookups."},
        ),
        ev(
            "content_block_delta",
            index=0,
            delta={"type": "signature_delta", "signature": "EqQBCgIYAhIM"},
        ),
        ev("content_block_stop", index=0),
        ev(
            "content_block_start",
            index=1,
            content_block={"type": "redacted_thinking", "data": "EmwKAhgBEgy"},
        ),
        ev("content_block_stop", index=1),
    ]
    first = [
        start(),
        *thinking,
        *tool_use(2, "toolu_a", '{"q": ', '"x"}'),
        *tool_use(3, "toolu_b", '{"q": "y"}'),
        *end("tool_use", 30),
    ]
    served = Served(
        [
            Reply(first, done=False),
            Reply([start(), *text(0, "x and y."), *end("end_turn", 4)], done=False),
        ]
    )
    session, agent, ran = stack(served)
    assert await agent.run_turn("Find x and y.") == {"kind": "completed"}
    assert ran == ["lookup:toolu_a", "lookup:toolu_b"]
    message = logged(session, "assistant/message")[0]["message"]
    assert message["content"] == [
        {"type": "reasoning", "text": "Two lookups."},
        {"type": "tool-call", "id": "toolu_a", "name": "lookup", "arguments": '{"q": "x"}'},
        {"type": "tool-call", "id": "toolu_b", "name": "lookup", "arguments": '{"q": "y"}'},
    ]
    replayed = [
        {"type": "thinking", "thinking": "Two lookups.", "signature": "EqQBCgIYAhIM"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy"},
    ]
    assert message["source"]["replayState"] == {
        "provider": "anthropic",
        "blocks": replayed,
        "response": {"id": "msg_1", "finishReason": "tool_use"},
    }
    assert served.requests[1]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Find x and y."}]},
        {
            "role": "assistant",
            "content": [
                *replayed,
                {"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {"q": "x"}},
                {"type": "tool_use", "id": "toolu_b", "name": "lookup", "input": {"q": "y"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_a",
                    "content": [{"type": "text", "text": "found x"}],
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": [{"type": "text", "text": "found y"}],
                    "is_error": False,
                },
            ],
        },
    ]


async def test_a_tool_use_without_input_is_an_empty_object() -> None:
    served = Served(
        [
            Reply([start(), *tool_use(0, "toolu_a"), *end("tool_use", 5)], done=False),
            Reply([start(), *text(0, "Ok."), *end("end_turn", 1)], done=False),
        ]
    )
    session, agent, _ = stack(served)
    await agent.run_turn("Go.")
    [call] = logged(session, "tool/call")
    assert call["arguments"] == "{}"


async def test_max_tokens_is_max_tokens_and_its_half_call_never_runs() -> None:
    served = Served(
        [Reply([start(), *tool_use(0, "toolu_a", '{"q"'), *end("max_tokens", 50)], done=False)]
    )
    _session, agent, ran = stack(served)
    assert await agent.run_turn("Go.") == {"kind": "max-tokens"}
    assert ran == []


async def test_a_mid_stream_error_ends_the_step_without_a_retry() -> None:
    broken = [
        start(),
        *text(0, "Half")[:2],
        (
            "error",
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ),
    ]
    served = Served([Reply(broken, done=False)])
    session, agent, _ = stack(served)
    reason = await agent.run_turn("Go.")
    assert reason["kind"] == "error"
    assert len(served.requests) == 1
    assert logged(session, "assistant/message") == []


async def test_an_overloaded_529_then_success_is_retried_and_recorded() -> None:
    overloaded = Reply(
        status=529,
        body={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        headers={"request-id": "req_9"},
    )
    served = Served(
        [overloaded, Reply([start(), *text(0, "Ok."), *end("end_turn", 1)], done=False)]
    )
    session, agent, _ = stack(served)
    assert await agent.run_turn("Go.") == {"kind": "completed"}
    [retry] = logged(session, "llm/retry")
    assert retry["policyKey"] == "server-error"
    assert retry["failure"] == {
        "message": "overloaded_error: Overloaded",
        "code": "SERVER_ERROR",
        "status": 529,
        "requestId": "req_9",
    }


async def test_a_bad_request_is_not_retried_and_names_the_provider_s_error() -> None:
    bad = Reply(
        status=400,
        body={
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "messages: roles must alternate"},
        },
    )
    served = Served([bad])
    _session, agent, _ = stack(served)
    reason = await agent.run_turn("Go.")
    assert reason["error"]["code"] == "BAD_REQUEST"
    assert reason["error"]["message"] == "invalid_request_error: messages: roles must alternate"
    assert len(served.requests) == 1


def test_a_missing_key_says_which_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        AnthropicModel()


async def test_the_trace_names_the_provider_s_response_id_and_finish_reason() -> None:
    """The chat span of a turn run against the real client says what Anthropic said: its
    message id and its own stop reason, not the log's message id nor the reference's kind."""
    from agent_session.otel.spans import turn_traces

    served = Served([Reply([start(), *text(0, "Hi."), *end("end_turn", 2)], done=False)])
    session, agent, _ = stack(served)
    await agent.run_turn("Say hi.")
    (trace,) = turn_traces("s", 1, session.events)
    (chat,) = [span for span in trace.spans if span.kind == "CLIENT"]
    assert chat.attributes["gen_ai.response.id"] == "msg_1"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
    (answer,) = logged(session, "assistant/message")
    assert chat.attributes["agent_session.message.id"] == answer["message"]["id"] != "msg_1"
