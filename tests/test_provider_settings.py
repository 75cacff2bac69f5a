"""What each provider adapter sends with every request is in the log's request header, so a
request rebuilt from the log alone and mapped again by the adapter's own request function is,
field for field, the HTTP body the provider was sent (captured at the SDK's transport): the
system prompt, the tools, the history and the settings (``max_tokens``, ``temperature``, stop
sequences and any other ``extra_body`` field). The header names the adapter's mapping and the
settings it chose itself, and the reference loads such a log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from agent_session import (
    AgentRuntime,
    JsonlPersistence,
    ModelRequest,
    RequestSettings,
    checkpoint_policy,
    logged_requests,
)
from agent_session.providers import (
    AnthropicModel,
    OpenAIChatModel,
    OpenAIResponsesModel,
    chat_request,
    messages_request,
    responses_request,
)
from agent_session.session.json.lossless import thaw
from tests.providers import Reply, Served
from tests.test_provider_anthropic import end, start, text, tool_use
from tests.test_provider_openai_chat import call, chunk, usage
from tests.test_provider_openai_responses import completed, counts, message
from tests.test_reference_interop import reference_load

SYSTEM = "Be brief."


def _agent(root: Path, provider: str, adapter: Any) -> tuple[AgentRuntime, Any, Any]:
    runtime = AgentRuntime()
    runtime.install(JsonlPersistence(root))
    runtime.install(checkpoint_policy)
    runtime.models.register(provider, adapter)

    @runtime.tools.tool(description="Look something up.")
    async def lookup(args: Any, call: Any) -> str:
        return f"found {args['q']}"

    session = runtime.sessions.create("s")
    return runtime, session, runtime.agent(session, model=f"{provider}/m-1", system=SYSTEM)


def _rebuilt(events: Any) -> list[tuple[ModelRequest, dict[str, Any]]]:
    """Each request as the log alone says it: the request, and the header's config."""
    return [
        (
            ModelRequest(
                str(r.config["provider"]),
                str(r.config["model"]),
                r.messages,
                r.system,
                r.tools,
            ),
            thaw(dict(r.config)),
        )
        for r in logged_requests(events)
    ]


async def _no_sleep(seconds: float) -> None:
    return None


async def test_anthropic_requests_rebuilt_from_the_log_are_the_bodies_sent(
    tmp_path: Path,
) -> None:
    served = Served(
        [
            Reply(
                [start(), *tool_use(0, "toolu_a", '{"q": "x"}'), *end("tool_use", 5)], done=False
            ),
            Reply([start(), *text(0, "x."), *end("end_turn", 2)], done=False),
        ]
    )
    client = anthropic.AsyncAnthropic(
        api_key="sk-ant-test", base_url="http://provider", http_client=served.client()
    )
    extra = {"temperature": 0.2, "stop_sequences": ["\n\nEND"], "top_k": 5}
    adapter = AnthropicModel(client, max_tokens=512, extra_body=extra, sleep=_no_sleep)
    runtime, session, agent = _agent(tmp_path, "anthropic", adapter)
    async with runtime:
        assert await agent.run_turn("Find x.") == {"kind": "completed"}
        events = list(session.events)
    rebuilt = _rebuilt(events)
    assert len(rebuilt) == len(served.requests) == 2
    for (request, config), sent in zip(rebuilt, served.requests, strict=True):
        assert config == {
            "provider": "anthropic",
            "model": "m-1",
            "temperature": 0.2,
            "maxTokens": 512,
            "stop": ["\n\nEND"],
            "adapter": "anthropic-messages/1",
            "extraBody": {"top_k": 5},
        }
        settings = {
            "max_tokens": config["maxTokens"],
            "temperature": config["temperature"],
            "stop_sequences": config["stop"],
            **config["extraBody"],
        }
        assert messages_request(request, config["maxTokens"], settings) == sent
    headers = [e.data for e in events if e.type == "request/header"]
    assert [h["reason"] for h in headers] == ["initial"]  # (unchanged: logged once)
    assert "adapterDefaults" not in headers[0]["header"]
    loaded = reference_load(tmp_path, "s", "none")
    assert "error" not in loaded, loaded
    assert [e["type"] for e in loaded["events"]] == [e.type for e in events]


