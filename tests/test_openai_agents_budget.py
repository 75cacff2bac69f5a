"""The budget in the OpenAI Agents SDK integration: the real ``Runner`` with
``DurableRunHooks`` records each response's usage, a model call that would breach the budget
is not made (the turn parks, durably), and after a raise the next run goes on in that turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agents import Agent, ModelSettings, Runner
from agents.testing import ScriptedModel, assistant_message
from agents.usage import Usage

from agent_session import BudgetExceededError, budget_report, open_store, set_stored_budget
from agent_session.integrations.openai_agents import DurableRunHooks, EventLogSession
from tests.test_cli import cli

pytestmark = pytest.mark.process


async def events(store: str) -> list:
    backend = open_store(store)
    try:
        return list((await backend.inspect("chat-1")).events)
    finally:
        await backend.aclose()


async def test_a_breaching_model_call_is_not_made_and_a_raise_lets_the_next_run_go_on(
    store: str, tmp_path: Path
) -> None:
    usage = Usage(requests=1, input_tokens=100, output_tokens=30, total_tokens=130)
    replies = [[assistant_message(f"reply {n}", item_id=f"m{n}")] for n in range(3)]
    model = ScriptedModel(replies, default_usage=usage)
    agent = Agent(name="helper", model=model, model_settings=ModelSettings(max_tokens=50))
    async with await EventLogSession.open(store, "chat-1") as session:
        await Runner.run(agent, "first", session=session, hooks=DurableRunHooks(session))
    recorded = [e for e in await events(store) if e.type == "assistant/message"]
    assert [e.data["usage"] for e in recorded] == [{"inputTokens": 100, "outputTokens": 30}]

    await set_stored_budget(store, "chat-1", {"outputTokens": 60})
    async with await EventLogSession.open(store, "chat-1") as session:
        with pytest.raises(BudgetExceededError, match="would breach its budget"):
            await Runner.run(agent, "second", session=session, hooks=DurableRunHooks(session))
    assert len(model.calls) == 1  # the breaching call was never made
    listed = json.loads(cli("ls", store, "--json").stdout)
    assert listed["state"] == "awaiting-budget"
    parked = budget_report(await events(store))["parked"]
    assert (parked["turn"], parked["over"]) == (2, ["outputTokens"])

    cli("budget", "raise", store, "chat-1", "--output-tokens", "200")
    async with await EventLogSession.open(store, "chat-1") as session:
        result = await Runner.run(agent, "go on", session=session, hooks=DurableRunHooks(session))
    assert result.final_output == "reply 1"
    log = await events(store)
    assert [e.data["turn"] for e in log if e.type == "turn/start"] == [1, 2]  # the same turn
    report = budget_report(log)
    assert report["spent"]["outputTokens"] == 60
    assert report["parked"] is None
    assert report["spent"]["unknown"]["requests"] == 0
