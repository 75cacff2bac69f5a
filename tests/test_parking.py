"""Parked approvals in process: an ask nobody decides parks the turn durably; a restart finds it
parked (not interrupted); a decision is carried out exactly once by ``agent.resume()``; a
reject, an expired deadline, forged arguments, a crash while carrying out. (Real processes
and every store: ``tests/test_parking_crash.py``.)"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from agent_session import (
    AgentRuntime,
    MemoryPersistence,
    MemoryStore,
    ScriptedCall,
    ScriptedModel,
    ScriptedStep,
    checkpoint_policy,
)
from agent_session.agent_loop.approval import APPROVAL_REQUEST, TOOLS_PRE_EXECUTE, user_approval
from agent_session.agent_loop.parking import decide
from agent_session.interchange.export import check_transcript
from agent_session.recovery import closers
from agent_session.session.errors import (
    ApprovalExpiredError,
    ApprovalMismatchError,
    ApprovalNotPendingError,
    ApprovalPendingError,
)
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.header import now_ms
from agent_session.session.events.parked import arguments_digest, parked_calls


class Crash(BaseException):
    """The process dies here (what is stored at that moment is all a restart finds)."""


class World:
    """The tools' outside world and two stores: what the process had, and the disk."""

    def __init__(self) -> None:
        self.store = MemoryStore()
        self.effects: list[str] = []
        self.crash_in: str | None = None
        self.disk: MemoryStore | None = None
        self.requests = 0

    def die(self) -> None:
        """The process is killed: the disk keeps what was stored at this moment."""
        self.disk = MemoryStore()
        self.disk.logs = copy.deepcopy(self.store.logs)
        raise Crash

    def restart(self) -> list[SessionEvent]:
        """What a restarted process finds on disk (it starts from a copy)."""
        disk = self.disk or MemoryStore()
        if self.disk is None:
            disk.logs = copy.deepcopy(self.store.logs)
        self.store, self.disk = disk, None
        return [SessionEvent.decode(line) for line in disk.logs["s"].lines]


def runtime(world: World, steps: list[ScriptedStep], **approval: Any) -> AgentRuntime:
    rt = AgentRuntime()
    rt.install(MemoryPersistence(world.store, repair=closers))
    rt.install(checkpoint_policy)
    rt.install(user_approval(park=True, **approval))
    model = ScriptedModel(steps)

    async def counted(request: Any) -> Any:
        world.requests += 1
        async for chunk in model.stream(request):
            yield chunk

    class Counting:
        stream = staticmethod(counted)

    rt.models.register("m", Counting())

    async def pay(args: Any, call: Any) -> str:
        world.effects.append(f"pay:{call.call_id}")
        if world.crash_in == call.call_id:
            world.die()
        return f"paid {args['amount']}"

    async def notify(args: Any, call: Any) -> str:
        world.effects.append(f"notify:{call.call_id}")
        return "notified"

    rt.tools.register("pay", "Pay.", {"type": "object"}, pay, exclusive=True)
    rt.tools.register("notify", "Notify.", {"type": "object"}, notify, exclusive=True)

    async def ask_for_pay(call: Any, downstream: Any) -> Any:
        if call.name == "pay":
            return {"kind": "ask", "reason": "moves money"}
        return await downstream(call)

    rt.hooks.wrap(TOOLS_PRE_EXECUTE, ask_for_pay)
    return rt


def first_turn() -> list[ScriptedStep]:
    calls = [
        ScriptedCall("c-pay", "pay", ['{"amount": 5}']),
        ScriptedCall("c-notify", "notify", ["{}"]),
    ]
    return [ScriptedStep(calls=calls)]


def after_decision() -> list[ScriptedStep]:
    return [ScriptedStep(text=["Done."])]


async def parked_session(world: World, **approval: Any) -> dict[str, Any]:
    rt = runtime(world, first_turn(), **approval)
    session = rt.sessions.create("s")
    reason = await rt.agent(session, model="m/x").run_turn("Pay 5, then notify.")
    await rt.__aexit__(None, None, None)
    return reason