async def test_a_max_tokens_the_adapter_chose_is_marked_as_its_default(tmp_path: Path) -> None:
    served = Served([Reply([start(), *text(0, "Hi."), *end("end_turn", 2)], done=False)])
    client = anthropic.AsyncAnthropic(
        api_key="sk-ant-test", base_url="http://provider", http_client=served.client()
    )
    runtime, session, agent = _agent(tmp_path, "anthropic", AnthropicModel(client))
    async with runtime:
        await agent.run_turn("Hi.")
        header = next(e.data for e in session.events if e.type == "request/header")["header"]
    assert served.requests[0]["max_tokens"] == header["config"]["maxTokens"] == 4096
    assert header["adapterDefaults"] == {"maxTokens": True}
    loaded = reference_load(tmp_path, "s", "none")  # (the reference checks adapterDefaults)
    assert "error" not in loaded, loaded


async def test_openai_chat_requests_rebuilt_from_the_log_are_the_bodies_sent(
    tmp_path: Path,
) -> None:
    served = Served(
        [
            Reply(
                [
                    chunk({"role": "assistant", "tool_calls": [call(0, "call_a", "lookup", "")]}),
                    chunk({"tool_calls": [call(0, None, None, '{"q": "x"}')]}, "tool_calls"),
                    usage(20, 10),
                ]
            ),
            Reply([chunk({"content": "x."}, "stop"), usage(40, 4)]),
        ]
    )
    client = openai.AsyncOpenAI(
        api_key="sk-test", base_url="http://provider/v1", http_client=served.client()
    )
    extra = {"max_completion_tokens": 300, "reasoning_effort": "low", "seed": 7}
    adapter = OpenAIChatModel(client, extra_body=extra, sleep=_no_sleep)
    runtime, session, agent = _agent(tmp_path, "openai", adapter)
    async with runtime:
        assert await agent.run_turn("Find x.") == {"kind": "completed"}
        events = list(session.events)
    rebuilt = _rebuilt(events)
    assert len(rebuilt) == len(served.requests) == 2
    for (request, config), sent in zip(rebuilt, served.requests, strict=True):
        assert config == {
            "provider": "openai",
            "model": "m-1",
            "maxTokens": 300,
            "reasoningEffort": "low",
            "adapter": "openai-chat-completions/1",
            "extraBody": {"seed": 7},
        }
        settings = {
            "max_completion_tokens": config["maxTokens"],
            "reasoning_effort": config["reasoningEffort"],
            **config["extraBody"],
        }
        assert {**chat_request(request), **settings} == sent


async def test_openai_responses_requests_rebuilt_from_the_log_are_the_bodies_sent(
    tmp_path: Path,
) -> None:
    served = Served([Reply([*message(0, "Hi."), completed([], counts(9, 2))], done=False)])
    client = openai.AsyncOpenAI(
        api_key="sk-test", base_url="http://provider/v1", http_client=served.client()
    )
    extra = {"max_output_tokens": 64, "reasoning": {"effort": "low"}}
    adapter = OpenAIResponsesModel(client, extra_body=extra, sleep=_no_sleep)
    runtime, session, agent = _agent(tmp_path, "openai", adapter)
    async with runtime:
        await agent.run_turn("Hi.")
        events = list(session.events)
    [(request, config)] = _rebuilt(events)
    assert config["adapter"] == "openai-responses/1"
    assert config["maxTokens"] == 64
    assert config["extraBody"] == {"reasoning": {"effort": "low"}}
    sent = {**responses_request(request), "max_output_tokens": 64, **config["extraBody"]}
    assert sent == served.requests[0]


def test_settings_refuse_what_the_loop_names_and_defaults_that_are_not_fields() -> None:
    with pytest.raises(ValueError, match="cannot name model, provider"):
        RequestSettings({"provider": "x", "model": "y"})
    with pytest.raises(ValueError, match="not maxTokens"):
        RequestSettings({"temperature": 1}, frozenset({"maxTokens"}))
    with pytest.raises(ValueError, match="not temperature"):
        RequestSettings({"temperature": 1}, frozenset({"temperature"}))
