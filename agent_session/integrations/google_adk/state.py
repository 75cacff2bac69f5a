"""An ADK session's state by scope, and one session's log as the service reads it (its ADK
events and its session-scoped state, projected once and kept as the log grows)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_session.integrations.google_adk.catalog import Row
from agent_session.integrations.google_adk.mapping import project
from agent_session.integrations.turns import BracketCursor
from agent_session.session.errors import SessionCollisionError
from agent_session.session.live.session import Session

__all__ = ["View", "merged", "split_state"]

APP, USER, TEMP = "app:", "user:", "temp:"


def split_state(state: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """``(app, user, session)`` scoped parts of a state or delta (prefixes removed; ``temp:``
    keys dropped)."""
    app = {k[len(APP) :]: v for k, v in state.items() if k.startswith(APP)}
    user = {k[len(USER) :]: v for k, v in state.items() if k.startswith(USER)}
    own = {k: v for k, v in state.items() if not k.startswith((APP, USER, TEMP))}
    return app, user, own


@dataclass
class View:
    """One session's log as this service reads it: its ADK events (JSON) and state."""

    row: Row
    session: Session | None
    """The live session (``None``: another process writes it; ``held`` says who)."""
    held: SessionCollisionError | None = None
    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    read: int = 0
    asked: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    brackets: BracketCursor = field(default_factory=BracketCursor)

    ids: dict[Any, list[dict[str, Any]]] = field(default_factory=dict)

    def with_id(self, id: Any) -> list[dict[str, Any]]:
        """The stored events whose id is ``id`` (usually none, or one)."""
        return self.ids.get(id, [])

    def extend(self, log: Any) -> None:
        """Project the log's events past those already read."""
        for seq, event in project(log[self.read :], self.asked):
            self.events.append((seq, event))
            self.ids.setdefault(event.get("id"), []).append(event)
            delta = (event.get("actions") or {}).get("state_delta")
            if delta:
                self.state.update(split_state(delta)[2])
        self.read = len(log)


def merged(
    own: Mapping[str, Any], app_state: Mapping[str, Any], user_state: Mapping[str, Any]
) -> dict[str, Any]:
    """A session's state as ADK shows it: its own keys, then ``app:`` and ``user:`` keys."""
    state = dict(own)
    state.update({APP + k: v for k, v in app_state.items()})
    state.update({USER + k: v for k, v in user_state.items()})
    return state
