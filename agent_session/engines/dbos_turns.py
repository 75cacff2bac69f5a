"""An agent's turns as DBOS workflows over the log (extra ``[dbos]``): each turn one workflow,
each model call and each tool body one DBOS step, and the conversation in the session log,
not in DBOS's history.

A step appends its events with :meth:`~agent_session.engines.once.EngineSteps.append_once` keyed by
``[workflow_id, step_id]``, and returns only their seqs (and the model's call ids): the
workflow's history grows by a few numbers per model call, whatever the conversation's size,
and a model step reads the conversation from the log. When DBOS runs a step again (its
process died after the step appended and before DBOS recorded the step), the step finds its
key in the log and returns the seqs stored then: the model is not asked again, nothing is
appended twice, and the seqs DBOS records are the log's.

A tool's ``tool/call`` is durable before its body runs. A tool step run again after its
body may have started is settled by the tool's effect class, as the loop's ``resume()``
settles it: a ``read`` or ``idempotent`` body runs again (``re-run``); an ``unsafe`` one does
not, and its call is answered ``TOOL_OUTCOME_UNKNOWN`` (``unknown``), the reference's closer.
A workflow DBOS gives up on leaves its turn open: the next turn of the session (or any
load) closes it with the reference's closers, never a silent re-run.

A tool declared ``approval=True`` parks the turn as the loop parks it: its ``tool/call`` and
a durable ``approval/asked`` are written, the session is let go, and the workflow waits
(``DBOS.recv``) while ``agent-session approvals`` lists the call and ``agent-session
approve``/``reject`` (or :func:`agent_session.approve`) decides it from any process;
:meth:`DurableAgent.wake` ends the wait at once. An allowed body then runs once; a refused
one is answered with the reference's denial. A crash while parked changes nothing: the
parked turn is never repaired, and the recovered workflow waits again.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

from dbos import DBOS, SetWorkflowID, WorkflowHandle

from agent_session.agent_loop.approval import denial
from agent_session.engines.once import EngineSteps
from agent_session.integrations.held_logs import HeldLogs
from agent_session.integrations.home_loop import HomeLoop
from agent_session.integrations.turns import end_turn, next_step, open_turn, record_call, start_turn
from agent_session.recovery.closers import closers
from agent_session.session.events.builders import (
    model_message,
    tool_call,
    tool_call_block,
    tool_result_message,
    user_message,
)
from agent_session.session.events.outcomes import SETTLEMENT
from agent_session.session.events.parked import ARGUMENTS_DIGEST, arguments_digest, parked_calls
from agent_session.session.events.types import (
    APPROVAL_ASKED,
    ASSISTANT_MESSAGE,
    TOOL_CALL,
    TOOL_RESULT,
    USER_MESSAGE,
)
from agent_session.session.json.lossless import thaw
from agent_session.session.live.session import Session
from agent_session.session.persistence.kit import failpoint

__all__ = ["PARKED", "POLL_S", "DurableAgent", "Reply", "Tool"]

T = TypeVar("T")

_AGENTS: dict[str, DurableAgent] = {}
"""The agents of this process, by name (DBOS runs a recovered workflow by its function's
name and arguments: the agent is looked up by its name)."""


@dataclass(frozen=True)
class Reply:
    """What the model answered: text, and tool calls ``(call id, tool name, arguments)``."""

    text: str = ""
    calls: tuple[tuple[str, str, Mapping[str, Any]], ...] = ()


@dataclass(frozen=True)
class Tool:
    """A tool's body, ``body(arguments, call_id) -> result text``, its effect class, and
    whether each call waits for a person's approval (``approval``: the turn parks)."""

    body: Callable[[Mapping[str, Any], str], str]
    effect: Literal["read", "idempotent", "unsafe"] = "unsafe"
    approval: bool = False


PARKED: Final = "parked"
"""What a tool step answers while its call waits for a decision."""
POLL_S: Final = 30.0
"""How long a parked workflow waits for :meth:`DurableAgent.wake` before it reads the log
again (a decision ``agent-session approve`` wrote is seen by then)."""


