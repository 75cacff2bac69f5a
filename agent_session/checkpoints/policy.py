"""The semantic checkpoint policy: the session log is durable before every model request,
before every top-level tool body, and after every completed step. Fail-closed.

Install it beside a persistence backend: ``runtime.install(checkpoint_policy)``. All three
boundaries call ``runtime.sessions.flush(session)``; without a backend that flush does nothing.

- **Request** (``llm/stream``): the downstream model stream is not even constructed until the
  flush has returned; a failed flush raises from the stream and the adapter is never called.
  A request without a live session passes through untouched.
- **Tool** (``tools/execute``, top-level calls only): the body runs only after the recorded
  ``tool/call`` is durable. A cancellation that lands during the flush returns the canonical
  ``ABORTED_BEFORE_DISPATCH`` result; a failed flush returns an error result
  (``Error: <reason>``); in both cases the body never runs. Nested calls (``parent`` set)
  reuse the outer checkpoint.
- **Step** (``agent/post-step``): the step's assistant message and ordered tool results are
  durable before the loop continues; a failure fails the turn before another request.
  Middleware registered before the policy appends its events into this checkpoint.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from agent_session.agent_loop.loop import AGENT_POST_STEP, StepContext
from agent_session.agent_loop.models import LLM_STREAM, ModelRequest
from agent_session.agent_loop.runtime import AgentRuntime
from agent_session.agent_loop.tools import (
    TOOLS_EXECUTE,
    ToolCall,
    ToolResult,
    aborted_before_dispatch,
)
from agent_session.session.live.runtime import PluginScope

__all__ = ["checkpoint_policy"]


def checkpoint_policy(scope: PluginScope) -> None:
    """Install the three checkpoints into ``scope.runtime`` (zero configuration)."""
    runtime = scope.runtime
    sessions = runtime.sessions
    if isinstance(runtime, AgentRuntime):
        runtime.checkpoints += 1

        def uncount() -> None:
            runtime.checkpoints -= 1

        scope.disposer.add(uncount)

    def stream(
        request: ModelRequest, downstream: Callable[[ModelRequest], AsyncIterator[Any]]
    ) -> AsyncIterator[Any]:
        session = sessions.get(request.session_id) if request.session_id else None
        if session is None:
            return downstream(request)

        async def checkpointed() -> AsyncIterator[Any]:
            await sessions.flush(session)
            async for chunk in downstream(request):  # constructed only now
                yield chunk

        return checkpointed()

    async def execute(
        call: ToolCall, downstream: Callable[[ToolCall], Awaitable[ToolResult]]
    ) -> ToolResult:
        session = call.session
        if call.parent is not None or session is None or not sessions.is_live(session):
            return await downstream(call)
        await sessions.flush(session)  # raises: the tool service turns it into an error result
        if call.cancel.cancelled:
            return aborted_before_dispatch()
        return await downstream(call)

    async def post_step(
        context: StepContext, downstream: Callable[[StepContext], Awaitable[None]]
    ) -> None:
        if sessions.is_live(context.session):
            await sessions.flush(context.session)
        await downstream(context)

    scope.wrap(LLM_STREAM, stream)
    scope.wrap(TOOLS_EXECUTE, execute)
    scope.wrap(AGENT_POST_STEP, post_step)
