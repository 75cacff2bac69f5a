"""Finishing an OpenAI Agents SDK run a crash interrupted: the run's calls are settled by what
each function tool declares about its effect (:func:`declare`), then the run continues.

``await resume_run(agent, session)`` settles (:func:`settle_run`) and, when there is something
to finish, runs ``Runner.run(agent, [], session=session, hooks=DurableRunHooks(session))``:
the model's next request carries every call's settled output. Settlement writes what the own
loop's writes (``agent_loop.settle``): the interrupted response again as a surface replace,
then per call a ``tool/call`` and a ``tool/result`` whose ``meta`` says how it was settled,
durable before each tool body runs. The turn stays open for the continuing run to close.

Effect classes attach to the SDK's own tool objects (``declare(function_tool(fn),
"idempotent")``), without a decorator of ours; a tool from an MCP server without a
declaration takes its class from its annotations (``readOnlyHint``, ``idempotentHint``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from agent_session.agent_loop.effects import EFFECTS, Effect, Reconcile, effect_of_mcp
from agent_session.agent_loop.settle import Pending, Plan, Settlement, plan, settlement
from agent_session.agent_loop.tools import ToolCall
from agent_session.integrations.openai_agents.items import tool_result_data
from agent_session.integrations.turns import OpenTurn, close_stale, next_step
from agent_session.session.events.builders import tool_call
from agent_session.session.events.outcomes import SETTLEMENT
from agent_session.session.events.types import ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT
from agent_session.session.json.lossless import thaw

if TYPE_CHECKING:
    from agents import Agent, FunctionTool, RunResult

    from agent_session.integrations.openai_agents.session import EventLogSession

__all__ = ["declare", "resume_run", "settle_run"]

_DECLARATION: Final = "_agent_session_effect"
"""The attribute of a tool object that holds what :func:`declare` said of it (on the object
itself: nothing keeps a tool alive that its owner dropped)."""


def declare(
    tool: FunctionTool, effect: Effect = "unsafe", *, reconcile: Reconcile | None = None
) -> FunctionTool:
    """Declare what running ``tool`` again does (``read``, ``idempotent`` or ``unsafe``, see
    :mod:`agent_loop.effects`) and, for an unsafe tool, its probe; return the tool itself.

    Raises:
        ValueError: An unknown class, or a probe on a tool that is not unsafe.
    """
    if effect not in EFFECTS:
        raise ValueError(f"effect must be one of {', '.join(EFFECTS)}, got {effect!r}")
    if reconcile is not None and effect != "unsafe":
        raise ValueError(f"a {effect} tool needs no reconcile probe: it is run again")
    setattr(tool, _DECLARATION, (effect, reconcile))
    return tool


async def settle_run(agent: Agent[Any], session: EventLogSession, *, context: Any = None) -> bool:
    """Settle the calls of the run a crash interrupted, or a run left open (the session's
    last turn; call it while no run is going on); return
    whether the run has something left to finish (a model request). Tool bodies and probes
    run on the caller's event loop; each call's ``tool/call`` is durable before its body."""
    interrupted = await session._call(_plan(session))
    if interrupted is None or not interrupted.continues:
        return False
    if not interrupted.settles:
        return True  # the continuing run opens its turn with the next model request
    await session._call(_open(session, interrupted))
    for pending in interrupted.calls:
        await session._call(_called(session, pending))
        how, data = await _settle(agent, pending, context)
        await session._call(_answered(session, pending, how, data))
    return True


async def resume_run(
    agent: Agent[Any], session: EventLogSession, *, context: Any = None, **run: Any
) -> RunResult | None:
    """Finish the session's last run: carry out the decisions on its parked approvals
    (:mod:`.approvals`), or settle the calls a crash interrupted (:func:`settle_run`); then
    ``Runner.run(agent, [], session=session, ...)`` with :class:`DurableRunHooks` (unless
    ``hooks`` is given among ``run``), parking what that run stops for in turn. ``None``
    when there was nothing to finish, or a parked call is still undecided. A call approved
    for other arguments than the recorded ones is refused, never run, and the model told
    why.
    """
    from agents import Runner

    from agent_session.integrations.openai_agents.approvals import carry_out, park_run
    from agent_session.integrations.openai_agents.hooks import DurableRunHooks

    carried = await carry_out(agent, session, context)
    if carried is False:
        return None
    if carried is None and not await settle_run(agent, session, context=context):
        return None
    run.setdefault("hooks", DurableRunHooks(session))
    result = await Runner.run(agent, [], session=session, context=context, **run)
    if result.interruptions:
        await park_run(result, session)
    return result


async def _plan(session: EventLogSession) -> Plan | None:
    """The settlement of the session's last turn: one a crash interrupted (closed by the
    repair on open), or one a run left open (closed now as a restart would close it)."""
    live = await session._live()
    stale = session._turn(live)
    if stale is not None:
        close_stale(live, stale)
        await session.runtime.sessions.flush(live)
    return plan(live)


async def _open(session: EventLogSession, interrupted: Plan) -> None:
    """The continuation turn's first step and the interrupted response again (a replace)."""
    live = await session._live()
    turn = next_step(live, None)
    data = {"turn": turn.number, "step": 1, "message": interrupted.message}
    shadowed = interrupted.shadowed
    replace = {"op": "replace", "start": shadowed[0], "end": shadowed[-1]}
    live.append(ASSISTANT_MESSAGE, data, surface_op=replace, source_event_seqs=shadowed)
    await session.runtime.sessions.flush(live)


