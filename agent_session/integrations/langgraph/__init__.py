"""LangGraph's checkpoint saver over this library's event log (extra ``[langgraph]``):
:class:`~agent_session.integrations.langgraph.saver.EventLogSaver`."""

from agent_session.integrations.langgraph.saver import EventLogSaver

__all__ = ["EventLogSaver"]
