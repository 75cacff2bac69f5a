"""The OpenAI Agents SDK's ``needs_approval`` interruptions as durable parked approvals, with
the real ``Runner`` and the SDK's scripted model: a run stopped for an approval is parked and
its process killed, ``agent-session`` decides it, a new process resumes the run and the tool
runs once (``tests/sdk_park_child.py``); the SDK's own in-process approval is logged too."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from agent_session import ApprovalPendingError, DurableRunHooks, EventLogSession, open_store
from agent_session.integrations.openai_agents import park_run, resume_run
from tests.forkserver import run_module
from tests.test_cli import cli

set_tracing_disabled(True)
ROOT = Path(__file__).parent.parent


def child(store: str, outbox: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_module("tests.sdk_park_child", store, str(outbox), *args, server="frameworks")


async def stored(store: str) -> list[Any]:
    backend = open_store(store)
    try:
        return list((await backend.load("job")).events)
    finally:
        await backend.aclose()


@pytest.mark.process
@pytest.mark.parametrize("verb", ["approve", "reject"])
async def test_a_run_parked_for_approval_is_killed_decided_elsewhere_and_resumed(
    tmp_path: Path, verb: str
) -> None:
    store, outbox = str(tmp_path / "sessions"), tmp_path / "outbox"
    killed = child(store, outbox, "--die")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert killed.stdout.split() == ["call-pay"]
    assert "awaiting-approval" in cli("verify", store, "job").stdout
    assert "call-pay" in cli("approvals", store).stdout
    cli(verb, store, "job", "call-pay")
    done = child(store, outbox)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Done."
    ran = ["pay call-pay"] if verb == "approve" else []
    assert outbox.read_text().splitlines() == ["request", "notify call-notify", *ran, "request"]
    log = await stored(store)
    results = {
        e.data["message"]["source"]["callId"]: e.data["message"]["content"][0]["content"][0]["text"]
        for e in log
        if e.type == "tool/result"
    }
    assert results["call-pay"] == (
        "paid 5" if verb == "approve" else 'Error: the user rejected tool "pay"'
    )
    assert [e.data["reason"]["kind"] for e in log if e.type == "turn/end"] == ["completed"]
    assert "balanced" in cli("verify", store, "job").stdout


def _agent(steps: list[Any], ran: list[str]) -> Agent[Any]:
    @function_tool(needs_approval=True)
    async def pay(amount: int) -> str:
        """Pay."""
        ran.append("pay")
        return f"paid {amount}"

    return Agent(name="payer", model=ScriptedModel(steps), tools=[pay])


async def test_the_sdk_s_own_approval_is_logged_as_an_in_process_decision(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    steps = [
        [function_call("pay", {"amount": 5}, call_id="call-pay")],
        [assistant_message("Done.")],
    ]
    agent = _agent(steps, ran)
    async with await EventLogSession.open(str(tmp_path), "job") as session:
        hooks = DurableRunHooks(session)
        result = await Runner.run(agent, "Pay 5.", session=session, hooks=hooks)
        [parked] = await park_run(result, session)
        assert parked.call_id == "call-pay"
        with pytest.raises(ApprovalPendingError, match='"call-pay"'):
            await Runner.run(agent, "Something else.", session=session, hooks=hooks)
        assert await resume_run(agent, session) is None  # undecided: nothing runs
        state = result.to_state()
        state.approve(result.interruptions[0])
        final = await Runner.run(agent, state, session=session, hooks=hooks)
        assert final.final_output == "Done."
        log = (await session.live()).events
    assert ran == ["pay"]
    kinds = [e.type for e in log if e.type.startswith(("approval/", "tool/"))]
    assert kinds == ["tool/call", "approval/asked", "approval/decided", "tool/call", "tool/result"]
    decided = next(e.data for e in log if e.type == "approval/decided")
    assert list(decided) == ["id", "outcome"]
    assert decided["outcome"] == "allowed-once"


async def test_the_sdk_s_own_rejection_is_logged_as_an_in_process_decision(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    steps = [[function_call("pay", {"amount": 5}, call_id="call-pay")], [assistant_message("Ok.")]]
    agent = _agent(steps, ran)
    async with await EventLogSession.open(str(tmp_path), "job") as session:
        hooks = DurableRunHooks(session)
        result = await Runner.run(agent, "Pay 5.", session=session, hooks=hooks)
        await park_run(result, session)
        state = result.to_state()
        state.reject(result.interruptions[0], rejection_message="not today")
        await Runner.run(agent, state, session=session, hooks=hooks)
        log = (await session.live()).events
    assert ran == []
    decided = next(e.data for e in log if e.type == "approval/decided")
    assert decided["outcome"] == "rejected"
    assert [e.data["reason"]["kind"] for e in log if e.type == "turn/end"] == ["completed"]
