"""``DurableRunHooks``: the SDK's run hooks that make the event log durable before every model
call and before every local tool body, which the SDK's own sessions do not (they save a
turn's ``function_call`` only after its body ran).

- ``on_llm_start``: the run's input is recorded (a streamed run saves it only later), a step
  opens, the request header is logged when it changed (the system prompt, the model, its
  settings and the tools: :mod:`~agent_session.integrations.openai_agents.requests`), and
  the log is flushed before the model is called.
- ``on_llm_end``: the response's items are recorded as the SDK will add them (the following
  ``add_items`` finds them there and writes nothing twice).
- ``on_tool_start`` (awaited by the SDK before the body, in the call's own task): the
  ``tool/call`` is recorded and flushed. A crash in the body leaves the call recorded, and
  the next open answers it ``TOOL_OUTCOME_UNKNOWN``; results are recorded in model order when
  the SDK adds its outputs.

A flush that fails raises out of the hook, so the SDK never calls a model or runs a tool body
the log could not record.
"""

from __future__ import annotations

from typing import Any

from agents import Agent, RunHooks
from agents.items import ModelResponse, TResponseInputItem
from agents.run_context import RunContextWrapper
from agents.tool import Tool
from agents.tool_context import ToolContext

from agent_session.integrations.openai_agents.requests import request_header
from agent_session.integrations.openai_agents.session import EventLogSession

__all__ = ["DurableRunHooks"]


def model_name(agent: Agent[Any]) -> str:
    """The name an assistant message gives the model that answered ``agent``."""
    model = agent.model
    if isinstance(model, str) and model:
        return model
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else type(model).__name__


class DurableRunHooks(RunHooks[Any]):
    """Run hooks bound to one :class:`EventLogSession`; pass both to ``Runner.run``."""

    def __init__(self, session: EventLogSession) -> None:
        self.session = session

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        self.session.model = model_name(agent)
        header = request_header(agent, self.session.model, system_prompt)
        await self.session.before_model_call(input_items, header)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        await self.session.model_responded(response.to_input_items(), response.usage)

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Any, tool: Tool) -> None:
        # another local tool family has no call id: nothing to record, durable all the same
        call_id = context.tool_call_id if isinstance(context, ToolContext) else None
        await self.session.tool_starting(call_id)
