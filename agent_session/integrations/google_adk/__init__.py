"""Google ADK sessions on this library's event log (the ``google-adk`` extra):
:class:`EventLogSessionService`."""

from agent_session.integrations.google_adk.service import EventLogSessionService, SessionPage

__all__ = ["EventLogSessionService", "SessionPage"]
