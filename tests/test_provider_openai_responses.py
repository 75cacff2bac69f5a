"""The OpenAI Responses adapter with the real ``openai`` client over recorded SSE streams (the
API's documented event shapes): the exact events the loop logs and the exact request bodies,
for text, encrypted reasoning carried back verbatim with two parallel function calls, an
incomplete (max output tokens) answer, a failed response, and a 429 then success."""

from __future__ import annotations

from typing import Any

import openai

from agent_session.agent_loop import AgentRuntime
from agent_session.providers import OpenAIResponsesModel
from tests.providers import Reply, Served

SYSTEM = "Be brief."
_seq = iter(range(10**6))


def ev(name: str, **data: Any) -> tuple[str, Any]:
    return name, {"type": name, "sequence_number": next(_seq), **data}


def response(
    status: str, output: list[Any], usage: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    out = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": status,
        "model": "gpt-test",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        **extra,
    }
    if usage is not None:
        out["usage"] = usage
    return out


def counts(input: int, output: int, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input + output,
    }


def message(index: int, *pieces: str) -> list[tuple[str, Any]]:
    item = {
        "id": f"msg_{index}",
        "type": "message",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    text = "".join(pieces)
    done = {
        **item,
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return [
        ev("response.output_item.added", output_index=index, item=item),
        *[
            ev(
                "response.output_text.delta",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                delta=p,
                logprobs=[],
            )
            for p in pieces
        ],
        ev("response.output_item.done", output_index=index, item=done),
    ]


def function_call(index: int, call_id: str, *pieces: str) -> list[tuple[str, Any]]:
    item = {
        "id": f"fc_{index}",
        "type": "function_call",
        "call_id": call_id,
        "name": "lookup",
        "arguments": "",
        "status": "in_progress",
    }
    done = {**item, "arguments": "".join(pieces), "status": "completed"}
    return [
        ev("response.output_item.added", output_index=index, item=item),
        *[
            ev(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=index,
                delta=p,
            )
            for p in pieces
        ],
        ev("response.output_item.done", output_index=index, item=done),
    ]


REASONING = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Two lookups."}],
    "encrypted_content": "gAAAAABo-opaque",
}


def reasoning(index: int) -> list[tuple[str, Any]]:
    started = {"id": "rs_1", "type": "reasoning", "summary": []}
    return [
        ev("response.output_item.added", output_index=index, item=started),
        ev(
            "response.reasoning_summary_text.delta",
            item_id="rs_1",
            output_index=index,
            summary_index=0,
            delta="Two lookups.",
        ),
        ev("response.output_item.done", output_index=index, item=REASONING),
    ]


def completed(output: list[Any], usage: dict[str, Any]) -> tuple[str, Any]:
    return ev("response.completed", response=response("completed", output, usage))


def stack(served: Served) -> tuple[Any, Any, list[str]]:
    runtime = AgentRuntime()
    client = openai.AsyncOpenAI(
        api_key="sk-test", base_url="http://provider/v1", http_client=served.client()
    )

    async def sleep(seconds: float) -> None:
        return None

    runtime.models.register("openai", OpenAIResponsesModel(client, sleep=sleep))
    ran: list[str] = []

    @runtime.tools.tool(description="Look something up.")
    async def lookup(args: Any, call: Any) -> str:
        ran.append(f"lookup:{call.call_id}")
        return f"found {args['q']}"

    session = runtime.sessions.create("s")
    return session, runtime.agent(session, model="openai/gpt-test", system=SYSTEM), ran


def logged(session: Any, *types: str) -> list[Any]:
    return [e.data for e in session.events if e.type in types]


async def test_text_with_usage_and_the_request_body() -> None:
    served = Served(
        [Reply([*message(0, "Hel", "lo."), completed([], counts(12, 3, cached=8))], done=False)]
    )
    session, agent, _ = stack(served)
    assert await agent.run_turn("Say hello.") == {"kind": "completed"}
    assert served.paths == ["/v1/responses"]
    assert served.requests[0] == {
        "model": "gpt-test",
        "instructions": SYSTEM,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Say hello."}]}],
        "tools": [
            {
                "type": "function",
                "name": "lookup",
                "description": "Look something up.",
                "parameters": {"type": "object"},
            }
        ],
        "stream": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
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
                "provider": "openai-responses",
                "response": {"id": "resp_1", "finishReason": "completed"},
            },
        },
    ]


