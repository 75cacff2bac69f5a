"""``AgentRuntime``: a session :class:`session.Runtime` plus the agent loop's services (the
model and tool seams) and ``agent()``, the way the reference keeps ``dsh-agent-loop`` beside
``dsh-session``."""

from __future__ import annotations

from agent_loop.loop import Agent
from agent_loop.models import ModelService
from agent_loop.tools import ToolService
from session import Runtime, Session
from session.live.session import Clock

__all__ = ["AgentRuntime"]


class AgentRuntime(Runtime):
    """A :class:`session.Runtime` that also runs agents: ``models`` and ``tools`` register on
    the same hook bus, and :meth:`agent` starts the reference loop on a live session."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self.models = ModelService(self.hooks)
        """Model adapters and the ``llm/stream`` chain."""
        self.tools = ToolService(self.hooks)
        """Registered tools and the ``tools/execute`` chain."""

    def agent(
        self,
        session: Session,
        *,
        model: str,
        system: str | None = None,
        max_parallel_tools: int = 10,
    ) -> Agent:
        """An agent running turns on ``session`` with ``model`` given as
        ``"provider/model"``."""
        provider, slash, name = model.partition("/")
        if not slash or not provider or not name:
            raise ValueError(f'model must be "provider/model", got "{model}"')
        return Agent(
            self,
            session,
            provider=provider,
            model=name,
            system=system,
            max_parallel_tools=max_parallel_tools,
        )
