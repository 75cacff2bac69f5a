"""Running a step's tool calls: ``tool/call`` per call in the model's order, its
``tools/pre-execute`` verdict, its body through ``tools/execute`` (a rolling pool of parallel
calls, exclusive calls alone), and one ``tool/result`` per call, committed strictly in the
model's order.

A call whose approval was parked (:class:`Parked`) stops the step where it stands: the calls
before it finish and are answered, the parked call and the calls after it get nothing (no
synthetic results), and :class:`Parked` goes on to the turn, which leaves the step open.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agent_session.agent_loop.approval import Parked, pre_execute
from agent_session.agent_loop.cancel import CancelSignal
from agent_session.agent_loop.tools import (
    ToolCall,
    ToolResult,
    aborted_before_dispatch,
    torn_down_result,
)
from agent_session.session.events.builders import tool_call, tool_result_message
from agent_session.session.events.types import TOOL_CALL, TOOL_RESULT
from agent_session.session.live.session import Session

if TYPE_CHECKING:
    from agent_session.agent_loop.loop import Agent

__all__ = ["Started", "record_call", "record_result", "run_tools"]

Started = list[tuple[Mapping[str, Any], int, "asyncio.Future[ToolResult]"]]
"""The calls started so far: their block, the seq of their ``tool/call``, their result."""


async def run_tools(
    agent: Agent, turn: int, step: int, calls: Sequence[Mapping[str, Any]], cancel: CancelSignal
) -> None:
    """Start ``calls`` in model order and commit their results in model order.

    Guarantees: every call gets exactly one ``tool/result`` (a teardown answers the bodies
    still running with their unknown outcome, and the calls never dispatched with a
    synthetic pair), except on :class:`Parked`: then only the calls before the parked one are
    answered, after their bodies finished."""
    session = agent.session
    started: Started = []
    committed = 0

    def commit_ready() -> None:
        nonlocal committed
        while committed < len(started) and started[committed][2].done():
            block, call_seq, task = started[committed]
            record_result(session, turn, step, block["id"], call_seq, task.result())
            committed += 1

    not_started = list(calls)
    parked = False
    try:
        await _dispatch(agent, turn, step, cancel, started, not_started, commit_ready)
    except Parked as stop:
        parked = True
        if stop.teardown is None:  # the calls before it finish and are answered
            if started:
                await asyncio.wait([t for _, _, t in started])
            commit_ready()
            raise
        _answer_torn_down(session, turn, step, started[committed:])
        raise
    except BaseException:
        _answer_torn_down(session, turn, step, started[committed:])
        committed = len(started)
        raise
    finally:
        for block in [] if parked else not_started:  # never dispatched: a synthetic pair
            call_seq = record_call(session, turn, step, block)
            record_result(session, turn, step, block["id"], call_seq, aborted_before_dispatch())


def _answer_torn_down(session: Session, turn: int, step: int, running: Started) -> None:
    """Torn down from outside: stop the bodies still running and answer each call before
    the exception goes on (the results that exist, else unknown outcome)."""
    for _, _, task in running:
        task.cancel()
    for block, call_seq, task in running:
        record_result(session, turn, step, block["id"], call_seq, torn_down_result(task))


async def _dispatch(
    agent: Agent,
    turn: int,
    step: int,
    cancel: CancelSignal,
    started: Started,
    not_started: list[Mapping[str, Any]],
    commit_ready: Callable[[], None],
) -> None:
    """Start ``not_started`` calls in order (popping each), and wait for every started one
    to finish, committing results as they become ready."""
    session, tools = agent.session, agent.runtime.tools
    while not_started and not cancel.cancelled:
        block = not_started[0]
        running = [t for _, _, t in started if not t.done()]
        # An exclusive call starts alone and runs alone; parallel ones share a pool.
        alone = tools.exclusive(block["name"]) or (
            bool(started) and tools.exclusive(started[-1][0]["name"])
        )
        if running and (alone or len(running) >= agent.max_parallel_tools):
            await asyncio.wait(
                running,
                return_when=asyncio.ALL_COMPLETED if alone else asyncio.FIRST_COMPLETED,
            )
            commit_ready()
            continue
        not_started.pop(0)
        call_seq = record_call(session, turn, step, block)
        args = (block["id"], block["name"], block["arguments"], session, agent, None, cancel)
        call = ToolCall(*args)
        refused = await pre_execute(agent, call)  # the next call waits for this verdict
        task: asyncio.Future[ToolResult]
        if refused is None:
            task = asyncio.ensure_future(tools.execute(call))
        else:
            task = asyncio.get_running_loop().create_future()
            task.set_result(refused)
        started.append((block, call_seq, task))
        await asyncio.sleep(0)  # let the body start before the next call is considered
        commit_ready()
    if started:
        await asyncio.wait([t for _, _, t in started])
    commit_ready()


def record_call(session: Session, turn: int, step: int, block: Mapping[str, Any]) -> int:
    """Log ``tool/call`` for a tool-call block; return its seq."""
    data = tool_call(turn, step, block["id"], block["name"], block["arguments"])
    return session.append(TOOL_CALL, data).seq


def record_result(
    session: Session, turn: int, step: int, call_id: str, call_seq: int, result: ToolResult
) -> None:
    """Log the ``tool/result`` answering the call recorded at ``call_seq``."""
    message = tool_result_message(call_id, result.content, is_error=result.is_error)
    data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
    if result.error is not None:
        data["error"] = dict(result.error)
    if result.meta is not None:
        data["meta"] = result.meta
    session.append(TOOL_RESULT, data, surface_op="append", source_event_seqs=[call_seq])
