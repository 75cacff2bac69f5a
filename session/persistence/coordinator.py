"""``PersistenceCoordinator``: everything a backend needs except the bytes on disk
(persistence semantics §3).

It owns per-id serialization, lazy materialization, contiguity, collision checks, cold load
with durable repair, non-mutating inspect, the live write path (one write-behind controller per
live session), resume, and quiescent teardown. A backend subclasses it and implements the
storage hooks: ``load_stored``, ``read_stored_revision``, ``append_batch``, ``commit_repair``,
``list_stored`` and ``close``; optionally ``acquire``/``release`` (writer locks),
``prepare_event`` (encode events as they are committed) and ``append_batch_now`` (write a
checkpoint without leaving the calling thread).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from session.errors import (
    JsonValueError,
    SessionCollisionError,
    SessionError,
    SessionFormatUnsupportedError,
    SessionNotFoundError,
    SessionPersistenceCorruptionError,
)
from session.events.event import SessionEvent, is_known_event_type
from session.events.eventlog import EventLog, LazyRun, blocks
from session.events.header import SESSION_FORMAT_VERSION, SessionHeader
from session.events.rules import validate_seed
from session.json.codec import encode_json
from session.json.lossless import is_safe_int, snapshot
from session.live.hooks import SESSION_CREATED, SESSION_DISPOSED, SESSION_EVENT, SESSION_FLUSH
from session.live.session import Session
from session.persistence.api import (
    RawArtifact,
    SessionPersistence,
    SessionSnapshot,
    StoredLog,
    StoredSession,
)
from session.persistence.write_behind import Scheduler, WriteBehindController

if TYPE_CHECKING:
    from session.live.runtime import PluginScope
    from session.live.store import SessionStore

__all__ = ["PersistenceCoordinator", "Repair"]

log = logging.getLogger("session.persistence")

Repair = Callable[[Sequence[SessionEvent]], list[SessionEvent]]
"""Computes the closers of an interrupted log (``recovery.closers``); ``[]`` when balanced."""

_MAX_DELAY = 2_147_483_647


@dataclass(slots=True)
class _State:
    """What the coordinator knows about one stored or lazily created id."""

    header: SessionHeader
    cursor: int  # stored length = next seq to append
    materialized: bool
    owner: Session | None = None


@dataclass(slots=True)
class _Inspection:
    """One cold read: valid stored events plus in-memory closers."""

    header: SessionHeader
    stored: EventLog[SessionEvent]
    closers: tuple[SessionEvent, ...]
    revision: str
    torn_marker: object | None

    @property
    def balanced(self) -> StoredSession:
        return StoredSession(self.header, self.stored + self.closers)


@dataclass(slots=True)
class _Live:
    """A live session's write path."""

    controller: WriteBehindController
    id: str
    init: asyncio.Future[None] | None = None
    retired: bool = False
    background: set[asyncio.Future[Any]] = field(default_factory=set)

    @property
    def bound(self) -> bool:
        """The session's binding (``init``) has completed successfully."""
        init = self.init
        return init is not None and init.done() and not init.cancelled() and not init.exception()


class _Chains:
    """One FIFO lock per id; a failure never poisons it; idle entries are dropped."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, id: str) -> AsyncIterator[None]:
        lock, users = self._locks.setdefault(id, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if users[0] == 0 and self._locks.get(id, (None,))[0] is lock:
                del self._locks[id]

    @property
    def busy(self) -> bool:
        return bool(self._locks)

    def held(self, id: str) -> bool:
        """Whether anyone holds or waits for ``id``'s chain."""
        return id in self._locks

    async def drain(self) -> None:
        """Wait until every id's chain is idle."""
        while self._locks:
            id = next(iter(self._locks))
            async with self.hold(id):
                pass


def _validate_options(cache_size: int, delay_ms: int) -> None:
    if not is_safe_int(cache_size) or cache_size < 1:
        raise TypeError("prepared_session_cache_size must be a positive safe integer")
    if not is_safe_int(delay_ms) or not 1 <= delay_ms <= _MAX_DELAY:
        raise TypeError("write_batch_max_delay_ms must be an integer between 1 and 2147483647")


