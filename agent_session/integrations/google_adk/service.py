"""``EventLogSessionService``: Google ADK's ``BaseSessionService`` over this library's event
log, on any store (a directory of JSONL logs, ``sqlite:///``, ``postgresql://``).

Guarantees:

- ``append_event`` returns only after the event is durable. ADK appends a model response
  before it runs the tools the response calls, so every ``function_call`` is on disk (as a
  ``tool/call``) before its tool body starts.
- ``get_session`` gives back every appended event exactly (``Event.model_dump`` equal) and
  the state ADK's own services compute: the session's state deltas over its creation state,
  with the app's (``app:``) and the user's (``user:``) state shared across sessions;
  ``temp:`` keys are never stored.
- A crash never leaves a dangling call: the next ``get_session`` answers a call that has no
  response with a ``function_response`` carrying ``TOOL_OUTCOME_UNKNOWN`` (its ``tool/call``
  was recorded: the tool may have run) or ``TOOL_NOT_STARTED``, so the next model request
  is valid.
- One writer per session: a session this service reads becomes its own (the store's writer
  lock) until :meth:`release`, :meth:`aclose`, or ``max_open`` other
  sessions were used after it. Another process gets the session read-only, and its first
  ``append_event`` raises ``SessionCollisionError`` naming the holder; nothing is ever
  spliced into the log. (A new session of a JSONL store has no log, and so no lock, until
  its first event: then the first writer's append wins and the other's is refused.)
- A session's first read in a process reads its log once and takes it (above); later
  reads rebuild only the events a ``GetSessionConfig`` selects. A first read asking for
  ``num_recent_events`` reads only that much of the log's end and takes nothing: its cost
  does not grow with the session. Any thread and event loop may call it (the store runs on
  a private loop)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError as AdkNotFound
from google.adk.events.event import Event
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session as AdkSession

from agent_session.integrations.google_adk.catalog import Catalog, Row, Touch, catalog_for
from agent_session.integrations.google_adk.mapping import log_id, stripped
from agent_session.integrations.google_adk.pages import page_of
from agent_session.integrations.google_adk.recent import recent_view
from agent_session.integrations.google_adk.state import View, merged, split_state, taken
from agent_session.integrations.google_adk.writing import write_event
from agent_session.integrations.home_loop import HomeLoop
from agent_session.session.errors import (
    SessionDataError,
    SessionNotFoundError,
)
from agent_session.session.live.runtime import Runtime

__all__ = ["EventLogSessionService", "SessionPage"]

T = TypeVar("T")


class SessionPage(ListSessionsResponse):
    """A page of :meth:`EventLogSessionService.list_sessions`: pass ``next_page_token`` back
    for the next one (``None``: this was the last)."""

    next_page_token: str | None = None


class EventLogSessionService(BaseSessionService):
    """ADK sessions kept as crash-safe event logs in ``store`` (what
    :func:`agent_session.open_store` accepts, with ``store_options``). At most ``max_open``
    sessions are held at once: reading another releases the one used longest ago (its
    events stay durable; another process may then write it). Close it with :meth:`aclose`
    (or ``async with``)."""

    def __init__(
        self, store: str | os.PathLike[str], *, max_open: int = 256, **store_options: Any
    ) -> None:
        from agent_session.stores import parse_store

        if type(max_open) is not int or max_open < 1:
            raise ValueError(f"max_open must be a positive integer, got {max_open!r}")
        super().__init__()
        self.max_open = max_open
        self._spec = parse_store(os.fspath(store))
        self._options = store_options
        self._home: HomeLoop | None = None
        self._runtime: Runtime | None = None
        self._catalog: Catalog | None = None
        self._views: dict[str, View] = {}
        self._starting: asyncio.Future[tuple[Runtime, Catalog]] | None = None
        self._home_lock = threading.Lock()
        self._touched: dict[str, dict[tuple[str, str], Touch]] = {}
        self._asked: dict[str, dict[str, Any]] = {}  # (each session's last request header)

    # --- where the work runs ----------------------------------------------------------------

    async def _call(self, work: Coroutine[Any, Any, T]) -> T:
        with self._home_lock:  # (callers on several threads share one home)
            if self._home is None:
                self._home = HomeLoop("agent-session google-adk")
            home = self._home
        return await home.run(work)

    async def _catalog_call(self, method: Callable[..., T], *args: Any) -> T:
        """A catalog call, on a worker thread (the catalog takes one at a time)."""
        return await asyncio.to_thread(method, *args)

    async def _started(self) -> tuple[Runtime, Catalog]:
        if self._starting is None:  # (the first call starts the store; the others wait)
            self._starting = asyncio.ensure_future(self._start())
        try:
            return await asyncio.shield(self._starting)
        except BaseException:
            if self._starting.done():
                self._starting = None  # (a failed start is tried again by the next call)
            raise

    async def _start(self) -> tuple[Runtime, Catalog]:
        catalog = await asyncio.to_thread(catalog_for, self._spec)
        runtime = Runtime()
        runtime.install(self._spec.open(**self._options))
        self._runtime, self._catalog = runtime, catalog
        return runtime, catalog

    # --- BaseSessionService ---------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> AdkSession:
        """Create a session (a fresh id when ``session_id`` is not given); raise ADK's
        ``AlreadyExistsError`` for an id the user already has."""
        return await self._call(self._create(app_name, user_id, state or {}, session_id))

    async def _create(
        self, app: str, user: str, state: dict[str, Any], session_id: str | None
    ) -> AdkSession:
        runtime, catalog = await self._started()
        sid = stripped(session_id) or str(uuid.uuid4())  # (a blank id: a fresh one, as ADK's)
        lid = log_id(app, user, sid)
        assert runtime.persistence is not None
        runtime.persistence.storage.check_id(lid)
        app_state, user_state, own = split_state(state)
        now = time.time()
        row = Row(user, sid, now, now, own)
        if runtime.sessions.get(lid) is not None or not await self._catalog_call(
            catalog.add, app, row, app_state, user_state
        ):
            raise AlreadyExistsError(f"Session with id {sid} already exists.")
        view = await self._view(app, user, sid, row)
        return await self._session(app, view, None)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> AdkSession | None:
        """The session with its events (those ``config`` selects) and merged state, or
        ``None``."""
        return await self._call(self._get(app_name, user_id, session_id, config))

    async def _get(
        self, app: str, user: str, sid: str, config: GetSessionConfig | None
    ) -> AdkSession | None:
        runtime, catalog = await self._started()
        sid, recent = stripped(sid), config.num_recent_events if config else None
        view = self._used(lid := log_id(app, user, sid))
        if view is None:
            row = await self._catalog_call(catalog.get, app, user, sid)
            if row is None:
                return None
            assert runtime.persistence is not None
            tail = await recent_view(runtime.persistence, lid, row, recent) if recent else None
            view = tail or await self._view(app, user, sid, row)
        elif view.session is None:  # (another process writes it: read it again)
            view = await self._view(app, user, sid, view.row)
        return await self._session(app, view, config)

    async def list_sessions(
        self,
        *,
        app_name: str,
        user_id: str | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
    ) -> SessionPage:
        """The app's sessions (the user's, when given), oldest update first, without
        events, with their state as last recorded; ``page_size`` at a time from
        ``page_token``."""
        return await self._call(self._list(app_name, user_id, page_size, page_token))

    async def _list(
        self, app: str, user: str | None, size: int | None, token: str | None
    ) -> SessionPage:
        _, catalog = await self._started()
        await self._record(app)
        rows = await self._catalog_call(catalog.rows, app, user)
        chosen, after = page_of(rows, size, token)
        shared: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        sessions = []
        for row in chosen:
            if row.user not in shared:
                shared[row.user] = await self._catalog_call(catalog.shared, app, row.user)
            state = merged(row.state, *shared[row.user])
            sessions.append(
                AdkSession(
                    id=row.id,
                    app_name=app,
                    user_id=row.user,
                    state=state,
                    last_update_time=row.updated,
                )
            )
        return SessionPage(sessions=sessions, next_page_token=after)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session's log and its record (nothing when there is none); another
        process's session is refused with ``SessionCollisionError``."""
        await self._call(self._delete(app_name, user_id, session_id))

    async def _delete(self, app: str, user: str, sid: str) -> None:
        runtime, catalog = await self._started()
        sid = stripped(sid)
        lid = log_id(app, user, sid)
        await self._drop(lid)
        assert runtime.persistence is not None
        with contextlib.suppress(SessionNotFoundError):  # (created, never appended to)
            await runtime.persistence.delete(lid)  # (refused while another process holds it)
        self._touched.get(app, {}).pop((user, sid), None)
        await self._catalog_call(catalog.remove, app, user, sid)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state in the app (keys without ``user:``)."""
        return await self._call(self._user_state(app_name, user_id))

    async def _user_state(self, app: str, user: str) -> dict[str, Any]:
        _, catalog = await self._started()
        return (await self._catalog_call(catalog.shared, app, user))[1]

    async def append_event(self, session: AdkSession, event: Event) -> Event:
        """Append ``event`` durably (a partial event is not stored), then to ``session``. An
        equal re-delivery of a stored event (the same object, or a copy with the same id and
        fields) is idempotent, as in ADK's own services: nothing is written or applied
        again. A different event that shares an id is stored."""
        if event.partial:
            return event
        kept = event.model_copy(deep=True)
        self._trim_temp_delta_state(kept)
        try:
            dump = kept.model_dump(exclude_none=True, mode="json")
        except ValueError as e:  # (pydantic's serialization errors)
            raise SessionDataError(
                f"ADK event {event.id!r} of session {session.id!r} cannot be stored as JSON: "
                f"{e}; nothing was written"
            ) from e
        if not await self._call(self._append(session.app_name, session.user_id, session.id, dump)):
            return event  # (stored already)
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        self._commit_event_to_session(session, event)
        session.last_update_time = event.timestamp
        return event

    async def _append(self, app: str, user: str, sid: str, event: dict[str, Any]) -> bool:
        """Store ``event``; ``False`` when an equal one is stored already."""
        runtime, catalog = await self._started()
        lid = log_id(app, user, sid)
        view = self._used(lid)
        if view is None or view.session is None:
            row = view.row if view else await self._catalog_call(catalog.get, app, user, sid)
            if row is None:
                raise AdkNotFound(f"Session {sid} not found.")
            view = await self._view(app, user, sid, row)
        if event in view.with_id(event.get("id")):
            return False
        if view.session is None:
            assert view.held is not None
            raise view.held
        try:
            if write_event(view.session, view.brackets, event, self._asked.get(lid), view.headers):
                self._asked.pop(lid, None)  # (the request a model response answered)
            await runtime.sessions.flush(view.session)
        except BaseException:
            # what this call appended must never reach the log later: forget the live
            # session (the next call reads the log again)
            self._views.pop(lid, None)
            await runtime.sessions.dispose(view.session)
            assert runtime.persistence is not None
            await runtime.persistence.storage.release(lid)
            raise
        view.extend(view.session.events)
        app_delta, user_delta, _ = split_state(
            (event.get("actions") or {}).get("state_delta") or {}
        )
        stamp = float(event.get("timestamp") or time.time())
        self._touched.setdefault(app, {})[(user, sid)] = (stamp, dict(view.state), view.read)
        if app_delta or user_delta:
            await self._record(app, user, app_delta, user_delta)
        return True

    async def fork_session(
        self,
        *,
        app_name: str,
        user_id: str,
        source_session_id: str,
        fork_before_invocation_id: str | None = None,
        new_session_id: str | None = None,
    ) -> AdkSession:
        """A new session of the user, forked from ``source_session_id`` before the invocation
        ``fork_before_invocation_id`` (all of it when ``None``); the source is only read
        (:mod:`~agent_session.integrations.google_adk.forking`)."""
        from agent_session.integrations.google_adk.forking import fork

        work = fork(
            self, app_name, user_id, source_session_id, fork_before_invocation_id, new_session_id
        )
        return await self._call(work)

    def request_recorder(self) -> BasePlugin:
        """An ADK plugin (``Runner(..., plugins=[service.request_recorder()])``) that has
        the log record what each model request was sent: its system instruction, tools,
        model and config, in the step of the response that answers it
        (:mod:`~agent_session.integrations.google_adk.requests`)."""
        from agent_session.integrations.google_adk.requests import RequestRecorder

        def asked(app: str, user: str, sid: str, header: dict[str, Any]) -> None:
            self._asked[log_id(app, user, sid)] = header

        return RequestRecorder(asked)

    async def flush(self) -> None:
        """Record every session's update time and state in the catalog (the events are
        already durable)."""
        await self._call(self._record_all())

    # --- sessions held here -----------------------------------------------------------------

    async def release(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Stop writing the session here, so that another process may (its lease is given
        back)."""
        await self._call(self._drop(log_id(app_name, user_id, session_id)))

    async def aclose(self) -> None:
        """Record what is pending, release every session and close the store."""
        if self._home is None:
            return
        try:
            await self._call(self._close())
        finally:
            home, self._home = self._home, None
            await asyncio.to_thread(home.close)

    async def __aenter__(self) -> EventLogSessionService:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _close(self) -> None:
        try:
            await self._record_all()
        finally:
            if self._runtime is not None:
                await self._runtime.__aexit__(None, None, None)
            if self._catalog is not None:
                self._catalog.close()
            self._runtime = self._catalog = self._starting = None
            self._views.clear()

    async def _view(self, app: str, user: str, sid: str, row: Row) -> View:
        """The session's view, taking it live here when no other process holds it."""
        runtime, _ = await self._started()
        lid = log_id(app, user, sid)
        view = await taken(
            runtime, f"ADK session {sid!r} of user {user!r} in app {app!r}", lid, row
        )
        self._views.pop(lid, None)
        self._views[lid] = view  # (the most recently used last)
        while len(self._views) > self.max_open:
            await self._drop(next(iter(self._views)))
        return view

    def _used(self, lid: str) -> View | None:
        """The session's view, marked as the most recently used."""
        view = self._views.pop(lid, None)
        if view is not None:
            self._views[lid] = view
        return view

    async def _drop(self, lid: str) -> None:
        view = self._views.pop(lid, None)
        runtime = self._runtime
        if view is not None and view.session is not None and runtime is not None:
            key = (view.row.user, view.row.id)  # its record first: the next writer's is newer
            for app in [app for app, touched in self._touched.items() if key in touched]:
                await self._record(app)
            await runtime.sessions.flush(view.session)
            await runtime.sessions.dispose(view.session)
            assert runtime.persistence is not None
            await runtime.persistence.storage.release(lid)

    async def _session(self, app: str, view: View, config: GetSessionConfig | None) -> AdkSession:
        _, catalog = await self._started()
        app_state, user_state = await self._catalog_call(catalog.shared, app, view.row.user)
        return view.adk_session(app, config, app_state, user_state)

    async def _record(
        self,
        app: str,
        user: str = "",
        app_delta: Mapping[str, Any] | None = None,
        user_delta: Mapping[str, Any] | None = None,
    ) -> None:
        touched = self._touched.pop(app, {})
        if not (touched or app_delta or user_delta) or self._catalog is None:
            return
        try:
            await self._catalog_call(
                self._catalog.update, app, user, app_delta or {}, user_delta or {}, touched
            )
        except BaseException:
            self._touched.setdefault(app, {}).update(touched)
            raise

    async def _record_all(self) -> None:
        for app in list(self._touched):
            await self._record(app)
