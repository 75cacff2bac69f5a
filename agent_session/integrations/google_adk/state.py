"""An ADK session's state by scope, and one session's log as the service reads it (its ADK
events and its session-scoped state, projected once and kept as the log grows)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from google.adk.events.event import Event
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.session import Session as AdkSession

from agent_session.integrations.google_adk.catalog import Row
from agent_session.integrations.google_adk.mapping import project
from agent_session.integrations.headers import HeaderLog
from agent_session.integrations.turns import BracketCursor
from agent_session.session.errors import SessionCollisionError, SessionNotFoundError
from agent_session.session.live.runtime import Runtime
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
    headers: HeaderLog = field(default_factory=HeaderLog)

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

    def adk_session(
        self,
        app: str,
        config: GetSessionConfig | None,
        app_state: Mapping[str, Any],
        user_state: Mapping[str, Any],
    ) -> AdkSession:
        """The ADK session this view holds, with the events ``config`` selects and its state
        merged with the shared ``app_state`` and ``user_state``."""
        chosen = [event for _, event in self.events]
        if config is not None:
            if config.num_recent_events is not None:
                count = config.num_recent_events
                chosen = chosen[-count:] if count else []
            if config.after_timestamp is not None:
                since = config.after_timestamp
                chosen = [e for e in chosen if float(e.get("timestamp", 0)) >= since]
        # as ADK's services: the last event's time (whenever it was stamped), else the creation
        updated = float(self.events[-1][1].get("timestamp", 0.0)) if self.events else None
        return AdkSession(
            id=self.row.id,
            app_name=app,
            user_id=self.row.user,
            state=merged(self.state, app_state, user_state),
            events=[Event.model_validate(event) for event in chosen],
            last_update_time=self.row.updated if updated is None else updated,
        )


def merged(
    own: Mapping[str, Any], app_state: Mapping[str, Any], user_state: Mapping[str, Any]
) -> dict[str, Any]:
    """A session's state as ADK shows it: its own keys, then ``app:`` and ``user:`` keys."""
    state = dict(own)
    state.update({APP + k: v for k, v in app_state.items()})
    state.update({USER + k: v for k, v in user_state.items()})
    return state


async def taken(runtime: Runtime, name: str, lid: str, row: Row) -> View:
    """The view of the session whose log is ``lid`` (``name``: how errors call it), taken
    live in ``runtime`` when no other process holds it: its writer lock is held from now on,
    even for a session with no log yet. Held elsewhere, the view holds the stored events and
    the error its first write raises."""
    try:
        live = runtime.sessions.get(lid)
        if live is None:
            assert runtime.persistence is not None
            storage = runtime.persistence.storage
            await storage.acquire(lid)  # (raises, naming the holder, if held)
            try:
                live = await runtime.sessions.open_or_create(lid)
            except BaseException:
                await storage.release(lid)
                raise
    except SessionCollisionError as e:
        assert runtime.persistence is not None
        try:
            stored: Any = (await runtime.persistence.inspect(lid)).events
        except SessionNotFoundError:
            stored = ()
        held = SessionCollisionError(f"{name} is written by another process: {e}")
        view = View(row, None, held, state=dict(row.state))
        view.extend(stored)
        return view
    view = View(row, live, state=dict(row.state))
    view.extend(live.events)
    return view
