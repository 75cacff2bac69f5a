"""A real SDK run SIGKILLed inside a tool body, then resumed by a new process's run.

The child (``tests/openai_agents_child.py``) runs the real ``Runner`` with
``DurableRunHooks`` and kills itself in the body of ``send_email``. The parent opens the
session, which repairs it, and runs again: the model's input must hold the interrupted call
paired with a ``TOOL_OUTCOME_UNKNOWN`` output and pass the SDK's own pairing pass, and the
body must not have run again.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from agents import Agent, Runner, function_tool
from agents.items import TResponseInputItem
from agents.run_internal.items import drop_orphan_function_calls
from agents.testing import ScriptedModel, assistant_message
from pydantic import TypeAdapter

from agent_session.integrations.openai_agents import DurableRunHooks, EventLogSession
from agent_session.recovery import TOOL_OUTCOME_UNKNOWN, TOOL_OUTCOME_UNKNOWN_TEXT
from agent_session.stores import parse_store
from tests.forkserver import run_module

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[1]


def run_child(store: str, body_log: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return run_module(
        "tests.openai_agents_child", store, "chat-1", str(body_log), *flags, server="frameworks"
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_a_crash_in_a_tool_body_resumes_with_the_call_answered_unknown(
    store: str, tmp_path: Path, streamed: bool
) -> None:
    body_log = tmp_path / "bodies.txt"
    child = run_child(store, body_log, "--crash", *(["--streamed"] if streamed else []))
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert "failpoint tool" in child.stdout
    assert body_log.read_text() == "a@b.c\n"

    model = ScriptedModel([[assistant_message("It may have gone out; check.", item_id="m3")]])

    @function_tool
    async def send_email(to: str) -> str:
        """Send an email."""
        raise AssertionError("the interrupted body must not run again")

    agent = Agent(name="mailer", model=model, tools=[send_email])
    async with await EventLogSession.open(store, "chat-1") as session:
        hooks = DurableRunHooks(session)
        result = await Runner.run(agent, "did it go out?", session=session, hooks=hooks)
    assert result.final_output == "It may have gone out; check."
    assert body_log.read_text() == "a@b.c\n"  # not re-run

    sent = model.calls[0].input
    assert isinstance(sent, list)
    call = next(i for i in sent if i.get("type") == "function_call")
    output = next(i for i in sent if i.get("type") == "function_call_output")
    assert (call["call_id"], call["name"]) == ("call_1", "send_email")
    assert output["call_id"] == "call_1"
    assert output["output"] == TOOL_OUTCOME_UNKNOWN_TEXT
    assert sent.index(call) < sent.index(output) < len(sent) - 1
    assert sent[0] == {"content": "email a@b.c", "role": "user"}
    assert sent[-1] == {"content": "did it go out?", "role": "user"}
    assert drop_orphan_function_calls(list(sent)) == sent  # the SDK keeps every pair
    TypeAdapter(list[TResponseInputItem]).validate_python(sent)

    backend = parse_store(store).open()
    events = (await backend.inspect("chat-1")).events
    await backend.aclose()
    recorded = next(e for e in events if e.type == "tool/call")
    answer = next(e for e in events if e.type == "tool/result")
    assert answer.source_event_seqs == (recorded.seq,)
    assert answer.data["error"]["code"] == TOOL_OUTCOME_UNKNOWN
    ends = [e.data["reason"]["kind"] for e in events if e.type == "turn/end"]
    assert ends == ["interrupted", "completed"]


async def test_a_run_that_is_not_killed_completes(store: str, tmp_path: Path) -> None:
    body_log = tmp_path / "bodies.txt"
    child = run_child(store, body_log)
    assert child.returncode == 0, child.stderr
    assert "final Done." in child.stdout
    async with await EventLogSession.open(store, "chat-1") as session:
        items = await session.get_items()
    assert [i.get("type") for i in items] == [
        None,
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert items[3]["output"] == "sent to a@b.c"
