"""Settling the calls of a turn a crash interrupted, by what each tool says about itself.

Crash repair closes an interrupted turn honestly (``TOOL_NOT_STARTED``,
``TOOL_OUTCOME_UNKNOWN``); :func:`plan` reads what it left, and the agent's ``resume()``
settles it in a continuation turn, in events the reference loads:

1. ``turn/start``, ``step/start``, then the interrupted step's ``assistant/message`` again,
   as a surface *replace* of that message and the results that answered it: the model sees
   the calls once, and each gets exactly one result below.
2. Per call, in the model's order, a ``tool/call`` and a ``tool/result`` whose ``meta``
   says how it was settled (``settlement``):

   - ``kept``: the call had its own result before the crash; it is recorded again as it was;
   - ``dispatched``: it never started (``TOOL_NOT_STARTED``): the body runs now, once;
   - ``re-run``: a ``read`` or ``idempotent`` tool whose outcome was unknown runs again
     under the same call id;
   - ``reconciled``: an ``unsafe`` tool's probe found the effect: its result is recorded;
   - ``run-after-probe``: the probe found no trace of it: the body runs once;
   - ``unknown``: an ``unsafe`` tool without a probe, or a probe that cannot tell (or a tool
     no longer registered): the result stays ``TOOL_OUTCOME_UNKNOWN``.

Every body runs through ``tools/execute``, so the checkpoint policy makes its ``tool/call``
durable first, and only after ``tools/pre-execute`` allowed it: a call that needs approval is
asked again, and an ask nobody in the process decides fails closed (``unavailable``) instead
of parking; the model reads the refusal and may ask for the call again. A crash during
settlement is itself repaired and settled the same way: a call settled before it is kept, the
others are settled again.

A probe that raises, or answers something that is not a probe's answer or a result no log can
hold, cannot tell: its call stays ``unknown``. Settlement stopped midway by anything else (a
cancellation, a timeout, Ctrl-C, an error of a hook) ends as a crash would have left it
(:class:`SettlementStopped`): the calls it did not answer are answered as crash repair answers
them (``TOOL_OUTCOME_UNKNOWN`` where a body was running, else the answer they had), and the
turn ends ``interrupted``, so the log stays a valid transcript and the next ``resume()``
settles them again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agent_session.agent_loop.approval import pre_execute
from agent_session.agent_loop.cancel import CancelSignal
from agent_session.agent_loop.dispatch import record_call, record_result
from agent_session.agent_loop.effects import Applied, Effect, NotApplied, Reconcile, Unknown
from agent_session.agent_loop.tools import (
    ToolCall,
    ToolResult,
    as_result,
    outcome_unknown,
    recordable,
)
from agent_session.session.events.outcomes import SETTLEMENT, TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN
from agent_session.session.events.turns import brackets
from agent_session.session.events.types import ASSISTANT_MESSAGE, TOOL_RESULT
from agent_session.session.json.lossless import thaw
from agent_session.session.live.session import Session

if TYPE_CHECKING:
    from agent_session.agent_loop.loop import Agent

__all__ = [
    "Answer",
    "Pending",
    "Plan",
    "Settlement",
    "SettlementStopped",
    "plan",
    "settle_step",
    "settlement",
]

log = logging.getLogger("agent_loop")

Answer = Literal["kept", "not-started", "unknown"]
"""How a call of the interrupted step was answered when the crash was repaired."""
Settlement = Literal["dispatched", "re-run", "reconciled", "run-after-probe", "unknown"]
"""How a call without a result of its own was settled (the ``meta`` of its result)."""


@dataclass(frozen=True, slots=True)
class Pending:
    """One call of the interrupted step."""

    block: Mapping[str, Any]
    """Its tool-call block (``id``, ``name``, ``arguments``)."""
    answer: Answer
    result: Mapping[str, Any]
    """The data of the ``tool/result`` that answers it now."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What settling an interrupted turn involves."""

    message: Mapping[str, Any] | None
    """The interrupted step's assistant message with its calls, or ``None`` when the turn's
    last model answer asked for none (or there was none)."""
    shadowed: tuple[int, ...]
    """The surface nodes the settlement step replaces: that message and its results."""
    calls: tuple[Pending, ...]
    continues: bool
    """Whether the job goes on with a model request (it does unless the turn's last word
    was already the model's answer)."""

    @property
    def settles(self) -> bool:
        """Whether a settlement step is needed: some call has no result of its own."""
        return any(call.answer != "kept" for call in self.calls)


def plan(session: Session) -> Plan | None:
    """The settlement of ``session``'s last turn when a crash interrupted it (as
    :attr:`Session.interrupted` says), or ``None``."""
    crash = session.interrupted
    if crash is None:
        return None
    events = session.events
    start = brackets(events).start_index or 0
    nodes = list(session.surface.nodes)
    answers = [seq for seq in nodes if seq > start and events[seq].type == ASSISTANT_MESSAGE]
    last = events[nodes[-1]] if nodes else None
    answered_by_model = last is not None and last.type == ASSISTANT_MESSAGE
    if not answers or not _calls(events[answers[-1]].data["message"]):
        return Plan(None, (), (), continues=not answered_by_model)
    message_seq = answers[-1]
    message = thaw(events[message_seq].data["message"])
    results = {
        _call_id(events[seq].data): seq
        for seq in nodes
        if seq > message_seq and events[seq].type == TOOL_RESULT
    }
    calls: list[Pending] = []
    for block in _calls(message):
        seq = results.get(block["id"])
        if seq is None:  # not answered on the surface (cannot happen after a repair)
            return Plan(None, (), (), continues=False)
        data = thaw(events[seq].data)
        code = (data.get("error") or {}).get("code")
        answer: Answer = (
            "not-started"
            if code == TOOL_NOT_STARTED
            else "unknown"
            if code == TOOL_OUTCOME_UNKNOWN
            else "kept"
        )
        calls.append(Pending(block, answer, data))
    shadowed = tuple(seq for seq in nodes if seq >= message_seq)
    return Plan(message, shadowed, tuple(calls), continues=True)


