"""The checks that a live session and the log stored under its id are one session, before
the live writer adopts the stored log (:mod:`session.persistence.live`)."""

from __future__ import annotations

from collections.abc import Sequence

from agent_session.session.errors import SessionCollisionError
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.eventlog import same_events
from agent_session.session.events.header import SessionHeader
from agent_session.session.live.session import Session

__all__ = ["check_cwd", "same_prefix"]


def same_prefix(live: Sequence[SessionEvent], stored: Sequence[SessionEvent]) -> bool:
    """The live log starts with exactly the stored events (the same objects, or equal as
    written JSON)."""
    if len(live) < len(stored):
        return False
    prefix = live[: len(stored)] if len(live) > len(stored) else live
    return same_events(prefix, stored, lambda a, b: a is b or a.encode() == b.encode())


def check_cwd(id: str, stored: SessionHeader, session: Session) -> None:
    """Refuse (``SessionCollisionError``) a live session whose cwd is not the stored one's."""
    if stored.cwd != session.header.cwd:
        raise SessionCollisionError(
            f'session "{id}" is already persisted at a different cwd (persisted: '
            f"{stored.cwd}, live: {session.header.cwd}) (id collision)"
        )
