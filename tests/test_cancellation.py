"""A turn interrupted from outside (the adversary's D9): ``task.cancel()``, ``asyncio.wait_for``,
``asyncio.timeout``, or a ``CancelledError``, ``KeyboardInterrupt`` or ``SystemExit`` raised in a
tool body. The turn ends ``aborted`` like ``agent.cancel()`` ends it: every tool call the model
asked for has exactly one result (a call whose body never ran: ``ABORTED_BEFORE_DISPATCH``; one
whose body started and did not finish: outcome unknown), the events are on disk, and the
exception still reaches the caller."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agent_session.agent_loop import AgentRuntime
from agent_session.agent_loop.scripted import ScriptedCall, ScriptedModel, ScriptedStep
from agent_session.agent_loop.tools import ToolCall
from agent_session.checkpoints import checkpoint_policy
from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.session import Session, SessionEvent

Body = Callable[[Any, ToolCall], Awaitable[Any]]


def make(root: Path, body: Body) -> tuple[Session, Any, JsonlPersistence]:
    """An agent whose model asks for three calls (``slow`` first, then two ``quick``, which is
    exclusive, so the second and third wait for the first) and then answers."""
    runtime, backend = AgentRuntime(), JsonlPersistence(str(root))
    runtime.install(backend)
    runtime.install(checkpoint_policy)
    calls = [
        ScriptedCall("c1", "slow", ["{}"]),
        ScriptedCall("c2", "quick", ["{}"]),
        ScriptedCall("c3", "quick", ["{}"]),
    ]
    runtime.models.register(
        "s", ScriptedModel([ScriptedStep(text=["hi"], calls=calls), ScriptedStep(text=["done"])])
    )

    async def quick(args: Any, call: ToolCall) -> str:
        return "quick"

    schema = {"type": "object"}
    runtime.tools.register("slow", "slow", schema, body)
    runtime.tools.register("quick", "quick", schema, quick, exclusive=True)
    session = runtime.sessions.create("t")
    return session, runtime.agent(session, model="s/m"), backend


def check_paired(events: list[SessionEvent] | tuple[SessionEvent, ...]) -> dict[str, str]:
    """The turn ended aborted and every call has one result; the result code per call."""
    ends = [e for e in events if e.type == "turn/end"]
    assert len(ends) == 1, [e.type for e in events]
    assert ends[0].data["reason"]["kind"] == "aborted", ends[0].data
    calls = [e.data["callId"] for e in events if e.type == "tool/call"]
    results = [e.data["message"]["source"]["callId"] for e in events if e.type == "tool/result"]
    assert sorted(calls) == sorted(results) == ["c1", "c2", "c3"], (calls, results)
    assert [e.type for e in events][-2:] == ["step/end", "turn/end"]
    return {
        e.data["message"]["source"]["callId"]: e.data.get("error", {}).get("code", "ok")
        for e in events
        if e.type == "tool/result"
    }


async def stored(root: Path) -> tuple[SessionEvent, ...]:
    """The stored log as it is: balanced, so inspecting it needs no closers."""
    backend = JsonlPersistence(str(root))
    examined = await backend.diagnose("t")
    await backend.aclose()
    assert examined.closers == 0
    return tuple(examined.session.events)


EXPECTED = {
    "c1": "TOOL_OUTCOME_UNKNOWN",
    "c2": "ABORTED_BEFORE_DISPATCH",
    "c3": "ABORTED_BEFORE_DISPATCH",
}


@pytest.mark.parametrize("how", ["task.cancel", "wait_for", "timeout"])
async def test_cancelling_the_task_while_a_tool_runs(tmp_path: Path, how: str) -> None:
    started, never = asyncio.Event(), asyncio.Event()

    async def slow(args: Any, call: ToolCall) -> str:
        started.set()
        await never.wait()
        return "never"

    session, agent, backend = make(tmp_path, slow)
    if how == "task.cancel":
        task = asyncio.ensure_future(agent.run_turn("go"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    elif how == "wait_for":  # the deadline under test; the tool starts in milliseconds
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.run_turn("go"), timeout=2)
        assert started.is_set()
    else:  # asyncio.timeout, expired the moment the tool body runs
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(None) as deadline:
                turn = asyncio.ensure_future(agent.run_turn("go"))
                await started.wait()
                deadline.reschedule(asyncio.get_running_loop().time())
                await turn
    assert check_paired(session.events) == EXPECTED
    await backend.aclose()
    assert check_paired(await stored(tmp_path)) == EXPECTED


@pytest.mark.parametrize("error", [asyncio.CancelledError, KeyboardInterrupt, SystemExit])
def test_a_base_exception_raised_in_a_tool_body(tmp_path: Path, error: type[BaseException]) -> None:
    async def slow(args: Any, call: ToolCall) -> str:
        raise error()

    box: dict[str, Session] = {}

    async def main() -> None:
        session, agent, backend = make(tmp_path, slow)
        box["session"] = session
        try:
            await agent.run_turn("go")
        finally:
            await backend.aclose()

    with pytest.raises((error, asyncio.CancelledError)):
        asyncio.run(main())
    assert check_paired(box["session"].events) == EXPECTED
    assert check_paired(asyncio.run(stored(tmp_path))) == EXPECTED