async def test_reasoning_goes_back_verbatim_with_the_parallel_calls_and_their_outputs() -> None:
    first = [
        *reasoning(0),
        *function_call(1, "call_a", '{"q": ', '"x"}'),
        *function_call(2, "call_b", '{"q": "y"}'),
        completed([], counts(20, 30, reasoning=12)),
    ]
    served = Served(
        [
            Reply(first, done=False),
            Reply([*message(0, "x and y."), completed([], counts(40, 4))], done=False),
        ]
    )
    session, agent, ran = stack(served)
    assert await agent.run_turn("Find x and y.") == {"kind": "completed"}
    assert ran == ["lookup:call_a", "lookup:call_b"]
    answer = logged(session, "assistant/message")[0]
    assert answer["message"]["content"] == [
        {"type": "reasoning", "text": "Two lookups."},
        {"type": "tool-call", "id": "call_a", "name": "lookup", "arguments": '{"q": "x"}'},
        {"type": "tool-call", "id": "call_b", "name": "lookup", "arguments": '{"q": "y"}'},
    ]
    assert answer["usage"]["reasoningTokens"] == 12
    assert served.requests[1]["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "Find x and y."}]},
        REASONING,
        {"type": "function_call", "call_id": "call_a", "name": "lookup", "arguments": '{"q": "x"}'},
        {"type": "function_call", "call_id": "call_b", "name": "lookup", "arguments": '{"q": "y"}'},
        {"type": "function_call_output", "call_id": "call_a", "output": "found x"},
        {"type": "function_call_output", "call_id": "call_b", "output": "found y"},
    ]


async def test_an_incomplete_answer_is_max_tokens_and_a_failed_one_an_error() -> None:
    cut = ev(
        "response.incomplete",
        response=response(
            "incomplete", [], counts(5, 50), incomplete_details={"reason": "max_output_tokens"}
        ),
    )
    served = Served([Reply([*function_call(0, "call_a", '{"q"'), cut], done=False)])
    _, agent, ran = stack(served)
    assert await agent.run_turn("Go.") == {"kind": "max-tokens"}
    assert ran == []

    failed = ev(
        "response.failed",
        response=response(
            "failed", [], None, error={"code": "server_error", "message": "The model failed."}
        ),
    )
    served = Served([Reply([failed], done=False)])
    _session, agent, _ = stack(served)
    reason = await agent.run_turn("Go.")
    assert reason["kind"] == "error"
    assert reason["error"]["message"] == "server_error: The model failed."


async def test_a_429_then_success_is_retried_and_recorded() -> None:
    limited = Reply(
        status=429,
        body={"error": {"message": "Rate limit reached", "type": "requests"}},
        headers={"retry-after-ms": "1500"},
    )
    served = Served([limited, Reply([*message(0, "Ok."), completed([], counts(1, 1))], done=False)])
    session, agent, _ = stack(served)
    assert await agent.run_turn("Go.") == {"kind": "completed"}
    [retry] = logged(session, "llm/retry")
    assert retry["delayMs"] == 1500
    assert retry["failure"]["providerRetryAfterMs"] == 1500


async def test_a_refusal_is_text_and_an_error_event_ends_the_step() -> None:
    item = {
        "id": "msg_0",
        "type": "message",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    refused = [
        ev("response.output_item.added", output_index=0, item=item),
        ev(
            "response.refusal.delta",
            item_id="msg_0",
            output_index=0,
            content_index=0,
            delta="I can't help.",
        ),
        completed([], counts(1, 1)),
    ]
    served = Served([Reply(refused, done=False)])
    session, agent, _ = stack(served)
    await agent.run_turn("Do harm.")
    [answer] = logged(session, "assistant/message")
    assert answer["message"]["content"] == [{"type": "text", "text": "I can't help."}]

    broken = [
        *message(0, "Half")[:2],
        ev("error", code="server_error", message="The stream broke.", param=None),
    ]
    served = Served([Reply(broken, done=False)])
    session, agent, _ = stack(served)
    reason = await agent.run_turn("Go.")
    assert reason["kind"] == "error"
    assert len(served.requests) == 1
    assert logged(session, "assistant/message") == []
