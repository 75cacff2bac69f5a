"""Subagents a crash cannot orphan: a tool of the loop that runs a child agent in a session of
its own.

``runtime.subagent(name, description, model=...)`` registers a tool whose body, for a call
``callId`` of session ``P``:

1. records ``subagent/spawned {callId, session, depth}`` in ``P`` and makes ``P`` durable
   (its ``tool/call`` is already, by the checkpoint policy): the parent refers to the child
   before the child's first model request;
2. opens the child, ``P>callId`` (:func:`session.events.subagents.child_id`), created with
   ``parentSession: P``, ``origin: "subagent"`` and ``delegationDepth`` one more than
   ``P``'s, or resumed when it is stored (its crash repaired);
3. finishes it: a child that already answered is not run again (its answer is the
   result); one a crash interrupted is resumed (its calls settled by their effect class, its
   turn continued); one never started runs its task;
4. returns the child's last answer (an error result when its turn ended otherwise).

The tool is ``idempotent``: running a call again continues the same child, so settlement
runs it again after a crash. Crash repair of the parent answers the call with the child's
state (``session.events.subagents.child_answer``): a child that finished lands its answer
once and is never run again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from agent_session.agent_loop.compaction import CompactionPolicy
from agent_session.agent_loop.tools import ToolCall, ToolResult
from agent_session.session.errors import SessionCollisionError, SessionNotFoundError
from agent_session.session.events.subagents import child_answer, child_id, spawned
from agent_session.session.events.turns import brackets
from agent_session.session.events.types import SUBAGENT_SPAWNED
from agent_session.session.live.session import Session

if TYPE_CHECKING:
    from agent_session.agent_loop.runtime import AgentRuntime
    from agent_session.session.live.hooks import Disposer

__all__ = ["TASK_PARAMETERS", "register_subagent"]

TASK_PARAMETERS: Final = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "what the subagent is to do"}},
    "required": ["task"],
}
"""The default parameters of a subagent tool: the task, as the child's first message."""


def register_subagent(
    runtime: AgentRuntime,
    name: str,
    description: str,
    *,
    model: str,
    system: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    task: Callable[[Any], str] | None = None,
    max_depth: int = 3,
    compaction: CompactionPolicy | None = None,
) -> Disposer:
    """Register the tool ``name`` that runs a child agent on ``model`` (``provider/name``)
    with ``system``, given the call's arguments as ``task(arguments)`` (by default their
    ``task``); a call deeper than ``max_depth`` delegations is refused (an error result).
    The child has the runtime's tools (this one included). Returns the disposer."""
    if type(max_depth) is not int or max_depth < 1:
        raise ValueError(f"max_depth must be a positive integer, got {max_depth!r}")
    task_of = task or _task

    async def body(arguments: Any, call: ToolCall) -> ToolResult:
        parent = call.session
        if parent is None:
            raise ValueError(f'the subagent tool "{name}" runs only from a session\'s tool call')
        depth = (parent.header.delegation_depth or 0) + 1
        if depth > max_depth:
            return ToolResult.failure(
                f"delegation deeper than {max_depth} levels is refused (session {parent.id} is "
                f"at depth {depth - 1})"
            )
        child = await _child(runtime, parent, call.call_id, depth)
        try:
            agent = runtime.agent(child, model=model, system=system, compaction=compaction)
            answer = child_answer(child.id, child.events)
            if answer.state != "finished":
                outcome = await agent.resume() if child.interrupted is not None else None
                if outcome is None:
                    outcome = await agent.run_turn(task_of(arguments))
                answer = child_answer(child.id, child.events)
                if answer.state != "finished":
                    kind = outcome.get("kind")
                    return ToolResult.failure(
                        f"the subagent (session {child.id}) ended {kind}, not a success",
                        {"name": "SubagentError", "code": "SUBAGENT_UNFINISHED"},
                    )
        finally:
            await runtime.sessions.dispose(child)
        return ToolResult([{"type": "text", "text": answer.text}], meta=answer.meta())

    return runtime.tools.register(
        name, description, parameters or TASK_PARAMETERS, body, effect="idempotent"
    )


def _task(arguments: Any) -> str:
    task = arguments.get("task") if isinstance(arguments, Mapping) else None
    if not isinstance(task, str) or not task:
        raise ValueError('a subagent call needs a non-empty "task" string')
    return task


async def _child(runtime: AgentRuntime, parent: Session, call_id: str, depth: int) -> Session:
    """The child session of ``parent``'s call ``call_id``, referred to durably by the parent
    first, then resumed or created."""
    id = child_id(parent.id, call_id)
    events = parent.events
    if call_id not in spawned(events, brackets(events).start_index or 0):
        parent.append(SUBAGENT_SPAWNED, {"callId": call_id, "session": id, "depth": depth})
    await runtime.sessions.flush(parent)  # (before the child's first request)
    child = runtime.sessions.get(id)
    if child is None and runtime.persistence is not None:  # (in memory: nothing to resume)
        with contextlib.suppress(SessionNotFoundError):
            child = await runtime.sessions.resume(id)
    if child is None:
        return runtime.sessions.create(
            id, parent_session=parent.id, origin="subagent", delegation_depth=depth
        )
    if child.header.parent_session != parent.id:
        raise SessionCollisionError(
            f'session "{id}" exists and is not a subagent of session "{parent.id}"'
        )
    return child
