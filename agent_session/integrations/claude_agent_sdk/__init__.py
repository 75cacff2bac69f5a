"""The Claude Agent SDK's session store over this library's event log (extra
``[claude-agent-sdk]``): :class:`.store.EventLogSessionStore`. (Claude Code transcripts are
imported and exported without the SDK: :mod:`agent_session.interchange.claude_code`.)"""

from agent_session.integrations.claude_agent_sdk.store import EventLogSessionStore

__all__ = ["EventLogSessionStore"]
