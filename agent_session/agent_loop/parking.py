"""Parked turns: deciding a parked tool call, and carrying the decision out.

A turn parks when an ask of a service mounted with ``user_approval(park=True)`` is decided by
no answerer in the process (:class:`agent_loop.approval.Parked`): the step stays open, the
log is durable, and ``run_turn`` returns ``{"kind": "awaiting-approval", "approvals": [...]}``.
Which calls are parked is read from the log alone (:mod:`session.events.parked`), so a
decision can come from any process: :func:`decide` on a live session here, or
``agent_session.approve`` / ``agent-session approve`` on a stored one. ``agent.resume()``
then carries it out (:func:`carry_out`), inside the parked turn and step:

- ``allowed-once``: the call's ``tool/call`` is recorded again (the mark that its body
  started, made durable before the body), then the body runs once with the recorded
  arguments and call id;
- ``rejected``, ``cancelled``, ``unavailable``: the reference's denial result;
- ``allowed-once`` for other arguments than the recorded ones (a decision or an ask that saw
  another digest): refused, never run, with an ``APPROVAL_MISMATCH`` result that tells the
  model why (:func:`mismatch`), so the session can always go on;
- no decision and the ask's deadline passed: it is decided ``cancelled`` first.

Then the calls of the step that had not started run as the loop runs calls (an ask among
them may park again), and the turn goes on with the next model request. No model request
is repeated to get there.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from agent_session.agent_loop.approval import OUTCOMES, Outcome, denial
from agent_session.agent_loop.cancel import CancelSignal
from agent_session.agent_loop.dispatch import record_call, record_result, run_tools
from agent_session.agent_loop.spending import awaiting_budget
from agent_session.agent_loop.tools import (
    ToolCall,
    ToolResult,
    aborted_before_dispatch,
    outcome_unknown,
)
from agent_session.session.errors import (
    ApprovalError,
    ApprovalExpiredError,
    ApprovalMismatchError,
    ApprovalNotPendingError,
)
from agent_session.session.events.budget import budget_parked
from agent_session.session.events.eventlog import is_run, iter_parts
from agent_session.session.events.header import now_ms
from agent_session.session.events.parked import (
    ARGUMENTS_DIGEST,
    DECIDED_BY,
    ParkedCall,
    arguments_digest,
    parked_calls,
)
from agent_session.session.events.turns import brackets
from agent_session.session.events.types import (
    APPROVAL_DECIDED,
    ASSISTANT_MESSAGE,
    STEP_START,
    TOOL_CALL,
)
from agent_session.session.live.session import Session

if TYPE_CHECKING:
    from agent_session.agent_loop.loop import Agent

__all__ = [
    "AWAITING_APPROVAL",
    "DIGEST_PREFIX",
    "MISMATCH",
    "awaiting",
    "carry_out",
    "decide",
    "decision_data",
    "find_parked",
    "mismatch",
]

AWAITING_APPROVAL: Final = "awaiting-approval"
"""The ``kind`` of what ``run_turn`` and ``resume`` return while a call waits for approval."""


def awaiting(session: Session) -> dict[str, Any]:
    """``{"kind": "awaiting-approval", "approvals": [...]}``: the parked calls of the session,
    each as ``agent-session approvals --json`` shows it; for a turn parked over its budget,
    ``{"kind": "awaiting-budget", "budget": {...}}`` (:mod:`agent_loop.spending`)."""
    over_budget = awaiting_budget(session)
    if over_budget is not None:
        return over_budget
    return {
        "kind": AWAITING_APPROVAL,
        "approvals": [call.to_json() for call in parked_calls(session.events)],
    }


def find_parked(events: Sequence[Any], session_id: str, call_id: str) -> ParkedCall:
    """The parked call ``call_id`` of a log that waits for a decision.

    Raises:
        ApprovalNotPendingError: None is parked under that id, or it is already decided.
    """
    for call in parked_calls(events):
        if call.call_id != call_id:
            continue
        if call.decision is not None:
            by = f" by {call.decision.by}" if call.decision.by else ""
            at = datetime.datetime.fromtimestamp(call.decision.time / 1000, tz=datetime.UTC)
            raise ApprovalNotPendingError(
                f'call "{call_id}" of session "{session_id}" is already decided '
                f"{call.decision.outcome}{by} at {at:%Y-%m-%d %H:%M:%S} UTC; the agent "
                "carries it out when it resumes"
            )
        return call
    parked = ", ".join(f'"{c.call_id}"' for c in parked_calls(events)) or "none"
    raise ApprovalNotPendingError(
        f'no call "{call_id}" waits for approval in session "{session_id}" (parked: {parked})'
    )


def decision_data(
    call: ParkedCall,
    outcome: Outcome,
    *,
    by: str | None = None,
    reason: str | None = None,
    digest: str | None = None,
    now: int | None = None,
) -> tuple[dict[str, Any], ApprovalError | None]:
    """The ``approval/decided`` data deciding ``call``, and the error to raise once it is
    logged: past the ask's deadline the decision is ``cancelled`` whatever was asked
    (:class:`ApprovalExpiredError`).

    Raises:
        ValueError: ``outcome`` is not one of the four.
        ApprovalMismatchError: ``digest`` (the arguments the decider saw: the whole
            digest, or a prefix of at least :data:`DIGEST_PREFIX` characters) does not name
            the recorded arguments', or an approval is asked for a call whose ask saw other
            arguments than the recorded ones (nothing is to be logged).
    """
    if outcome not in OUTCOMES:
        raise ValueError(f"an approval outcome is one of {', '.join(OUTCOMES)}; got {outcome!r}")
    recorded = arguments_digest(call.arguments)
    if digest is not None and not _names(digest, recorded):
        raise ApprovalMismatchError(
            f'call "{call.call_id}" was recorded with arguments {recorded}, not the {digest} '
            "the decision names; nothing was decided"
        )
    if outcome == "allowed-once" and call.arguments_digest != recorded:
        raise ApprovalMismatchError(
            f'call "{call.call_id}" was asked about with arguments {call.arguments_digest}, '
            f"not the recorded {recorded}: it cannot be approved (reject it; the model can "
            "ask again); nothing was decided"
        )
    error: ApprovalError | None = None
    when = now_ms() if now is None else now
    if call.expired(when) and outcome != "cancelled":
        outcome, by = "cancelled", "deadline"
        error = ApprovalExpiredError(
            f'the approval of call "{call.call_id}" (tool "{call.tool_name}") expired at '
            f"{call.expires_at} ms; it is decided cancelled"
        )
    data: dict[str, Any] = {"id": call.ask_id, "outcome": outcome, ARGUMENTS_DIGEST: recorded}
    if by is not None:
        data[DECIDED_BY] = by
    if reason is not None:
        data["reason"] = reason
    return data, error


DIGEST_PREFIX: Final = len("sha256:") + 12
"""The shortest prefix of a digest a decision may name it by (what ``approvals`` prints)."""


def _names(digest: str, recorded: str) -> bool:
    """Whether ``digest`` (what a decider saw) names ``recorded``: the whole of it, or a
    prefix of at least :data:`DIGEST_PREFIX` characters."""
    return digest == recorded or (len(digest) >= DIGEST_PREFIX and recorded.startswith(digest))


def decide(
    session: Session,
    call_id: str,
    outcome: Outcome,
    *,
    by: str | None = None,
    reason: str | None = None,
    digest: str | None = None,
) -> None:
    """Decide the parked call ``call_id`` of a live ``session`` (the agent's own process):
    append its ``approval/decided``; ``agent.resume()`` carries it out.

    Raises:
        ApprovalNotPendingError: No such parked call, or it is already decided.
        ApprovalMismatchError: ``digest`` is not the recorded arguments' digest.
        ApprovalExpiredError: The deadline passed: it was decided ``cancelled`` instead.
    """
    call = find_parked(session.events, session.id, call_id)
    data, error = decision_data(call, outcome, by=by, reason=reason, digest=digest)
    session.append(APPROVAL_DECIDED, data)
    if error is not None:
        raise error


MISMATCH: Final = "APPROVAL_MISMATCH"
"""The error code of the result of a call approved for other arguments than the recorded
ones: it was refused, never run."""


def mismatch(call: ParkedCall) -> str | None:
    """Why an ``allowed-once`` decision on ``call`` must not be carried out: the recorded
    arguments are not the ones its ask and its decision saw (the model reads ``Error: `` and
    this); ``None`` when they are, or the call was not approved."""
    decided = call.decision
    if decided is None or decided.outcome != "allowed-once" or call.matches:
        return None
    return (
        f'tool "{call.tool_name}" was approved for arguments {decided.arguments_digest}, not '
        f"the recorded {arguments_digest(call.arguments)}: it was not run; ask for it again"
    )


async def carry_out(agent: Agent, turn: int, step: int, cancel: CancelSignal) -> str | None:
    """Inside the parked turn's open step: carry out each parked call's decision (a passed
    deadline decides ``cancelled``), then run the step's calls that never started. A step
    parked over its budget makes its model request instead (the step's outcome, as the
    loop's step returns it)."""
    session, tools = agent.session, agent.runtime.tools
    if budget_parked(session.events) is not None:
        return await agent._step(turn, step, cancel)
    for call in parked_calls(session.events):
        outcome = call.decision.outcome if call.decision is not None else None
        if outcome is None:  # (resume() only enters with every undecided call expired)
            data, _ = decision_data(call, "cancelled", by="deadline")
            session.append(APPROVAL_DECIDED, data)
            outcome = "cancelled"
        block = {"id": call.call_id, "name": call.tool_name, "arguments": call.arguments}
        result: ToolResult
        refusal = mismatch(call)
        if refusal is not None:  # approved for other arguments: refused, and the model told
            error = {"name": "ApprovalMismatchError", "code": MISMATCH}
            call_seq, result = call.call_seq, ToolResult.failure(refusal, error)
        elif outcome == "allowed-once":
            call_seq = record_call(session, turn, step, block)  # the body's start, durable
            await agent.runtime.sessions.flush(session)
            args = (call.call_id, call.tool_name, call.arguments, session, agent, None, cancel)
            try:
                result = await tools.execute(ToolCall(*args))
            except BaseException:  # torn down from outside while the body ran
                record_result(session, turn, step, call.call_id, call_seq, outcome_unknown())
                for later in _not_started(session.events):
                    seq = record_call(session, turn, step, later)
                    record_result(session, turn, step, later["id"], seq, aborted_before_dispatch())
                raise
        else:
            call_seq = call.call_seq
            known: Outcome = outcome if outcome in OUTCOMES else "unavailable"
            result = ToolResult.failure(denial(known, call.tool_name))
        record_result(session, turn, step, call.call_id, call_seq, result)
    remaining = _not_started(session.events)
    if remaining:
        await run_tools(agent, turn, step, remaining, cancel)
    return None


def _not_started(events: Sequence[Any]) -> list[Mapping[str, Any]]:
    """The tool-call blocks of the open step's assistant message with no ``tool/call``."""
    start = brackets(events).open_start
    blocks: list[Mapping[str, Any]] = []
    recorded: set[Any] = set()
    for event in iter_parts(events[start or 0 :]):
        if is_run(event):
            continue
        if event.type == STEP_START:
            blocks, recorded = [], set()
        elif event.type == ASSISTANT_MESSAGE:
            content = event.data["message"].get("content") or ()
            blocks = [b for b in content if b.get("type") == "tool-call"]
        elif event.type == TOOL_CALL:
            recorded.add(event.data.get("callId"))
    return [block for block in blocks if block["id"] not in recorded]