async def _called(session: EventLogSession, pending: Pending) -> None:
    """The call's ``tool/call`` in the settlement step, durable before its body runs."""
    live = await session._live()
    turn = _open_turn(session, live)
    block = pending.block
    live.append(
        TOOL_CALL, tool_call(turn.number, 1, block["id"], block["name"], block["arguments"])
    )
    await session.runtime.sessions.flush(live)


async def _answered(
    session: EventLogSession, pending: Pending, how: Settlement | None, data: dict[str, Any]
) -> None:
    live = await session._live()
    turn = _open_turn(session, live)
    data["turn"], data["step"] = turn.number, 1
    if how is not None:
        data["meta"] = {SETTLEMENT: how}
    call_seq = turn.calls[pending.block["id"]][3]
    assert call_seq is not None
    live.append(TOOL_RESULT, data, surface_op="append", source_event_seqs=[call_seq])
    await session.runtime.sessions.flush(live)


def _open_turn(session: EventLogSession, live: Any) -> OpenTurn:
    turn = session._turn(live)
    assert turn is not None, "the settlement step's turn is open"
    return turn


async def _settle(
    agent: Agent[Any], pending: Pending, context: Any
) -> tuple[Settlement | None, dict[str, Any]]:
    """How ``pending`` is settled and its ``tool/result`` data (turn and step filled in
    later); ``None`` for a call that keeps the result it had."""
    block = pending.block
    if pending.answer == "kept":
        return None, _again(pending.result)
    tool = next((t for t in agent.tools if getattr(t, "name", None) == block["name"]), None)
    runnable = tool is not None and hasattr(tool, "on_invoke_tool")
    effect, reconcile = _declared(tool) if runnable else (None, None)
    call = ToolCall(block["id"], block["name"], block["arguments"])
    how, found = await settlement(pending.answer, effect, reconcile, call)
    if how == "unknown":
        return how, _again(pending.result)
    if found is not None:
        return how, _output(block["id"], "".join(b.get("text", "") for b in found.content))
    return how, await run_tool(tool, block, context)


def _declared(tool: Any) -> tuple[Effect, Reconcile | None]:
    """The class :func:`declare` gave ``tool``; else its MCP annotations'; else unsafe."""
    declared = getattr(tool, _DECLARATION, None)
    if declared is not None:
        return declared  # type: ignore[no-any-return]
    annotations = getattr(tool, "_mcp_annotations", None)
    if annotations is not None:
        dump = getattr(annotations, "model_dump", None)
        hints = dump() if callable(dump) else annotations
        return effect_of_mcp(hints if isinstance(hints, Mapping) else None), None
    return "unsafe", None


async def run_tool(tool: Any, block: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """The tool's body, as the SDK would run it; its output as the call's result (turn and
    step filled in later)."""
    from agents.tool_context import ToolContext

    wrapper = ToolContext(
        context,
        tool_name=block["name"],
        tool_call_id=block["id"],
        tool_arguments=block["arguments"],
    )
    output = await tool.on_invoke_tool(wrapper, block["arguments"])
    return _output(block["id"], output if isinstance(output, str) else str(output))


def _output(call_id: str, text: str) -> dict[str, Any]:
    item = {"type": "function_call_output", "call_id": call_id, "output": text}
    return tool_result_data(item, 0, 0)


def _again(result: Mapping[str, Any]) -> dict[str, Any]:
    """A result recorded again as it was (its message gets a new id)."""
    data = thaw(result)
    data["message"] = {**data["message"], "id": f"{data['message']['id']}-settled"}
    return dict(data)
