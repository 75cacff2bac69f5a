"""What each model request of a Google ADK run was sent is read back from the log
(``logged_requests``) as the model received it (the tests' ``BaseLlm`` keeps every
``LlmRequest``), once the service's request recorder is one of the runner's plugins: the
system instruction ADK built, the function declarations, the model and its config, and every
content of the history, in order, across a tool step and a second turn. The client's
``http_options`` (whose headers may carry a key) are never written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.genai import types

from agent_session import logged_requests
from agent_session.integrations.google_adk import EventLogSessionService
from agent_session.integrations.google_adk.mapping import META, log_id
from agent_session.stores import parse_store
from tests.adk_kit import APP, SCRIPT, Scripted, add, say
from tests.test_reference_interop import reference_load

SECRET = "AIza-never-in-the-log"


def _sent(content: Any) -> Any:
    """A content as ADK sends it: without the call ids it made up itself (``adk-...``)."""
    if isinstance(content, dict):
        return {
            k: _sent(v)
            for k, v in content.items()
            if not (k == "id" and isinstance(v, str) and v.startswith("adk-"))
        }
    if isinstance(content, list):
        return [_sent(v) for v in content]
    return content


async def test_every_model_request_is_read_back_as_the_model_received_it(tmp_path: Path) -> None:
    config = types.GenerateContentConfig(
        temperature=0.1,
        max_output_tokens=300,
        stop_sequences=["DONE"],
        http_options=types.HttpOptions(headers={"x-goog-api-key": SECRET}),
    )
    model = Scripted(script=list(SCRIPT), requests=[])
    agent = LlmAgent(
        name="calc", model=model, tools=[add], instruction="Add.", generate_content_config=config
    )
    async with EventLogSessionService(tmp_path) as service:
        app = App(name=APP, root_agent=agent, plugins=[service.request_recorder()])
        run = Runner(app=app, session_service=service)
        await service.create_session(app_name=APP, user_id="u", session_id="s1")
        await say(run, "u", "s1", "Add 1+2 and 3+4.")
        await say(run, "u", "s1", "Thanks.")
    backend = parse_store(str(tmp_path)).open()
    try:
        events = list((await backend.inspect(log_id(APP, "u", "s1"))).events)
    finally:
        await backend.aclose()
    read = logged_requests(events)
    assert len(read) == len(model.requests) == 3
    for request, sent in zip(read, model.requests, strict=True):
        assert sent.config is not None
        assert request.system == sent.config.system_instruction
        assert request.config["model"] == sent.model == "scripted"
        assert request.config["temperature"] == 0.1
        assert request.config["maxTokens"] == 300
        assert request.config["stop"] == ["DONE"]
        declared = [d.name for t in sent.config.tools or () for d in t.function_declarations or ()]
        assert [t["name"] for t in request.tools] == declared == ["add"]
        contents = [
            json.loads(e).get("content") for m in request.messages for e in m[META]["events"]
        ]
        assert _sent(contents) == [
            c.model_dump(exclude_none=True, mode="json") for c in sent.contents
        ]
    headers = [e.data for e in events if e.type == "request/header"]
    assert [h["reason"] for h in headers] == ["initial"]  # (one header served all three)
    raw = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert SECRET.encode() not in raw
    loaded = reference_load(tmp_path, log_id(APP, "u", "s1"), "none")
    assert "error" not in loaded, loaded
    assert [e["type"] for e in loaded["events"]] == [e.type for e in events]


async def test_without_the_recorder_nothing_is_said_of_the_request(tmp_path: Path) -> None:
    model = Scripted(script=list(SCRIPT[1:2]), requests=[])
    async with EventLogSessionService(tmp_path) as service:
        run = Runner(
            app_name=APP, agent=LlmAgent(name="calc", model=model), session_service=service
        )
        await service.create_session(app_name=APP, user_id="u", session_id="s1")
        await say(run, "u", "s1", "Hi.")
    backend = parse_store(str(tmp_path)).open()
    try:
        events = list((await backend.inspect(log_id(APP, "u", "s1"))).events)
    finally:
        await backend.aclose()
    assert "request/header" not in [e.type for e in events]
    [request] = logged_requests(events)
    assert request.system is None
    assert dict(request.config) == {}
