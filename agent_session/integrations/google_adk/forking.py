"""``EventLogSessionService.fork_session``: an ADK session forked before one of its
invocations (the shape google/adk-python#4010 proposes: ``fork_session(app_name, user_id,
source_session_id, fork_before_invocation_id)``), by the library's fork: the fork's log holds
the source's events before that invocation's turn, its header names the source's log and the
seed length, and the source is only read.

State: the fork's session-scoped state is the state at the fork point: the source's keys that
no event ever set (they came with its creation), then the state deltas of the events kept.
The one value this cannot know is a key the source was created with that only an event after
the fork point changed: the fork leaves it out. ``app:`` and ``user:`` state is shared, as ADK
specifies, and not copied."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError as AdkNotFound
from google.adk.sessions.session import Session as AdkSession

from agent_session.integrations.google_adk.catalog import Row
from agent_session.integrations.google_adk.mapping import log_id, stripped
from agent_session.integrations.google_adk.state import View, split_state
from agent_session.lineage.fork import boundary_of, fork_live, turn_spans

if TYPE_CHECKING:
    from agent_session.integrations.google_adk.service import EventLogSessionService

__all__ = ["fork"]


def _turn_of(view: View, invocation: str) -> int:
    """The turn of the source's log that holds the first event of ``invocation``."""
    assert view.session is not None
    first = next(
        (seq for seq, event in view.events if event.get("invocation_id") == invocation), None
    )
    if first is None:
        raise ValueError(f"session {view.row.id!r} has no invocation {invocation!r}")
    for number, (start, end) in turn_spans(view.session.events).items():
        if start <= first and (end is None or first <= end):
            return number
    raise ValueError(f"invocation {invocation!r} of session {view.row.id!r} is in no turn")


def _state_at(view: View, kept: int) -> dict[str, Any]:
    """The session-scoped state of the first ``kept`` log events (see the module docstring)."""
    deltas = [
        (seq, split_state((event.get("actions") or {}).get("state_delta") or {})[2])
        for seq, event in view.events
    ]
    ever = {key for _, delta in deltas for key in delta}
    state = {k: v for k, v in view.state.items() if k not in ever}
    for seq, delta in deltas:
        if seq < kept:
            state.update(delta)
    return state


async def fork(
    service: EventLogSessionService,
    app: str,
    user: str,
    source: str,
    before_invocation: str | None,
    new_id: str | None,
) -> AdkSession:
    """Fork ADK session ``source`` before ``before_invocation`` (all of it when ``None``)
    under ``new_id`` (a fresh id when not given); see the module docstring."""
    runtime, catalog = await service._started()
    row = await service._catalog_call(catalog.get, app, user, source)
    if row is None:
        raise AdkNotFound(f"Session {source} not found.")
    view = await service._view(app, user, source, row)
    if view.session is None:
        assert view.held is not None
        raise view.held
    before = None if before_invocation is None else _turn_of(view, before_invocation)
    events = view.session.events
    boundary = boundary_of(log_id(app, user, source), events, before_turn=before)
    kept = len(events) if boundary is None else boundary + 1
    sid = stripped(new_id) or str(uuid.uuid4())
    now = time.time()
    child_row = Row(user, sid, now, now, _state_at(view, kept), 0)
    if not await service._catalog_call(catalog.add, app, child_row, {}, {}):
        raise AlreadyExistsError(f"Session with id {sid} already exists.")
    await fork_live(runtime, view.session, before_turn=before, new_id=log_id(app, user, sid))
    child = await service._view(app, user, sid, child_row)
    return await service._session(app, child, None)
