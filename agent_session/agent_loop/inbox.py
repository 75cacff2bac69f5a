"""An agent's inbox: the messages queued for its next turn (``followup``) and for the next
step of its running turn (``steer``), each change logged as the reference's
``agent/inbox/spliced`` event before it takes effect."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_session.session.events.builders import user_message
from agent_session.session.events.types import INBOX_SPLICED
from agent_session.session.live.session import Session

__all__ = ["Inbox"]


class Inbox:
    """The two queues of one agent's session."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.next_turn: list[Any] = []
        self.next_step: list[Any] = []

    def followup(self, message: str | Mapping[str, Any]) -> None:
        """Queue a message for the next turn."""
        msg = user_message(message) if isinstance(message, str) else dict(message)
        self._splice("next-turn", self.next_turn, len(self.next_turn), 0, [msg])

    def steer(self, message: str | Mapping[str, Any]) -> None:
        """Queue a message for the next step of the running turn."""
        msg = user_message(message) if isinstance(message, str) else dict(message)
        self._splice("next-step", self.next_step, len(self.next_step), 0, [msg])

    def claim(self, *, first: bool) -> list[Any]:
        """Take what a step starts with: every steering message, and (for a turn's first
        step) the next queued turn message."""
        claimed = list(self.next_step)
        self._splice("next-step", self.next_step, 0, len(self.next_step), [])
        if first and self.next_turn:
            claimed.append(self.next_turn[0])
            self._splice("next-turn", self.next_turn, 0, 1, [])
        return claimed

    def _splice(
        self, target: str, items: list[Any], start: int, removed: int, inserted: list[Any]
    ) -> None:
        if not removed and not inserted:
            return
        data: dict[str, Any] = {"target": target, "start": start}
        if removed:
            data["removedCount"] = removed
        data["inserted"] = inserted
        self.session.append(INBOX_SPLICED, data)
        items[start : start + removed] = inserted