@dataclass
class DurableAgent:
    """An agent whose turns run as DBOS workflows on the sessions of ``store`` (a
    directory, ``sqlite:///`` or ``postgresql://``). ``model(messages) -> Reply`` answers
    the session's history (its messages as the log derives them). Construct it, with its
    ``name``, before ``DBOS.launch()``: a workflow DBOS recovers at launch finds it."""

    name: str
    store: str
    model: Callable[[list[Any]], Reply]
    tools: Mapping[str, Tool] = field(default_factory=dict)
    model_name: str = "unknown"
    provider: str = "dbos"

    def __post_init__(self) -> None:
        from agent_session.stores import parse_store

        spec = parse_store(os.fspath(self.store))
        self._logs = HeldLogs(spec, {}, 256, repr, keep_open=True)  # (DBOS goes on with it)
        self._steps: EngineSteps | None = None
        self._home = HomeLoop(f"agent-session dbos {self.name}")
        _AGENTS[self.name] = self

    def _wait(self, work: Coroutine[Any, Any, T]) -> T:
        return self._home.wait(work)

    def start_turn(self, session_id: str, text: str, *, workflow_id: str) -> WorkflowHandle[Any]:
        """Start the turn ``text`` of ``session_id`` as the workflow ``workflow_id`` (a
        second start of one id is DBOS's: it returns the same workflow)."""
        with SetWorkflowID(workflow_id):
            return DBOS.start_workflow(_turn, self.name, session_id, text)

    def wake(self, workflow_id: str, call_id: str) -> None:
        """Tell the parked workflow ``workflow_id`` that the call ``call_id`` was decided
        (``agent-session approve`` or :func:`agent_session.approve`), so it goes on now
        rather than at its next look (:data:`POLL_S`)."""
        DBOS.send(workflow_id, "decided", topic=f"approval:{call_id}")

    def close(self) -> None:
        """Let the sessions go and close the store."""
        try:
            self._wait(self._logs.close())
        finally:
            self._home.close()
            _AGENTS.pop(self.name, None)

    # --- what each step does, on the agent's own loop ---------------------------------

    async def _session(self, session_id: str) -> tuple[Session, EngineSteps]:
        if self._steps is None:
            self._steps = EngineSteps(self._logs.runtime)
        return await self._logs.take(session_id), self._steps

    async def user(self, session_id: str, text: str, key: list[Any]) -> list[int]:
        session, steps = await self._session(session_id)

        def write(s: Session) -> None:
            start_turn(s, open_turn(s.events))  # (a turn a given-up workflow left: closed)
            s.append(USER_MESSAGE, user_message(text), surface_op="append")

        return await steps.append_once(session, key, write)

    async def answer(self, session_id: str, key: list[Any]) -> dict[str, Any]:
        session, steps = await self._session(session_id)
        if tuple(key) not in steps.of(session):
            messages = session.derive_messages()
            reply = await asyncio.to_thread(self.model, messages)

            def write(s: Session) -> None:
                turn = next_step(s, open_turn(s.events))
                blocks = [{"type": "text", "text": reply.text}] if reply.text else []
                blocks += [tool_call_block(i, n, json.dumps(a)) for i, n, a in reply.calls]
                message = model_message(blocks, provider=self.provider, model=self.model_name)
                data: dict[str, Any] = {"turn": turn.number, "step": turn.last_step}
                data["message"] = message
                s.append(ASSISTANT_MESSAGE, data, surface_op="append", source_event_seqs=[])
                if not reply.calls:
                    end_turn(s, turn)

            await steps.append_once(session, key, write)
        seqs = list(steps.of(session)[tuple(key)])
        said = next(session.events[s] for s in seqs if session.events[s].type == ASSISTANT_MESSAGE)
        calls = [b["id"] for b in said.data["message"]["content"] if b["type"] == "tool-call"]
        return {"seqs": seqs, "calls": calls, "done": not calls}

    async def run_tool(self, session_id: str, call_id: str, key: list[Any]) -> list[int] | str:
        session, steps = await self._session(session_id)
        if tuple(key) in steps.of(session):
            return list(steps.of(session)[tuple(key)])
        turn = open_turn(session.events)
        assert turn is not None  # (the workflow asks for the calls of its own open turn)
        step, name, arguments, recorded = turn.calls[call_id]
        tool = self.tools.get(name)
        if tool is not None and tool.approval:
            outcome = await self._approval(session, session_id, turn, call_id)
            if outcome == PARKED:
                return PARKED
            if outcome is not None and outcome != "allowed-once":
                refused = denial(outcome, name)  # type: ignore[arg-type]

                def refuse(s: Session) -> None:
                    body = [{"type": "text", "text": refused}]
                    result = tool_result_message(call_id, body, is_error=True)
                    data: dict[str, Any] = {"turn": turn.number, "step": step, "message": result}
                    s.append(TOOL_RESULT, data, surface_op="append")

                return await steps.append_once(session, key, refuse)
            if outcome == "allowed-once":  # (the start of the approved body, as the loop marks it)
                session.append(TOOL_CALL, tool_call(turn.number, step, call_id, name, arguments))
                recorded = None  # (its body has not run)
        if recorded is not None and (tool is None or tool.effect == "unsafe"):
            # a run of this step died after the call was recorded: its body may have run

            def write(s: Session) -> None:
                for event in closers(s.events[turn.start :]):
                    if (
                        event.type == TOOL_RESULT
                        and event.data["message"]["source"]["callId"] == call_id
                    ):
                        data = {**thaw(event.data), "meta": {SETTLEMENT: "unknown"}}
                        s.append(
                            TOOL_RESULT, data, surface_op="append", source_event_seqs=[recorded]
                        )

            return await steps.append_once(session, key, write)
        again = recorded is not None and not (tool is not None and tool.approval)
        seq = record_call(session, turn, call_id)
        await self._logs.runtime.sessions.flush(session)  # (durable before the body)
        failpoint("dbos:before-body")
        if tool is None:
            text, error = f'no tool named "{name}"', True
        else:
            text, error = await asyncio.to_thread(tool.body, json.loads(arguments), call_id), False
        failpoint("dbos:after-body")

        def answer(s: Session) -> None:
            result = tool_result_message(call_id, [{"type": "text", "text": text}], is_error=error)
            data: dict[str, Any] = {"turn": turn.number, "step": step, "message": result}
            if again:
                data["meta"] = {SETTLEMENT: "re-run"}
            s.append(TOOL_RESULT, data, surface_op="append", source_event_seqs=[seq])

        return await steps.append_once(session, key, answer)

    async def _approval(
        self, session: Session, session_id: str, turn: Any, call_id: str
    ) -> str | None:
        """Where the call's approval stands: :data:`PARKED` (asked now, or still waiting: the
        session is let go so a decider elsewhere may write), the decision's outcome, or
        ``None`` when its approved body was started already (a crash cut it)."""
        parked = {c.call_id: c for c in parked_calls(session.events)}
        if call_id in parked:
            decision = parked[call_id].decision
            if decision is None:
                await self._logs.let_go(session_id)
                return PARKED
            return decision.outcome
        asked = any(
            e.type == APPROVAL_ASKED and e.data.get("callId") == call_id
            for e in session.events[turn.start :]
        )
        if asked:
            return None
        _, name, arguments, _ = turn.calls[call_id]
        record_call(session, turn, call_id)
        ask = {"id": str(uuid.uuid4()), "toolName": name, "callId": call_id}
        ask[ARGUMENTS_DIGEST] = arguments_digest(arguments)
        session.append(APPROVAL_ASKED, ask)
        await self._logs.runtime.sessions.flush(session)
        await self._logs.let_go(session_id)
        return PARKED