async def reopened(world: World, steps: list[ScriptedStep], **approval: Any) -> Any:
    rt = runtime(world, steps, **approval)
    session = await rt.sessions.resume("s")
    return rt, session, rt.agent(session, model="m/x")


def types(session: Any, since: int = 0) -> list[str]:
    """The event types from ``since`` on, a run of streamed chunks as one."""
    out: list[str] = []
    for event in session.events[since:]:
        if not (event.type == "assistant/chunk" and out and out[-1] == event.type):
            out.append(event.type)
    return out


async def test_an_ask_nobody_decides_parks_the_turn_and_a_restart_finds_it_parked() -> None:
    world = World()
    reason = await parked_session(world)
    assert reason["kind"] == "awaiting-approval"
    [pending] = reason["approvals"]
    assert pending["callId"] == "c-pay"
    assert pending["toolName"] == "pay"
    assert pending["reason"] == "moves money"
    assert pending["argumentsDigest"] == arguments_digest('{"amount": 5}')
    assert world.effects == []
    stored = world.restart()  # durable: the ask is the last stored event
    assert [e.type for e in stored[-3:]] == ["assistant/message", "tool/call", "approval/asked"]
    assert closers(stored) == []  # not crash garbage

    rt, session, agent = await reopened(world, [])
    assert session.interrupted is None
    assert [c.call_id for c in parked_calls(session.events)] == ["c-pay"]
    count = len(session.events)
    with pytest.raises(ApprovalPendingError, match='"c-pay" \\(tool "pay"\\)'):
        await agent.run_turn("something else")
    again = await agent.resume()  # undecided: still waiting, nothing written
    assert again is not None
    assert again["kind"] == "awaiting-approval"
    assert len(session.events) == count
    await rt.__aexit__(None, None, None)
    assert world.effects == []


