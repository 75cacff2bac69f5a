"""The OpenAI Chat Completions adapter with the real ``openai`` client over recorded SSE
streams (the API's documented chunk shapes): the exact events the loop logs and the exact
request bodies sent, for text, reasoning, one and parallel tool calls, a refusal, a length
stop, a content filter, a mid-stream error, a 429 with ``Retry-After`` and a 500 then
success."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from agent_session.agent_loop import AgentRuntime
from agent_session.providers import OpenAIChatModel
from tests.providers import Reply, Served

SYSTEM = "Be brief."


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> Any:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return (
        None,
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-test",
            "choices": choices,
            **extra,
        },
    )


def usage(prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> Any:
    return chunk(
        usage={
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        }
    )


def call(index: int, id: str | None, name: str | None, arguments: str) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments}
    if name:
        function["name"] = name
    entry: dict[str, Any] = {"index": index, "function": function}
    if id:
        entry |= {"id": id, "type": "function"}
    return entry


def stack(served: Served, **options: Any) -> tuple[AgentRuntime, Any, Any, list[str]]:
    runtime = AgentRuntime()
    client = openai.AsyncOpenAI(
        api_key="sk-test", base_url="http://provider/v1", http_client=served.client()
    )
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    runtime.models.register("openai", OpenAIChatModel(client, sleep=sleep, **options))
    ran: list[str] = []

    @runtime.tools.tool(description="Look something up.")
    async def lookup(args: Any, call: Any) -> str:
        ran.append(f"lookup:{call.call_id}")
        return f"found {args['q']}"

    session = runtime.sessions.create("s")
    agent = runtime.agent(session, model="openai/gpt-test", system=SYSTEM)
    return runtime, session, agent, ran


def logged(session: Any, *types: str) -> list[Any]:
    return [e.data for e in session.events if e.type in types]


def shape(session: Any) -> list[str]:
    out: list[str] = []
    for event in session.events:
        name = event.type
        if name == "assistant/chunk":
            name = f"chunk:{event.data['chunk']['type']}"
        out.append(name)
    return out


async def test_text_with_usage_is_one_answer_and_the_request_is_the_surface() -> None:
    served = Served(
        [
            Reply(
                [
                    chunk({"role": "assistant", "content": "Hel"}),
                    chunk({"content": "lo."}, "stop"),
                    usage(12, 3, cached=8),
                ]
            )
        ]
    )
    _, session, agent, _ = stack(served)
    assert await agent.run_turn("Say hello.") == {"kind": "completed"}
    assert served.paths == ["/v1/chat/completions"]
    assert served.requests[0] == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Say hello."},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "description": "Look something up.",
                    "parameters": {"type": "object"},
                },
            }
        ],
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
                "provider": "openai-chat",
                "response": {"id": "chatcmpl-1", "finishReason": "stop"},
            },
        },
    ]
    [answer] = logged(session, "assistant/message")
    assert answer["message"]["content"] == [{"type": "text", "text": "Hello."}]
    assert answer["usage"] == {"inputTokens": 12, "outputTokens": 3, "cacheReadTokens": 8}


async def test_reasoning_then_text_are_two_blocks() -> None:
    served = Served(
        [
            Reply(
                [
                    chunk({"role": "assistant", "reasoning_content": "Think"}),
                    chunk({"reasoning_content": "ing."}),
                    chunk({"content": "Done."}, "stop"),
                    usage(5, 9, reasoning=4),
                ]
            )
        ]
    )
    _, session, agent, _ = stack(served)
    await agent.run_turn("Go.")
    [answer] = logged(session, "assistant/message")
    assert answer["message"]["content"] == [
        {"type": "reasoning", "text": "Thinking."},
        {"type": "text", "text": "Done."},
    ]
    assert answer["usage"]["reasoningTokens"] == 4


async def test_parallel_tool_calls_interleaved_run_and_the_second_request_carries_results() -> None:
    served = Served(
        [
            Reply(
                [
                    chunk({"role": "assistant", "tool_calls": [call(0, "call_a", "lookup", "")]}),
                    chunk({"tool_calls": [call(1, "call_b", "lookup", '{"q":')]}),
                    chunk({"tool_calls": [call(0, None, None, '{"q": "x"}')]}),
                    chunk({"tool_calls": [call(1, None, None, ' "y"}')]}, "tool_calls"),
                    usage(20, 10),
                ]
            ),
            Reply([chunk({"content": "x and y."}, "stop"), usage(40, 4)]),
        ]
    )
    _, session, agent, ran = stack(served)
    assert await agent.run_turn("Find x and y.") == {"kind": "completed"}
    assert ran == ["lookup:call_a", "lookup:call_b"]
    first = logged(session, "assistant/message")[0]["message"]["content"]
    assert first == [
        {"type": "tool-call", "id": "call_a", "name": "lookup", "arguments": '{"q": "x"}'},
        {"type": "tool-call", "id": "call_b", "name": "lookup", "arguments": '{"q": "y"}'},
    ]
    assert [d["callId"] for d in logged(session, "tool/call")] == ["call_a", "call_b"]
    assert served.requests[1]["messages"][1:] == [
        {"role": "user", "content": "Find x and y."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q": "x"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q": "y"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "found x"},
        {"role": "tool", "tool_call_id": "call_b", "content": "found y"},
    ]


async def test_a_refusal_is_what_the_model_said() -> None:
    served = Served([Reply([chunk({"role": "assistant", "refusal": "I can't help."}, "stop")])])
    _, session, agent, _ = stack(served)
    await agent.run_turn("Do harm.")
    [answer] = logged(session, "assistant/message")
    assert answer["message"]["content"] == [{"type": "text", "text": "I can't help."}]


async def test_a_length_stop_is_max_tokens_and_its_half_call_never_runs() -> None:
    served = Served(
        [
            Reply(
                [
                    chunk(
                        {"role": "assistant", "tool_calls": [call(0, "call_a", "lookup", '{"q"')]},
                        "length",
                    )
                ]
            )
        ]
    )
    _, session, agent, ran = stack(served)
    assert await agent.run_turn("Go.") == {"kind": "max-tokens"}
    assert ran == []
    assert logged(session, "tool/call") == []


async def test_a_content_filter_ends_the_turn_with_its_error() -> None:
    served = Served([Reply([chunk({"role": "assistant", "content": "Par"}, "content_filter")])])
    _, _session, agent, _ = stack(served)
    reason = await agent.run_turn("Go.")
    assert reason["kind"] == "error"
    assert reason["error"]["code"] == "CONTENT_FILTER"


async def test_a_mid_stream_error_ends_the_step_without_a_second_message() -> None:
    broken = Reply(
        [
            chunk({"role": "assistant", "content": "Half"}),
            (None, {"error": {"message": "upstream reset", "type": "server_error"}}),
        ]
    )
    served = Served([broken, Reply([chunk({"content": "never"}, "stop")])])
    _, session, agent, _ = stack(served)
    reason = await agent.run_turn("Go.")
    assert reason["kind"] == "error"
    assert len(served.requests) == 1  # output had streamed: never retried
    assert logged(session, "assistant/message") == []
    assert logged(session, "llm/retry") == []


async def test_a_429_with_retry_after_then_success_is_recorded_and_waited() -> None:
    limited = Reply(
        status=429,
        body={
            "error": {
                "message": "Rate limit reached",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        },
        headers={"retry-after": "2", "x-request-id": "req_1"},
    )
    served = Served([limited, Reply([chunk({"role": "assistant", "content": "Ok."}, "stop")])])
    _runtime, session, agent, _ = stack(served)
    assert await agent.run_turn("Go.") == {"kind": "completed"}
    assert len(served.requests) == 2
    assert served.requests[0] == served.requests[1]
    [retry] = logged(session, "llm/retry")
    assert retry == {
        "retryId": retry["retryId"],
        "turn": 1,
        "step": 1,
        "provider": "openai",
        "mode": "stream",
        "policyKey": "rate-limit",
        "retry": 1,
        "maxRetries": 3,
        "delayMs": 2000,
        "failure": {
            "message": "requests: Rate limit reached",
            "code": "RATE_LIMITED",
            "status": 429,
            "providerRetryAfterMs": 2000,
            "requestId": "req_1",
        },
    }
    [started] = logged(session, "llm/retry-started")
    assert started == {"retryId": retry["retryId"], "turn": 1, "step": 1, "retry": 1}
    types = shape(session)
    assert (
        types.index("llm/retry")
        < types.index("llm/retry-started")
        < types.index("chunk:block-start")
    )


async def test_a_500_then_success_backs_off_and_a_401_is_not_retried() -> None:
    failing = Reply(status=500, body={"error": {"message": "boom", "type": "server_error"}})
    served = Served(
        [failing, failing, Reply([chunk({"role": "assistant", "content": "Ok."}, "stop")])]
    )
    _, session, agent, _ = stack(served)
    assert await agent.run_turn("Go.") == {"kind": "completed"}
    assert [r["policyKey"] for r in logged(session, "llm/retry")] == [
        "server-error",
        "server-error",
    ]

    denied = Reply(
        status=401,
        body={
            "error": {
                "message": "Incorrect API key provided: sk-te****",
                "type": "invalid_request_error",
            }
        },
    )
    served = Served([denied])
    _, session, agent, _ = stack(served)
    reason = await agent.run_turn("Go.")
    assert reason["kind"] == "error"
    assert reason["error"]["code"] == "UNAUTHORIZED"
    assert reason["error"]["status"] == 401
    assert "sk-test" not in str(reason)
    assert len(served.requests) == 1


async def test_retries_stop_at_the_limit_with_the_last_failure() -> None:
    failing = Reply(status=503, body={"error": {"message": "overloaded"}})
    served = Served([failing, failing])
    _, _session, agent, _ = stack(served, max_retries=1)
    reason = await agent.run_turn("Go.")
    assert reason["kind"] == "error"
    assert reason["error"]["code"] == "SERVER_ERROR"
    assert len(served.requests) == 2


def test_a_missing_key_says_which_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIChatModel()


async def test_a_timeout_then_success_is_retried_as_a_dropped_connection() -> None:
    served = Served(
        [Reply(drop=True), Reply([chunk({"role": "assistant", "content": "Ok."}, "stop")])]
    )
    _, session, agent, _ = stack(served, timeout=5)
    assert await agent.run_turn("Go.") == {"kind": "completed"}
    [retry] = logged(session, "llm/retry")
    assert retry["policyKey"] == "network"
    assert retry["failure"]["code"] == "NETWORK"


async def test_the_log_is_durable_before_every_attempt() -> None:
    """When the second attempt reaches the provider, the stored log already holds the
    request's step and both retry events (the checkpoint policy and the loop's flushes)."""
    from agent_session import MemoryPersistence, MemoryStore, checkpoint_policy
    from agent_session.recovery import closers

    store = MemoryStore()
    seen: list[list[str]] = []

    class Watching(Served):
        def handle(self, request: Any) -> Any:
            log = store.logs.get("s")
            seen.append([] if log is None else [json.loads(line)["type"] for line in log.lines])
            return super().handle(request)

    failing = Reply(status=503, body={"error": {"message": "busy"}})
    served = Watching([failing, Reply([chunk({"role": "assistant", "content": "Ok."}, "stop")])])
    runtime = AgentRuntime()
    runtime.install(MemoryPersistence(store, repair=closers))
    runtime.install(checkpoint_policy)
    client = openai.AsyncOpenAI(
        api_key="k", base_url="http://provider/v1", http_client=served.client()
    )

    async def sleep(seconds: float) -> None:
        return None

    runtime.models.register("openai", OpenAIChatModel(client, sleep=sleep))
    session = runtime.sessions.create("s")
    assert await runtime.agent(session, model="openai/m").run_turn("Go.") == {"kind": "completed"}
    await runtime.__aexit__(None, None, None)
    first, second = seen
    assert first[-1] == "request/context"  # the step, durable before the first attempt
    assert second[-2:] == ["llm/retry", "llm/retry-started"]  # and the retry before the next


def test_a_missing_extra_names_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from agent_session.providers import AnthropicModel

    monkeypatch.setitem(sys.modules, "openai", None)
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ImportError, match=r"pip install 'agent-session-runtime\[openai\]'"):
        OpenAIChatModel()
    with pytest.raises(ImportError, match=r"pip install 'agent-session-runtime\[anthropic\]'"):
        AnthropicModel()
