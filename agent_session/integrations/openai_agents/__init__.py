"""Crash-safe sessions for the OpenAI Agents SDK (extra ``[openai-agents]``)::

session = await EventLogSession.open("./agent-sessions", "chat-1")
result = await Runner.run(agent, "hi", session=session, hooks=DurableRunHooks(session))
await session.aclose()
"""

from agent_session.integrations.openai_agents.hooks import DurableRunHooks
from agent_session.integrations.openai_agents.session import EventLogSession

__all__ = ["DurableRunHooks", "EventLogSession"]
