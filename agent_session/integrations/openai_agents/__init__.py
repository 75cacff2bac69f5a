"""Crash-safe sessions for the OpenAI Agents SDK (extra ``[openai-agents]``)::

session = await EventLogSession.open("./agent-sessions", "chat-1")
result = await Runner.run(agent, "hi", session=session, hooks=DurableRunHooks(session))
await session.aclose()

After a crash, ``await resume_run(agent, session)`` settles the interrupted calls by the
classes ``declare(tool, "idempotent")`` gave their tools, and finishes the run. After a run
that stopped for a ``needs_approval`` tool, ``await park_run(result, session)`` makes the
approval durable; once it is decided (``agent-session approve``), ``resume_run`` carries the
decision out in any process and finishes the run.
"""

from agent_session.integrations.openai_agents.approvals import park_run
from agent_session.integrations.openai_agents.hooks import DurableRunHooks
from agent_session.integrations.openai_agents.session import EventLogSession
from agent_session.integrations.openai_agents.settle import declare, resume_run, settle_run

__all__ = [
    "DurableRunHooks",
    "EventLogSession",
    "declare",
    "park_run",
    "resume_run",
    "settle_run",
]
