"""The OpenAI Agents SDK's tool approvals (``needs_approval``) as durable parked approvals in
the event log, so the SDK's ``RunState`` is no longer the only holder of a pending approval.

- :func:`park_run`: after a run that stopped for approvals (``result.interruptions``), each
  function call it waits on gets its ``tool/call`` and a durable ``approval/asked`` (with the
  digest of its arguments, :mod:`session.events.parked`); the turn stays open, and a restart
  leaves it parked. :func:`resume_run` parks what a run it continues stopped for.
- A decision can then come from anywhere (``agent-session approve``, ``agent_session.approve``)
  and :func:`carry_out` (called by ``resume_run`` in any later process) carries it out: an
  ``allowed-once`` call's ``tool/call`` is recorded again and made durable, then its body
  runs once (as settlement runs bodies: ``on_invoke_tool`` with the recorded arguments and
  call id); a refusal gives the model the reference's denial; then the run continues with
  its next model request (``Runner.run(agent, [], session=...)``).
- Deciding in the process instead, the SDK's way (``state.approve(item)``, then
  ``Runner.run(agent, state, ...)``), is recorded too: the hooks log the in-process
  ``approval/decided`` before the approved body (or before a rejection's output).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agent_session.agent_loop.approval import OUTCOMES, Outcome, denial
from agent_session.agent_loop.parking import decision_data, mismatch
from agent_session.integrations.openai_agents.items import tool_result_data
from agent_session.integrations.turns import OpenTurn, record_call
from agent_session.session.events.builders import tool_call
from agent_session.session.events.header import now_ms
from agent_session.session.events.outcomes import (
    TOOL_NOT_STARTED,
    TOOL_NOT_STARTED_NAME,
    TOOL_NOT_STARTED_TEXT,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_OUTCOME_UNKNOWN_NAME,
    TOOL_OUTCOME_UNKNOWN_TEXT,
)
from agent_session.session.events.parked import (
    ARGUMENTS_DIGEST,
    EXPIRES_AT,
    ParkedCall,
    arguments_digest,
)
from agent_session.session.events.parked import parked_calls as parked_calls
from agent_session.session.events.types import (
    APPROVAL_ASKED,
    APPROVAL_DECIDED,
    TOOL_CALL,
    TOOL_RESULT,
)
from agent_session.session.live.session import Session

if TYPE_CHECKING:
    from agents import Agent, RunResult

    from agent_session.integrations.openai_agents.session import EventLogSession

__all__ = ["carry_out", "decided_in_process", "park_run", "parked_calls"]


async def park_run(
    result: RunResult, session: EventLogSession, *, expires_after: float | None = None
) -> list[ParkedCall]:
    """Make the approvals ``result`` stopped for durable (see the module); return the session's
    parked calls (empty when the run did not stop for a function call's approval).
    ``expires_after``: seconds each may wait before whoever sees it decides it
    ``cancelled``."""
    waiting = [
        raw
        for raw in (getattr(item, "raw_item", None) for item in result.interruptions)
        if _field(raw, "type") == "function_call"
    ]
    return await session._call(_park(session, waiting, expires_after))


async def _park(
    session: EventLogSession, waiting: list[Any], expires_after: float | None
) -> list[ParkedCall]:
    async with session._lock:
        live = await session._live()
        turn = session._turn(live)
        parked = {call.call_id for call in parked_calls(live.events)}
        for raw in waiting:
            call_id = _field(raw, "call_id")
            if turn is None or call_id not in turn.calls or call_id in turn.answered:
                continue  # (not this session's running turn's: nothing to park)
            if call_id in parked:
                continue
            record_call(live, turn, call_id)
            asked: dict[str, Any] = {
                "id": str(uuid.uuid4()),
                "toolName": turn.calls[call_id][1],
                "callId": call_id,
                ARGUMENTS_DIGEST: arguments_digest(turn.calls[call_id][2]),
            }
            if expires_after is not None:
                asked[EXPIRES_AT] = now_ms() + round(expires_after * 1000)
            live.append(APPROVAL_ASKED, asked)
        await session.runtime.sessions.flush(live)
        return list(parked_calls(live.events))


def decided_in_process(session: Session, turn: OpenTurn, call_id: str, outcome: Outcome) -> None:
    """The SDK decided the parked ``call_id`` itself (a ``RunState`` approval): log the
    decision as the reference's in-process pair completes it, before the body or the output;
    a call already decided from outside is left as it is. For an approval, record the
    ``tool/call`` that marks its body's start."""
    parked = {call.call_id: call for call in parked_calls(session.events[turn.start :])}
    call = parked.get(call_id)
    if call is None:
        return
    if call.decision is None:
        session.append(APPROVAL_DECIDED, {"id": call.ask_id, "outcome": outcome})
    if outcome == "allowed-once":
        step, name, arguments, _ = turn.calls[call_id]
        seq = session.append(TOOL_CALL, tool_call(turn.number, step, call_id, name, arguments))
        turn.calls[call_id] = (step, name, arguments, seq.seq)


async def carry_out(agent: Agent[Any], session: EventLogSession, context: Any) -> bool | None:
    """Carry out the decisions on the session's parked calls (see the module) and answer the
    other calls its turn still waits on; ``None`` when nothing is parked, ``False`` while a
    call is undecided and its deadline has not passed (nothing is written), ``True`` when
    the run can go on. A call approved for other arguments than the recorded ones is
    refused, never run, and the model is told why (:func:`agent_loop.parking.mismatch`).
    """
    from agent_session.integrations.openai_agents.settle import run_tool  # (it imports this)

    live = await session._call(session._live())
    parked = parked_calls(live.events)
    if not parked:
        return None
    now = now_ms()
    if any(call.decision is None and not call.expired(now) for call in parked):
        return False
    for call in parked:
        refusal = mismatch(call)
        if refusal is not None:  # approved for other arguments: refused, never run
            await session._call(
                _answer(session, call.call_id, _output(call.call_id, "Error: " + refusal))
            )
            continue
        outcome = await session._call(_start(session, call))
        if outcome == "allowed-once":
            block = {"id": call.call_id, "name": call.tool_name, "arguments": call.arguments}
            tool = next(
                (t for t in agent.tools if getattr(t, "name", None) == call.tool_name), None
            )
            data = await run_tool(tool, block, context)
        else:
            data = _output(call.call_id, "Error: " + denial(outcome, call.tool_name))
        await session._call(_answer(session, call.call_id, data))
    await session._call(_answer_rest(session))
    return True


async def _start(session: EventLogSession, call: ParkedCall) -> Outcome:
    """The call's outcome (a passed deadline decided ``cancelled`` first); for an approval,
    its ``tool/call`` again, durable before the body runs."""
    async with session._lock:
        live = await session._live()
        decision = call.decision.outcome if call.decision is not None else None
        if decision is None:
            data, _ = decision_data(call, "cancelled", by="deadline")
            live.append(APPROVAL_DECIDED, data)
            decision = "cancelled"
        outcome: Outcome = decision if decision in OUTCOMES else "unavailable"
        if outcome == "allowed-once":
            turn = session._turn(live)
            assert turn is not None
            decided_in_process(live, turn, call.call_id, outcome)
        await session.runtime.sessions.flush(live)
        return outcome


async def _answer(session: EventLogSession, call_id: str, data: dict[str, Any]) -> None:
    async with session._lock:
        live = await session._live()
        turn = session._turn(live)
        assert turn is not None
        step, _, _, call_seq = turn.calls[call_id]
        data["turn"], data["step"] = turn.number, step
        sources = [call_seq] if call_seq is not None else None
        live.append(TOOL_RESULT, data, surface_op="append", source_event_seqs=sources)
        turn.answered.add(call_id)
        await session.runtime.sessions.flush(live)


async def _answer_rest(session: EventLogSession) -> None:
    """Answer the calls the parked turn still waits on (none when the run stopped only for
    approvals: the SDK runs the others first) as crash repair would: never started, or of
    unknown outcome when recorded."""
    async with session._lock:
        live = await session._live()
        turn = session._turn(live)
        for call_id in turn.unanswered if turn is not None else ():
            assert turn is not None
            step, _, _, call_seq = turn.calls[call_id]
            unknown = call_seq is not None
            text = TOOL_OUTCOME_UNKNOWN_TEXT if unknown else TOOL_NOT_STARTED_TEXT
            data = _output(call_id, text)
            data["turn"], data["step"] = turn.number, step
            data["error"] = (
                {"name": TOOL_OUTCOME_UNKNOWN_NAME, "code": TOOL_OUTCOME_UNKNOWN}
                if unknown
                else {"name": TOOL_NOT_STARTED_NAME, "code": TOOL_NOT_STARTED}
            )
            sources = [call_seq] if call_seq is not None else None
            live.append(TOOL_RESULT, data, surface_op="append", source_event_seqs=sources)
            turn.answered.add(call_id)
        await session.runtime.sessions.flush(live)


def _output(call_id: str, text: str) -> dict[str, Any]:
    item = {"type": "function_call_output", "call_id": call_id, "output": text}
    return tool_result_data(item, 0, 0)


def _field(raw: Any, name: str) -> Any:
    return raw.get(name) if isinstance(raw, Mapping) else getattr(raw, name, None)
