"""The log as a durable-execution engine's conversation store: the engine-neutral seam
(:mod:`.once`: a step's appends keyed by the step's identity, reads by reference) and an
agent's turns as DBOS workflows (:mod:`.dbos_turns`, extra ``[dbos]``)."""

from agent_session.engines.once import EngineSteps, read_after

__all__ = ["EngineSteps", "read_after"]
