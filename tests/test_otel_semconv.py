"""The traces are checked against the GenAI semantic conventions of the pinned
``opentelemetry-semantic-conventions`` (the test extra's version): every ``gen_ai.*``
attribute a span or span event carries is one the conventions define (``gen_ai.usage.cost``
aside, which they do not define: ``docs/traces.md`` says why it is there), operation names
and finish reasons are the conventions' values, and a request's settings from the log's
header become the conventions' request attributes: from the project's loop over the
Anthropic adapter and from a Google ADK run, whose spans name the agent and the model."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anthropic
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.genai import types
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as conventions

from agent_session import AgentRuntime, JsonlPersistence, checkpoint_policy
from agent_session.integrations.google_adk import EventLogSessionService
from agent_session.integrations.google_adk.mapping import log_id
from agent_session.otel.genai_messages import FINISH_REASONS
from agent_session.otel.spans import SpanRecord, turn_traces
from agent_session.providers import AnthropicModel
from agent_session.see.prices import read_prices
from agent_session.stores import parse_store
from tests.adk_kit import APP, SCRIPT, Scripted, add, say
from tests.providers import Reply, Served
from tests.test_cli import cli
from tests.test_provider_anthropic import end, start, text

PINNED = "0.65b0"
"""The conventions' version the test extra pins (``pyproject.toml``)."""
DEFINED = {
    value
    for name, value in vars(conventions).items()
    if name.isupper() and isinstance(value, str) and value.startswith("gen_ai.")
}
BEYOND = {"gen_ai.usage.cost"}
"""What the spans carry that the conventions do not define (cost-aware backends read it)."""


async def _events(store: str, id: str) -> list[Any]:
    backend = parse_store(store).open()
    try:
        return list((await backend.inspect(id)).events)
    finally:
        await backend.aclose()


def _spans(id: str, events: list[Any], **options: Any) -> list[SpanRecord]:
    return [span for trace in turn_traces(id, 1, events, **options) for span in trace.spans]


def _named(spans: list[SpanRecord]) -> set[str]:
    names = {key for span in spans for key in span.attributes}
    names |= {key for span in spans for _, _, said in span.events for key in said}
    return {name for name in names if name.startswith("gen_ai.")}


def test_the_pinned_conventions_are_the_ones_installed() -> None:
    assert version("opentelemetry-semantic-conventions") == PINNED
    assert "gen_ai.request.temperature" in DEFINED  # (the module read is the right one)


async def test_every_gen_ai_attribute_of_a_crashed_priced_full_trace_is_defined(
    tmp_path: Path,
) -> None:
    store = str(tmp_path / "s")
    cli("demo", "--store", store, "--session-id", "c", "--crash", "tool")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"currency": "USD", "models": {"scripted-*": {"input": 3}}}))
    spans = _spans("c", await _events(store, "c"), content="full", prices=read_prices(prices))
    named = _named(spans)
    assert "gen_ai.input.messages" in named  # (what full content and prices add is there)
    assert "gen_ai.usage.cost" in named
    assert named - BEYOND <= DEFINED, sorted(named - BEYOND - DEFINED)
    operations = {span.attributes["gen_ai.operation.name"] for span in spans}
    assert operations == {"invoke_agent", "chat", "execute_tool"}
    assert operations <= {v.value for v in conventions.GenAiOperationNameValues}


def test_the_finish_reasons_are_the_conventions_values() -> None:
    # (the conventions' finish reasons: stop, length, content_filter, tool_call, error)
    assert set(FINISH_REASONS.values()) <= {
        "stop",
        "length",
        "content_filter",
        "tool_call",
        "error",
    }


async def test_the_header_s_settings_are_the_request_attributes(tmp_path: Path) -> None:
    served = Served([Reply([start(), *text(0, "Hi."), *end("end_turn", 2)], done=False)])
    client = anthropic.AsyncAnthropic(
        api_key="sk-ant-test", base_url="http://provider", http_client=served.client()
    )
    extra = {"temperature": 0.2, "stop_sequences": ["END"], "top_k": 5, "seed": 3}
    async with AgentRuntime() as runtime:
        runtime.install(JsonlPersistence(tmp_path))
        runtime.install(checkpoint_policy)
        runtime.models.register(
            "anthropic", AnthropicModel(client, max_tokens=512, extra_body=extra)
        )
        session = runtime.sessions.create("s")
        await runtime.agent(session, model="anthropic/claude-test").run_turn("Hi.")
    [chat] = [s for s in _spans("s", await _events(str(tmp_path), "s")) if s.kind == "CLIENT"]
    assert {k: v for k, v in chat.attributes.items() if k.startswith("gen_ai.request.")} == {
        "gen_ai.request.model": "claude-test",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 512,
        "gen_ai.request.stop_sequences": ["END"],
        "gen_ai.request.top_k": 5,
        "gen_ai.request.seed": 3,
    }
    assert chat.attributes["gen_ai.provider.name"] == "anthropic"
    assert chat.attributes["gen_ai.provider.name"] in {
        v.value for v in conventions.GenAiProviderNameValues
    }


async def test_an_adk_run_s_spans_name_its_agent_and_its_model(tmp_path: Path) -> None:
    config = types.GenerateContentConfig(temperature=0.1, max_output_tokens=300)
    agent = LlmAgent(
        name="calc",
        model=Scripted(script=list(SCRIPT), requests=[]),
        tools=[add],
        generate_content_config=config,
    )
    async with EventLogSessionService(tmp_path) as service:
        app = App(name=APP, root_agent=agent, plugins=[service.request_recorder()])
        await service.create_session(app_name=APP, user_id="u", session_id="s1")
        await say(Runner(app=app, session_service=service), "u", "s1", "Add 1+2 and 3+4.")
    id = log_id(APP, "u", "s1")
    spans = _spans(id, await _events(str(tmp_path), id))
    [turn] = [s for s in spans if s.name == "invoke_agent"]
    assert turn.attributes["gen_ai.agent.name"] == "calc"
    chats = [s for s in spans if s.kind == "CLIENT"]
    assert [s.name for s in chats] == ["chat scripted", "chat scripted"]
    for chat in chats:
        assert chat.attributes["gen_ai.request.model"] == "scripted"
        assert chat.attributes["gen_ai.request.temperature"] == 0.1
        assert chat.attributes["gen_ai.request.max_tokens"] == 300
        assert "gen_ai.response.model" not in chat.attributes  # (ADK names its agent there)
    assert _named(spans) <= DEFINED