def _key() -> list[Any]:
    """The running step's identity: ``[workflow_id, step_id]``."""
    return [DBOS.workflow_id, DBOS.step_id]


@DBOS.step(name="agent_session.user_message")
def _user_step(agent: str, session_id: str, text: str) -> list[int]:
    me = _AGENTS[agent]
    seqs = me._wait(me.user(session_id, text, _key()))
    failpoint("dbos:step-appended")
    return seqs


@DBOS.step(name="agent_session.model_call")
def _model_step(agent: str, session_id: str) -> dict[str, Any]:
    me = _AGENTS[agent]
    answer = me._wait(me.answer(session_id, _key()))
    failpoint("dbos:step-appended")
    return answer


@DBOS.step(name="agent_session.tool_call")
def _tool_step(agent: str, session_id: str, call_id: str) -> list[int] | str:
    me = _AGENTS[agent]
    seqs = me._wait(me.run_tool(session_id, call_id, _key()))
    failpoint("dbos:step-appended")
    return seqs


@DBOS.workflow(name="agent_session.turn")
def _turn(agent: str, session_id: str, text: str) -> list[int]:
    """One turn: the user's message, then model calls and their tools until an answer
    without calls; the seqs of that answer."""
    _user_step(agent, session_id, text)
    while True:
        answer = _model_step(agent, session_id)
        if answer["done"]:
            return list(answer["seqs"])
        for call_id in answer["calls"]:
            while _tool_step(agent, session_id, call_id) == PARKED:  # (a person decides)
                DBOS.recv(f"approval:{call_id}", timeout_seconds=POLL_S)
