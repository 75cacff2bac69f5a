"""What each model call of an OpenAI Agents SDK run was sent is read back from the log
(``logged_requests``) exactly as the SDK's model received it (the SDK's own ``ScriptedModel``
records its calls): the instructions, the tools and handoffs, the model settings and every
input item, in order, across tool steps, a second run with other instructions, and a
streamed run. A header that may carry a key (``extra_headers``) is never written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import Agent, ModelSettings, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from agent_session import logged_requests
from agent_session.integrations.openai_agents import DurableRunHooks, EventLogSession
from agent_session.integrations.openai_agents.items import META
from agent_session.stores import parse_store
from tests.test_reference_interop import reference_load

SECRET = "Bearer sk-never-in-the-log"


def _agent(model: ScriptedModel, instructions: str) -> Agent[Any]:
    @function_tool
    async def send_email(to: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    helper = Agent(name="helper", instructions="Help.")
    settings = ModelSettings(
        temperature=0.3,
        max_tokens=200,
        extra_body={"seed": 7},
        extra_headers={"Authorization": SECRET},
    )
    return Agent(
        name="mailer",
        model=model,
        instructions=instructions,
        tools=[send_email],
        handoffs=[helper],
        model_settings=settings,
    )


async def _events(root: Path) -> list[Any]:
    backend = parse_store(str(root)).open()
    try:
        return list((await backend.inspect("s")).events)
    finally:
        await backend.aclose()


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_every_model_call_is_read_back_as_the_model_received_it(
    tmp_path: Path, streamed: bool
) -> None:
    model = ScriptedModel(
        [
            [
                assistant_message("Sending.", item_id="msg_1"),
                function_call("send_email", {"to": "a@b.c"}, call_id="call_1"),
            ],
            [assistant_message("Done.", item_id="msg_2")],
            [assistant_message("Again.", item_id="msg_3")],
        ]
    )
    async with await EventLogSession.open(tmp_path, "s") as session:
        hooks = DurableRunHooks(session)
        for text, instructions in (("go", "Be brief."), ("more", "Be briefer.")):
            agent = _agent(model, instructions)
            if streamed:
                result = Runner.run_streamed(agent, text, session=session, hooks=hooks)
                async for _ in result.stream_events():
                    pass
            else:
                await Runner.run(agent, text, session=session, hooks=hooks)
    events = await _events(tmp_path)
    read = logged_requests(events)
    calls = model.calls
    assert len(read) == len(calls) == 3
    for request, call in zip(read, calls, strict=True):
        assert request.system == call.system_instructions
        assert [t["name"] for t in request.tools] == [t.name for t in call.tools] + [
            h.tool_name for h in call.handoffs
        ]
        assert request.config["temperature"] == call.model_settings.temperature
        assert request.config["maxTokens"] == call.model_settings.max_tokens
        assert request.config["extraBody"] == {"seed": 7}
        items = [item for m in request.messages for item in m[META]["items"]]
        assert items == [dict(item) for item in call.input]
    headers = [e.data for e in events if e.type == "request/header"]
    assert [h["reason"] for h in headers] == ["initial", "change"]  # (the instructions changed)
    raw = b"".join(p.read_bytes() for p in tmp_path.rglob("session.jsonl"))
    assert SECRET.encode() not in raw
    loaded = reference_load(tmp_path, "s", "none")
    assert "error" not in loaded, loaded
    assert [e["type"] for e in loaded["events"]] == [e.type for e in events]