class PersistenceCoordinator(SessionPersistence):
    """The shared implementation of :class:`SessionPersistence` over storage hooks.

    ``repair`` computes closers for an interrupted log (pass ``recovery.closers``).
    ``write_batch_max_delay_ms`` is the batching window of live sessions;
    ``prepared_session_cache_size`` bounds the cache of cold inspections reused while their
    revision is unchanged; ``scheduler`` replaces the event loop's timers (tests).
    """

    name = "session-persistence"
    """Label used in log messages."""

    def __init__(
        self,
        *,
        repair: Repair,
        write_batch_max_delay_ms: int = 200,
        prepared_session_cache_size: int = 5,
        scheduler: Scheduler | None = None,
    ) -> None:
        _validate_options(prepared_session_cache_size, write_batch_max_delay_ms)
        self._repair = repair
        self._delay_ms = write_batch_max_delay_ms
        self._cache_size = prepared_session_cache_size
        self._scheduler = scheduler
        self._states: dict[str, _State] = {}
        self._chains = _Chains()
        self._cache: OrderedDict[str, _Inspection] = OrderedDict()
        self._live: dict[Session, _Live] = {}
        self._retirements: dict[str, asyncio.Future[None]] = {}
        self._store: SessionStore | None = None
        self._closing = False
        self._closed = False

    # --- storage hooks ----------------------------------------------------------------------

    @abstractmethod
    async def load_stored(self, id: str) -> StoredLog | None:
        """Read the valid stored prefix of ``id``, or ``None`` when absent."""

    @abstractmethod
    async def read_stored_revision(self, id: str) -> str | None:
        """The revision ``load_stored`` would report now, without reading events."""

    @abstractmethod
    async def append_batch(
        self, header: SessionHeader, events: Sequence[SessionEvent], materialized: bool
    ) -> None:
        """Durably append a contiguous batch. When not yet materialized, the header and the
        first batch must appear together. On failure nothing of the batch may remain."""

    def prepare_event(self, id: str, event: SessionEvent) -> None:
        """Called with each event a live session commits, in order, once it is buffered for
        writing: a backend may do its per-event encoding work here, while the agent streams,
        instead of on the checkpoint's critical path. It must not block, and nothing may
        depend on it having run. The default does nothing."""
        return None

    def append_batch_now(self, header: SessionHeader, events: Sequence[SessionEvent]) -> bool:
        """Optionally append a contiguous batch to a materialized log before returning, on the
        calling (event-loop) thread: ``True`` once it is durable, ``False`` to decline at once
        with nothing written (``append_batch`` then writes it). On failure raise, with nothing
        of the batch kept. Used by a live session's flush barrier when nothing else is writing
        that id, to spare the barrier a task and a worker-thread hop. The default declines."""
        return False

    @abstractmethod
    async def commit_repair(
        self, header: SessionHeader, torn_marker: object | None, closers: Sequence[SessionEvent]
    ) -> None:
        """Cut the tail named by ``torn_marker`` (if not ``None``), then append ``closers``."""

    @abstractmethod
    async def list_stored(self) -> builtins.list[SessionSnapshot]:
        """Every materialized session's header and revision."""

    @abstractmethod
    async def close(self) -> None:
        """Release storage resources; called last by :meth:`aclose`."""

    def locate(self, header: SessionHeader) -> str | None:
        """Where the log lives; ``None`` for backends without a location."""
        return None

    async def acquire(self, id: str) -> None:
        """Become the writer of ``id`` before writing or repairing it. Backends with writer
        locks take the lock here and raise :class:`SessionCollisionError` when another writer
        holds it; the default does nothing."""
        return None

    async def release(self, id: str) -> None:
        """Give up whatever this instance holds to write ``id`` (a live session left the
        store). Backends with writer locks release them here; the default does nothing."""
        return None

    async def read_raw(self, id: str) -> RawArtifact | None:
        """The stored bytes; backends without raw artifacts refuse."""
        raise SessionError(f"{self.name} does not expose raw artifacts")

    # --- plugin -----------------------------------------------------------------------------

    def install(self, scope: PluginScope) -> None:
        """Attach to a runtime: persist every live session of its store."""
        runtime = scope.runtime
        if self._store is not None and self._store is not runtime.sessions:
            raise SessionError(f"{self.name} is already installed in another runtime")
        self._store = runtime.sessions
        scope.observe(SESSION_CREATED, self._on_created)
        scope.observe(SESSION_EVENT, self._on_event)
        scope.listen(SESSION_FLUSH, self._on_flush)
        scope.observe(SESSION_DISPOSED, self._on_disposed)
        runtime.sessions._persistence = self
        runtime.persistence = self

        def uninstall() -> None:
            if runtime.sessions._persistence is self:
                runtime.sessions._persistence = None
            if runtime.persistence is self:
                runtime.persistence = None

        scope.on_dispose(uninstall)
        for session in runtime.sessions.list():  # sessions that were live before install
            self._on_created(session)

    # --- public API -------------------------------------------------------------------------

    async def create(self, header: SessionHeader | Mapping[str, Any]) -> None:
        """Register a session lazily (no I/O). Raises ``TypeError`` for bad metadata and
        :class:`SessionCollisionError` when the id exists here or in storage."""
        checked = _checked_header(header)
        self._check_open()
        async with self._chains.hold(checked.id):
            await self._create_core(checked)

    async def _create_core(self, header: SessionHeader) -> None:
        if header.id in self._states:
            raise SessionCollisionError(f'session "{header.id}" already exists in this backend')
        if await self.load_stored(header.id) is not None:
            raise SessionCollisionError(
                f'session "{header.id}" already has a persisted log on disk; load/resume it '
                "instead of creating"
            )
        self._states[header.id] = _State(header, 0, False)

    def append(
        self, id: str, events: Sequence[SessionEvent | Mapping[str, Any]]
    ) -> Awaitable[None]:
        """Durably append ``events``, snapshotted when called (later changes to the caller's
        objects are ignored). An id known only to storage is adopted first (which repairs an
        interrupted log). Raises ``TypeError`` for non-JSON data at the call; the awaitable
        raises ``SessionError`` for a seq that does not continue the log."""
        batch = _snapshot_batch(events)
        self._check_open()
        return self._append(id, batch)

    async def _append(self, id: str, batch: builtins.list[SessionEvent]) -> None:
        if not batch:
            return
        await self._wait_retirement(id)
        async with self._chains.hold(id):
            await self.acquire(id)
            state = self._states.get(id)
            if state is None:
                await self._commit_cold(id)
            await self._append_core(id, batch)

    async def _append_core(self, id: str, batch: Sequence[SessionEvent]) -> None:
        state = self._states.get(id)
        if state is None:
            raise SessionNotFoundError(f'session "{id}" not found')
        for index, event in enumerate(batch):
            if event.seq != state.cursor + index:
                raise SessionError(
                    f'append seq mismatch for "{id}": expected {state.cursor + index} at index '
                    f"{index}, got {event.seq}"
                )
        await self.append_batch(state.header, batch, state.materialized)
        self._appended(id, state, len(batch))

    def _appended(self, id: str, state: _State, count: int) -> None:
        """Record that ``count`` events reached storage after ``state.cursor``."""
        state.materialized = True
        state.cursor += count
        self._cache.pop(id, None)

    async def load(self, id: str) -> StoredSession:
        """Live: flush and return the live log (refused while its turn is open). Cold: read,
        validate, repair durably (truncate a torn tail, append closers), re-read, return."""
        self._check_open()
        await self._wait_retirement(id)
        live = self._live_session(id)
        if live is not None:
            return await self._load_live(live)
        async with self._chains.hold(id):
            live = self._live_session(id)
            if live is None:
                return await self._commit_cold(id)
        return await self._load_live(live)

    async def _load_live(self, session: Session) -> StoredSession:
        events = session.events
        assert self._store is not None
        await self._store.flush(session)
        if not events:
            raise SessionNotFoundError(f'session "{session.id}" not found')
        if self._repair(events):
            raise SessionError(
                f'cannot load session "{session.id}" while its live turn is open; use the live '
                "Session or wait for the turn to close"
            )
        state = self._states.get(session.id)
        return StoredSession(state.header if state else session.header, events)

    async def _commit_cold(self, id: str) -> StoredSession:
        """Inside the id's chain: make the stored log balanced and durable, record ownerless
        state, return the balanced log."""
        for _ in range(8):
            inspection = await self._inspect_cold(id)
            if inspection.torn_marker is None and not inspection.closers:
                self._states[id] = _State(
                    inspection.header, len(inspection.stored), True, owner=None
                )
                self._cache.pop(id, None)
                return inspection.balanced
            await self.acquire(id)
            if await self.read_stored_revision(id) != inspection.revision:
                self._cache.pop(id, None)  # another writer changed it since we read: re-read
                continue
            await self.commit_repair(inspection.header, inspection.torn_marker, inspection.closers)
            self._cache.pop(id, None)
        raise SessionError(f'session "{id}" kept changing while it was being repaired')

    async def inspect(self, id: str) -> StoredSession:
        """The stored log plus closers in memory; never writes. A live session's own
        (possibly open) log is returned as it is."""
        self._check_open()
        await self._wait_retirement(id)
        live = self._live_session(id)
        if live is not None:
            state = self._states.get(id)
            return StoredSession(state.header if state else live.header, live.events)
        async with self._chains.hold(id):
            return (await self._inspect_cold(id)).balanced

    async def _inspect_cold(self, id: str) -> _Inspection:
        cached = self._cache.get(id)
        if cached is not None:
            if await self.read_stored_revision(id) == cached.revision:
                self._cache.move_to_end(id)
                return cached
            del self._cache[id]
        stored = await self.load_stored(id)
        if stored is None:
            raise SessionNotFoundError(f'session "{id}" not found')
        events = self._normalize(id, stored)
        try:
            closers = tuple(self._repair(events))
        except Exception as e:
            raise SessionPersistenceCorruptionError(
                f'stored session "{id}" failed validation: {e}'
            ) from e
        inspection = _Inspection(
            stored.header, events, closers, stored.revision, stored.torn_marker
        )
        self._cache[id] = inspection
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return inspection

    def _normalize(self, id: str, stored: StoredLog) -> EventLog[SessionEvent]:
        """Identity, version, vocabulary and event validation of a backend read."""
        header = stored.header
        suffix = self._raw_suffix(header)
        if header.version != SESSION_FORMAT_VERSION:
            raise SessionFormatUnsupportedError(_version_message(header, suffix))
        if header.id != id:
            raise SessionPersistenceCorruptionError(
                f'stored session identity mismatch: requested "{id}", header contains "{header.id}"'
            )
        index = 0  # the seq of the next item
        for raw in blocks(stored.events):
            seq, index = index, index + (len(raw) if type(raw) is LazyRun else 1)
            if type(raw) is SessionEvent or isinstance(raw, SessionEvent | LazyRun):
                continue  # built by the backend from a known shape (a packed chunk row)
            kind = raw.get("type") if isinstance(raw, Mapping) else None
            if (
                isinstance(kind, str)
                and not is_known_event_type(kind)
                and raw.get("ignorable") is not True
            ):
                raise SessionFormatUnsupportedError(
                    f'session "{id}" contains event type "{kind}" (seq {raw.get("seq", seq)}) '
                    "unknown to this harness and not marked ignorable; refusing to interpret the "
                    f"log — it was likely written by a newer harness{suffix}"
                )
        try:
            events, _surface = validate_seed(stored.events)
        except (SessionError, JsonValueError, ValueError, TypeError) as e:
            raise SessionPersistenceCorruptionError(
                f'stored session "{id}" failed validation: {e}'
            ) from e
        return events

    def _raw_suffix(self, header: SessionHeader) -> str:
        try:
            location = self.locate(header)
        except Exception:
            location = None
        return f" (raw log: {location})" if location else ""

    async def read_from(self, id: str, from_seq: int) -> Sequence[SessionEvent]:
        """The stored events from ``from_seq`` on, exactly as stored (no closers, no repair)."""
        if not is_safe_int(from_seq) or from_seq < 0:
            raise TypeError(
                f"read_from from_seq must be a non-negative safe integer, got {from_seq!r}"
            )
        self._check_open()
        await self._wait_retirement(id)
        async with self._chains.hold(id):
            stored = await self.load_stored(id)
            if stored is None:
                raise SessionNotFoundError(f'session "{id}" not found')
            return self._normalize(id, stored)[from_seq:]

    async def list(self) -> builtins.list[SessionHeader]:
        """Headers of materialized stored sessions (never-appended ones are absent)."""
        self._check_open()
        return [snapshot.header for snapshot in await self.list_stored()]

    async def list_snapshots(self) -> builtins.list[SessionSnapshot]:
        """Headers and revisions of materialized stored sessions."""
        self._check_open()
        return await self.list_stored()

    async def resume(self, id: str) -> Session:
        """Load a stored session (repairing it durably if it was interrupted) and publish it as
        a live session that continues at the next seq. Its seed is the stored log, followed by
        one ``session/end-seed``; nothing stored is written again."""
        store = self._require_store()
        if self._live_session(id) is not None or store.get(id) is not None:
            raise SessionCollisionError(f'cannot resume session "{id}" while it is live')
        loaded = await self.load(id)
        session = Session.create(id, seed=loaded.events, header=loaded.header, clock=store._clock)
        store.attach(session)
        return session

    async def aclose(self) -> None:
        """Flush every live session, wait for retirements and every per-id chain, then close
        storage. Raises an ``ExceptionGroup`` of the flush failures (storage is still closed)."""
        if self._closed or self._closing:
            return
        self._closing = True  # stop admitting new public calls
        errors: list[Exception] = []
        for session, live in list(self._live.items()):
            if live.retired:
                continue  # its retirement flushes it
            try:
                await self._flush_live(session, live)
            except Exception as e:
                errors.append(e)
        for retirement in list(self._retirements.values()):
            with contextlib.suppress(Exception):
                await asyncio.shield(retirement)
        await self._chains.drain()
        self._closed = True
        try:
            await self.close()
        finally:
            if errors:
                raise ExceptionGroup(f"{self.name} dispose failed", errors)

    # --- live write path --------------------------------------------------------------------

    def _on_created(self, session: Session) -> None:
        if session in self._live:
            return
        live = _Live(
            WriteBehindController(
                lambda batch: self._write_live(session, batch),
                write_now=lambda batch: self._write_live_now(session, batch),
                max_delay_ms=self._delay_ms,
                scheduler=self._scheduler,
                label=f'"{session.id}"',
            ),
            session.id,
        )
        self._live[session] = live
        with contextlib.suppress(RuntimeError):  # no running loop: init at the first flush
            live.init = asyncio.ensure_future(self._init_live(session))
            live.init.add_done_callback(_retrieve)

    def _on_event(self, session: Session, event: SessionEvent) -> None:
        live = self._live.get(session)
        if live is not None:
            live.controller.enqueue(event)
            self.prepare_event(live.id, event)

    def _on_flush(self, session: Session) -> asyncio.Future[None] | None:
        live = self._live.get(session)
        if live is None:
            return None
        if live.bound:
            return live.controller.flush()
        return asyncio.ensure_future(self._flush_live(session, live))

    async def _flush_live(self, session: Session, live: _Live) -> None:
        live.controller.cancel_wait()
        init = live.init
        if init is None or (init.done() and (init.cancelled() or init.exception() is not None)):
            # Not started (no loop at creation) or failed: (re)try; a failure is not sticky.
            init = live.init = asyncio.ensure_future(self._init_live(session))
            init.add_done_callback(_retrieve)
        await init
        barrier = live.controller.flush()
        if barrier is not None:
            await barrier

    def _on_disposed(self, session: Session) -> None:
        live = self._live.get(session)
        if live is None:
            return
        live.retired = True
        try:
            retirement = asyncio.ensure_future(self._retire(session, live))
        except RuntimeError:
            self._live.pop(session, None)
            return
        self._retirements[session.id] = retirement
        retirement.add_done_callback(lambda done: self._retired(session.id, done))

    async def _retire(self, session: Session, live: _Live) -> None:
        try:
            await self._flush_live(session, live)
        finally:
            self._live.pop(session, None)
            async with self._chains.hold(session.id):
                state = self._states.get(session.id)
                if state is not None and state.owner is session:
                    if state.materialized:
                        state.owner = None
                    else:
                        del self._states[session.id]
                await self.release(session.id)

    def _retired(self, id: str, done: asyncio.Future[None]) -> None:
        if self._retirements.get(id) is done:
            del self._retirements[id]
        if not done.cancelled() and done.exception() is not None:
            log.warning('%s: session "%s" retirement failed: %s', self.name, id, done.exception())

    async def _wait_retirement(self, id: str) -> None:
        retirement = self._retirements.get(id)
        if retirement is not None:
            await asyncio.wait([retirement])

    async def _init_live(self, session: Session) -> None:
        """Bind ``session`` as the owner of its id and write what storage lacks."""
        id = session.id
        async with self._chains.hold(id):
            state = self._states.get(id)
            if state is not None and state.owner is session:
                return
            await self.acquire(id)
            if state is not None and state.owner is not None:
                other = self._live.get(state.owner)
                if state.materialized or (other is not None and other.controller.has_work):
                    raise SessionCollisionError(
                        f'session "{id}" is already bound to a different live session in this '
                        "backend (id collision)"
                    )
                del self._states[id]
                state = None
            if state is None:
                stored = await self.load_stored(id)
                if stored is None:
                    state = self._states[id] = _State(session.header, 0, False)
                else:
                    events = self._normalize(id, stored)
                    _check_cwd(id, stored.header, session)
                    if not _same_prefix(session.events, events):
                        raise SessionCollisionError(
                            f'session "{id}" already has a persisted log on disk that does not '
                            "match this live session (id collision)"
                        )
                    if stored.torn_marker is not None:  # never closers: the turn may go on
                        await self.commit_repair(stored.header, stored.torn_marker, ())
                    state = self._states[id] = _State(stored.header, len(events), True)
            else:
                _check_cwd(id, state.header, session)
                if state.cursor:
                    inspection = await self._inspect_cold(id)
                    if not _same_prefix(session.events, inspection.stored[: state.cursor]):
                        raise SessionCollisionError(
                            f'session "{id}" is already persisted with {state.cursor} event(s) '
                            "that do not match this live session (id collision)"
                        )
            state.owner = session
            suffix = session.events[state.cursor :]
            if suffix:
                await self._append_core(id, suffix)

    async def _write_live(self, session: Session, batch: builtins.list[SessionEvent]) -> None:
        live = self._live.get(session)
        if live is not None and live.init is not None:
            await live.init
        async with self._chains.hold(session.id):
            state = self._states.get(session.id)
            fresh = _unwritten(batch, state.cursor if state is not None else 0)
            if fresh:
                await self._append_core(session.id, fresh)

    def _write_live_now(self, session: Session, batch: builtins.list[SessionEvent]) -> bool:
        """The barrier's synchronous path: write ``batch`` now if the session is bound and
        materialized and nothing else holds its id (so no await can interleave); otherwise
        decline and let :meth:`_write_live` do it."""
        live = self._live.get(session)
        if live is None or not live.bound:
            return False
        id = session.id
        state = self._states.get(id)
        if (
            state is None
            or state.owner is not session
            or not state.materialized
            or self._chains.held(id)
        ):
            return False
        fresh = _unwritten(batch, state.cursor)
        if not fresh:
            return True
        if fresh[0].seq != state.cursor or fresh[-1].seq != state.cursor + len(fresh) - 1:
            return False  # not contiguous: the async path reports it
        if not self.append_batch_now(state.header, fresh):
            return False
        self._appended(id, state, len(fresh))
        return True

    # --- helpers ----------------------------------------------------------------------------

    def _live_session(self, id: str) -> Session | None:
        for session, live in self._live.items():
            if session.id == id and not live.retired:
                return session
        return None

    def _require_store(self) -> SessionStore:
        if self._store is None:
            raise SessionError(f"{self.name} is not installed in a runtime")
        return self._store

    def _check_open(self) -> None:
        if self._closed or self._closing:
            raise SessionError(f"{self.name} is closed")