async def test_an_approval_runs_the_recorded_call_once_and_the_turn_goes_on() -> None:
    world = World()
    await parked_session(world)
    requests = world.requests
    rt, session, agent = await reopened(world, after_decision())
    decide(session, "c-pay", "allowed-once", by="alice")
    with pytest.raises(ApprovalNotPendingError, match="already decided allowed-once by alice"):
        decide(session, "c-pay", "rejected")
    start = len(session.events)
    reason = await agent.resume()
    await rt.__aexit__(None, None, None)
    assert reason == {"kind": "completed"}
    assert world.effects == ["pay:c-pay", "notify:c-notify"]
    assert world.requests == requests + 1  # only the request after the results
    assert types(session, start) == [
        "tool/call",  # pay's body starts (its mark, durable first)
        "tool/result",
        "tool/call",
        "tool/result",
        "step/end",
        "step/start",
        "request/header",
        "assistant/chunk",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    check_transcript(session.derive_messages())
    assert parked_calls(session.events) == ()


@pytest.mark.parametrize("outcome", ["rejected", "cancelled", "unavailable"])
async def test_a_refusal_is_the_reference_s_denial_and_the_body_never_runs(outcome: str) -> None:
    world = World()
    await parked_session(world)
    rt, session, agent = await reopened(world, after_decision())
    decide(session, "c-pay", outcome)  # type: ignore[arg-type]
    assert (await agent.resume()) == {"kind": "completed"}
    await rt.__aexit__(None, None, None)
    assert world.effects == ["notify:c-notify"]
    texts = {
        "rejected": 'Error: the user rejected tool "pay"',
        "cancelled": 'Error: approval for tool "pay" was cancelled',
        "unavailable": 'Error: tool "pay" requires approval, but no approval channel is available',
    }
    results = [e.data for e in session.events if e.type == "tool/result"]
    assert results[0]["message"]["content"][0]["content"] == [
        {"type": "text", "text": texts[outcome]}
    ]
    assert "error" not in results[0]


async def test_a_passed_deadline_is_decided_cancelled_by_whoever_sees_it() -> None:
    world = World()
    await parked_session(world, expires_after=0.001)
    [call] = parked_calls(world.restart())
    assert call.expires_at is not None
    assert call.expired(call.expires_at)
    while now_ms() <= call.expires_at:  # (the fact the test needs: the deadline has passed)
        pass
    rt, session, agent = await reopened(world, after_decision())
    with pytest.raises(ApprovalExpiredError, match="it is decided cancelled"):
        decide(session, "c-pay", "allowed-once")
    decided = [e.data for e in session.events if e.type == "approval/decided"]
    assert decided[-1]["outcome"] == "cancelled"
    assert decided[-1]["decidedBy"] == "deadline"
    assert (await agent.resume()) == {"kind": "completed"}
    await rt.__aexit__(None, None, None)
    assert world.effects == ["notify:c-notify"]


async def test_resume_after_the_deadline_cancels_without_a_decider() -> None:
    world = World()
    await parked_session(world, expires_after=0.001)
    [call] = parked_calls(world.restart())
    while call.expires_at is not None and now_ms() <= call.expires_at:
        pass  # (the fact the test needs: the deadline has passed)
    rt, session, agent = await reopened(world, after_decision())
    assert (await agent.resume()) == {"kind": "completed"}
    await rt.__aexit__(None, None, None)
    decided = [e.data for e in session.events if e.type == "approval/decided"]
    assert [d["outcome"] for d in decided] == ["cancelled"]
    assert world.effects == ["notify:c-notify"]


async def test_a_decision_for_other_arguments_is_refused_and_nothing_runs() -> None:
    world = World()
    await parked_session(world)
    rt, session, agent = await reopened(world, after_decision())
    with pytest.raises(ApprovalMismatchError, match="nothing was decided"):
        decide(session, "c-pay", "allowed-once", digest=arguments_digest('{"amount": 500}'))
    recorded = arguments_digest('{"amount": 5}')
    with pytest.raises(ApprovalMismatchError, match="nothing was decided"):
        decide(session, "c-pay", "allowed-once", digest=recorded[:18])  # too short a prefix
    # A decision forged with another digest (written by hand, say) is not carried out: the
    # call is refused with a result that says why, and the session goes on.
    [call] = parked_calls(session.events)
    forged = {"id": call.ask_id, "outcome": "allowed-once", "argumentsDigest": "sha256:00"}
    session.append("approval/decided", forged)
    assert (await agent.resume()) == {"kind": "completed"}
    await rt.__aexit__(None, None, None)
    assert world.effects == ["notify:c-notify"]
    [pay] = [
        e.data
        for e in session.events
        if e.type == "tool/result" and e.data["message"]["source"]["callId"] == "c-pay"
    ]
    assert pay["error"] == {"name": "ApprovalMismatchError", "code": "APPROVAL_MISMATCH"}
    text = pay["message"]["content"][0]["content"][0]["text"]
    assert text == (
        f'Error: tool "pay" was approved for arguments sha256:00, not the recorded {recorded}: '
        "it was not run; ask for it again"
    )
    check_transcript(session.derive_messages())


async def test_a_unique_digest_prefix_approves_as_listed() -> None:
    world = World()
    await parked_session(world)
    rt, session, agent = await reopened(world, after_decision())
    decide(session, "c-pay", "allowed-once", digest=arguments_digest('{"amount": 5}')[:19])
    assert (await agent.resume()) == {"kind": "completed"}
    await rt.__aexit__(None, None, None)
    assert world.effects == ["pay:c-pay", "notify:c-notify"]


async def test_a_call_whose_ask_saw_other_arguments_cannot_be_approved_only_rejected() -> None:
    world = World()
    await parked_session(world)
    rt, session, agent = await reopened(world, after_decision())
    # The call recorded again with other arguments than the ask saw (a foreign writer).
    [call] = parked_calls(session.events)
    recorded = {"turn": call.turn, "step": call.step, "callId": "c-pay", "name": "pay"}
    session.append("tool/call", {**recorded, "arguments": '{"amount": 500}'})
    [call] = parked_calls(session.events)
    assert not call.matches
    with pytest.raises(ApprovalMismatchError, match="cannot be approved"):
        decide(session, "c-pay", "allowed-once")
    decide(session, "c-pay", "rejected")
    assert (await agent.resume()) == {"kind": "completed"}
    await rt.__aexit__(None, None, None)
    assert world.effects == ["notify:c-notify"]


async def test_a_crash_while_the_approved_body_runs_is_never_parked_again() -> None:
    world = World()
    await parked_session(world)
    _rt, session, agent = await reopened(world, after_decision())
    decide(session, "c-pay", "allowed-once")
    world.crash_in = "c-pay"
    with pytest.raises(Crash):
        await agent.resume()
    events = world.restart()
    assert parked_calls(events) == ()  # its body started: the mark was durable
    closing = closers(events)
    assert closing[0].data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert closing[1].data["error"]["code"] == "TOOL_NOT_STARTED"  # notify
    assert world.effects == ["pay:c-pay"]


async def test_an_answer_in_process_is_the_reference_s_pair_and_a_crash_is_repaired() -> None:
    world = World()
    rt = runtime(world, first_turn())

    async def approve(request: Any, downstream: Any) -> str:
        return "allowed-once"

    rt.hooks.wrap(APPROVAL_REQUEST, approve)
    world.crash_in = "c-pay"
    session = rt.sessions.create("s")
    with pytest.raises(Crash):
        await rt.agent(session, model="m/x").run_turn("Pay 5.")
    events = world.restart()
    assert [e.type for e in events[-4:]] == [
        "assistant/message",
        "tool/call",
        "approval/asked",
        "approval/decided",
    ]
    assert "argumentsDigest" not in events[-1].data  # decided here: the reference's pair
    assert parked_calls(events) == ()
    assert closers(events)[0].data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"


async def test_an_answerer_may_leave_the_decision_to_a_decider_outside() -> None:
    world = World()
    rt = runtime(world, first_turn())
    asked: list[str] = []

    async def notify_a_human(request: Any, downstream: Any) -> str:
        asked.append(request.call_id)  # (sends a message, say) and leaves the decision
        return "park"

    rt.hooks.wrap(APPROVAL_REQUEST, notify_a_human)
    session = rt.sessions.create("s")
    reason = await rt.agent(session, model="m/x").run_turn("Pay 5.")
    await rt.__aexit__(None, None, None)
    assert reason["kind"] == "awaiting-approval"
    assert asked == ["c-pay"]


async def test_a_shutdown_while_an_answerer_thinks_leaves_the_call_parked() -> None:
    world = World()
    rt = runtime(world, first_turn())
    asking = asyncio.Event()

    async def a_person_thinking(request: Any, downstream: Any) -> str:
        asking.set()
        await asyncio.Event().wait()  # never answers: the process is shut down meanwhile
        raise AssertionError("unreachable")

    rt.hooks.wrap(APPROVAL_REQUEST, a_person_thinking)
    session = rt.sessions.create("s")
    turn = asyncio.ensure_future(rt.agent(session, model="m/x").run_turn("Pay 5."))
    await asking.wait()
    turn.cancel()  # a deploy, Ctrl-C, a supervisor's cancel
    with pytest.raises(asyncio.CancelledError):
        await turn
    await rt.__aexit__(None, None, None)
    events = world.restart()
    assert [call.call_id for call in parked_calls(events)] == ["c-pay"]
    assert "approval/decided" not in [e.type for e in events]
    assert closers(events) == []

    rt, session, agent = await reopened(world, after_decision())
    decide(session, "c-pay", "allowed-once")
    assert (await agent.resume()) == {"kind": "completed"}
    await rt.__aexit__(None, None, None)
    assert world.effects == ["pay:c-pay", "notify:c-notify"]
