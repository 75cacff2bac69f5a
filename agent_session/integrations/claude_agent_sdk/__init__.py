"""The Claude Agent SDK's session store over this library's event log (extra
``[claude-agent-sdk]``): :class:`.store.EventLogSessionStore`; and Claude Code transcripts
imported into, and exported from, ordinary sessions (:mod:`.transcripts`)."""

from agent_session.integrations.claude_agent_sdk.store import EventLogSessionStore

__all__ = ["EventLogSessionStore"]
