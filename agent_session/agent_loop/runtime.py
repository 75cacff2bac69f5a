"""``AgentRuntime``: a session :class:`session.Runtime` plus the agent loop's services (the
model and tool seams) and ``agent()``, the way the reference keeps ``dsh-agent-loop`` beside
``dsh-session``."""

from __future__ import annotations

import logging

from agent_session.agent_loop.approval import ApprovalService
from agent_session.agent_loop.compaction import CompactionPolicy
from agent_session.agent_loop.loop import Agent
from agent_session.agent_loop.models import ModelService
from agent_session.agent_loop.subagents import register_subagent
from agent_session.agent_loop.tools import ToolService
from agent_session.session import Runtime, Session
from agent_session.session.live.session import Clock

__all__ = ["AgentRuntime"]

log = logging.getLogger("agent_loop")


class AgentRuntime(Runtime):
    """A :class:`session.Runtime` that also runs agents: ``models`` and ``tools`` register on
    the same hook bus, and :meth:`agent` starts the reference loop on a live session."""

    def __init__(
        self, *, clock: Clock | None = None, warn_without_checkpoints: bool = True
    ) -> None:
        """``warn_without_checkpoints=False`` says that running agents over a persistence
        backend without a checkpoint policy is meant (the log is then written in the
        background only, and a crash inside a tool body can lose the record that the tool
        was called); by default the first such turn logs a warning."""
        super().__init__(clock=clock)
        self.checkpoints = 0
        """How many installed plugins make the log durable at the loop's boundaries
        (``checkpoint_policy`` counts itself here)."""
        self.warn_without_checkpoints = warn_without_checkpoints
        """Whether a turn over a persistence backend without checkpoints logs a warning (once
        per runtime)."""
        self.models = ModelService(self.hooks)
        """Model adapters and the ``llm/stream`` chain."""
        self.tools = ToolService(self.hooks)
        """Registered tools and the ``tools/execute`` chain."""
        self.approval: ApprovalService | None = None
        """The approval service ``user_approval()`` mounts, if any."""

    def check_checkpoints(self) -> None:
        """Warn once, when a persistence backend is installed and no checkpoint policy is,
        that crash safety is half-installed (unless ``warn_without_checkpoints`` is off)."""
        if self.checkpoints or self.persistence is None or not self.warn_without_checkpoints:
            return
        self.warn_without_checkpoints = False  # once
        log.warning(
            "agent turns run over %s without the checkpoint policy: the log is written in "
            "the background only, so a crash can lose the record of a model request or of a "
            "tool call whose body ran. Install it with runtime.install(checkpoint_policy), or "
            "pass AgentRuntime(warn_without_checkpoints=False) if that is meant.",
            type(self.persistence).__name__,
        )

    def agent(
        self,
        session: Session,
        *,
        model: str,
        system: str | None = None,
        max_parallel_tools: int = 10,
        compaction: CompactionPolicy | None = None,
    ) -> Agent:
        """An agent running turns on ``session`` with ``model`` given as
        ``"provider/model"``; with ``compaction``, it compacts the session's history before
        a turn when the policy says so (:mod:`agent_loop.compaction`)."""
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
            compaction=compaction,
        )

    subagent = register_subagent
    """``runtime.subagent(name, description, model=..., system=None, parameters=None,
    task=None, max_depth=3, compaction=None)``: register the tool ``name`` that runs a child
    agent in a session of its own, which a crash cannot orphan
    (:func:`agent_loop.subagents.register_subagent`); returns its disposer."""