def _calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [b for b in message.get("content", ()) if b.get("type") == "tool-call"]


def _call_id(data: Mapping[str, Any]) -> Any:
    source = data.get("message", {}).get("source", {})
    return source.get("callId")


class SettlementStopped(Exception):
    """Settlement was stopped midway by :attr:`cause`; the calls it had not answered were
    answered as crash repair answers them, and the turn is to end ``interrupted``."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"settlement stopped: {cause!r}")
        self.cause = cause


async def settle_step(
    agent: Agent, turn: int, step: int, interrupted: Plan, cancel: CancelSignal
) -> None:
    """The settlement step of a continuation turn (the module's steps 1 and 2), inside an open
    ``step/start``: the interrupted message again, then each call settled in the model's
    order, one at a time.

    Raises:
        SettlementStopped: Something stopped it midway; every call has its one result.
    """
    assert interrupted.message is not None
    session = agent.session
    shadowed = interrupted.shadowed
    data: dict[str, Any] = {"turn": turn, "step": step, "message": interrupted.message}
    replace = {"op": "replace", "start": shadowed[0], "end": shadowed[-1]}
    session.append(ASSISTANT_MESSAGE, data, surface_op=replace, source_event_seqs=shadowed)
    now, answered = _Settling(), 0
    try:
        for pending in interrupted.calls:
            now.call_seq, now.body_started = record_call(session, turn, step, pending.block), False
            result = await _settled(agent, pending, cancel, now)
            record_result(session, turn, step, pending.block["id"], now.call_seq, result)
            answered, now.call_seq = answered + 1, None
    except BaseException as e:
        for index, pending in enumerate(interrupted.calls[answered:]):
            current = index == 0  # (the call being settled when it stopped)
            seq = now.call_seq if current else None
            if seq is None:
                seq = record_call(session, turn, step, pending.block)
            # a body that was running may have had its effect; any other call keeps its answer
            stopped = outcome_unknown() if current and now.body_started else _recorded(pending)
            record_result(session, turn, step, pending.block["id"], seq, stopped)
        raise SettlementStopped(e) from e


@dataclass(slots=True)
class _Settling:
    """The call a settlement step is settling: its ``tool/call`` seq (``None`` once its result
    is recorded) and whether its body was started."""

    call_seq: int | None = None
    body_started: bool = False


def _recorded(pending: Pending) -> ToolResult:
    """The result that answers ``pending`` now, to record again as it is."""
    kept = pending.result
    return ToolResult(
        kept["message"]["content"][0].get("content", []),
        bool(kept["message"]["content"][0].get("isError")),
        kept.get("error"),
        kept.get("meta"),
    )


async def _settled(
    agent: Agent, pending: Pending, cancel: CancelSignal, now: _Settling
) -> ToolResult:
    """The result of one call of the interrupted step, settled by its tool's class (its probe
    asked, its body run when that decides it, marked in ``now`` from then on)."""
    if pending.answer == "kept":
        return _recorded(pending)
    session, tools, block = agent.session, agent.runtime.tools, pending.block
    call = ToolCall(block["id"], block["name"], block["arguments"], session, agent, None, cancel)
    spec = tools.get(call.name)  # (a missing tool answers like an unsafe one)
    how, found = await settlement(
        pending.answer, spec.effect if spec else "unsafe", spec.reconcile if spec else None, call
    )
    if how == "unknown":
        result = outcome_unknown()
    elif found is not None:
        result = found
    else:  # a body runs: only as the approval allows (never parking here)
        refused = await pre_execute(agent, call, may_park=False)
        now.body_started = refused is None
        result = refused if refused is not None else await tools.execute(call)
    return ToolResult(result.content, result.is_error, result.error, _meta(how, result.meta))


async def settlement(
    answer: Answer, effect: Effect | None, reconcile: Reconcile | None, call: ToolCall
) -> tuple[Settlement, ToolResult | None]:
    """How a call of the interrupted step is settled (``answer``: how repair left it;
    ``effect``: its tool's class, ``None`` when no tool of that name can run it), asking the
    tool's probe when that decides it. The result is the probe's for ``reconciled`` and
    ``None`` otherwise: the caller runs the body for ``dispatched``, ``re-run`` and
    ``run-after-probe``, and records the repair's answer again for ``unknown``."""
    if effect is None:
        return "unknown", None
    if answer == "not-started":
        return "dispatched", None
    if effect in ("read", "idempotent"):
        return "re-run", None
    if reconcile is None:
        return "unknown", None
    try:
        found = await reconcile(call)
        if isinstance(found, Applied):
            return "reconciled", recordable(as_result(found.result))
    except Exception as e:
        log.warning('probe of call "%s" (tool "%s") cannot tell: %s', call.call_id, call.name, e)
        return "unknown", None
    if isinstance(found, NotApplied):
        return "run-after-probe", None
    if not isinstance(found, Unknown):
        log.warning(
            'probe of call "%s" (tool "%s") answered %s, not Applied, NotApplied or Unknown: '
            "it cannot tell",
            call.call_id,
            call.name,
            type(found).__name__,
        )
    return "unknown", None


def _meta(how: str, meta: Any) -> dict[str, Any]:
    """A settled result's ``meta``: how it was settled, and the tool's own meta."""
    return {SETTLEMENT: how} if meta is None else {SETTLEMENT: how, "tool": meta}