def _unwritten(batch: builtins.list[SessionEvent], cursor: int) -> builtins.list[SessionEvent]:
    """The tail of a live batch that storage lacks: binding a session may already have written
    its head (a batch is contiguous by seq)."""
    skip = cursor - batch[0].seq if batch else 0
    return batch[skip:] if skip > 0 else batch


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _checked_header(header: SessionHeader | Mapping[str, Any]) -> SessionHeader:
    raw = header.to_json() if isinstance(header, SessionHeader) else header
    try:
        value: Any = snapshot(raw, "metadata")
    except JsonValueError as e:
        raise TypeError(f"session metadata must be losslessly JSON-serializable: {e}") from e
    if not isinstance(value, Mapping):
        raise TypeError("session metadata must be a JSON object")
    created = value.get("createdAt")
    if not is_safe_int(created) or created < 0:
        raise TypeError("session metadata createdAt must be a non-negative safe integer")
    if not isinstance(value.get("id"), str) or not value["id"]:
        raise TypeError("session metadata id must be a non-empty string")
    return SessionHeader.model_validate(value)


def _snapshot_batch(
    events: Sequence[SessionEvent | Mapping[str, Any]],
) -> builtins.list[SessionEvent]:
    batch: list[SessionEvent] = []
    for index, event in enumerate(events):
        if isinstance(event, SessionEvent):
            batch.append(event)
            continue
        kind = event.get("type") if isinstance(event, Mapping) else None
        try:
            batch.append(SessionEvent.from_json(event))
        except JsonValueError as e:
            raise TypeError(
                f'session event batch is not losslessly JSON-serializable: event "{kind}" at '
                f"index {index} carries non-JSON-serializable data: {e}"
            ) from e
    return batch


def _same_prefix(live: Sequence[SessionEvent], stored: Sequence[SessionEvent]) -> bool:
    """The live log starts with exactly the stored events (compared as written JSON)."""
    if len(live) < len(stored):
        return False
    return all(
        encode_json(a.to_json()) == encode_json(b.to_json())
        for a, b in zip(live, stored, strict=False)
    )


def _check_cwd(id: str, stored: SessionHeader, session: Session) -> None:
    if stored.cwd != session.header.cwd:
        raise SessionCollisionError(
            f'session "{id}" is already persisted at a different cwd (persisted: '
            f"{stored.cwd}, live: {session.header.cwd}) (id collision)"
        )


def _version_message(header: SessionHeader, suffix: str) -> str:
    v = header.version
    if v > SESSION_FORMAT_VERSION:
        return (
            f'session "{header.id}" uses log format v{v}, but this harness reads only '
            f"v{SESSION_FORMAT_VERSION}: the log was written by a newer harness — upgrade the "
            f"harness to open it{suffix}"
        )
    return (
        f'session "{header.id}" uses log format v{v}, older than the supported '
        f"v{SESSION_FORMAT_VERSION}, and this build ships no upgrade path for it{suffix}"
    )
