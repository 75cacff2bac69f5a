"""``SessionPersistence``: the :class:`SessionPersistence` service over one composed
:class:`session.persistence.storage.Storage`.

The service is the public API and the plugin that attaches to a runtime. It delegates the
per-id knowledge to a :class:`session.persistence.ledger.Ledger` (state, locks, validated cold
reads, repair) and the live sessions' writes to a :class:`session.persistence.live.LiveWriter`.
A backend is a storage plus, if it likes, a convenience constructor (``JsonlPersistence``).
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agent_session.session.errors import (
    SessionBackendStateError,
    SessionCollisionError,
    SessionNotFoundError,
    SessionOpenTurnError,
)
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.header import SessionHeader
from agent_session.session.json.lossless import is_safe_int
from agent_session.session.live.hooks import (
    SESSION_CREATED,
    SESSION_DISPOSED,
    SESSION_EVENT,
    SESSION_FLUSH,
)
from agent_session.session.live.session import Session
from agent_session.session.persistence.api import (
    Diagnosis,
    RawArtifact,
    SessionSnapshot,
    SessionTail,
    StoredSession,
)
from agent_session.session.persistence.cold import ColdSource, falls_back
from agent_session.session.persistence.inputs import (
    checked_header,
    snapshot_batch,
    validate_options,
)
from agent_session.session.persistence.ledger import Inspection, Ledger, Repair
from agent_session.session.persistence.live import LiveWriter
from agent_session.session.persistence.storage import Storage
from agent_session.session.persistence.write_behind import Scheduler

if TYPE_CHECKING:
    from agent_session.session.chain.anchoring import Anchoring
    from agent_session.session.live.runtime import PluginScope
    from agent_session.session.live.store import SessionStore

__all__ = ["Repair", "SessionPersistence"]


class SessionPersistence:
    """The durable store of sessions, installed into a runtime with ``runtime.install(backend)``,
    over a backend's :class:`Storage` (every backend is this class holding its storage).

    Guarantees, for every storage: ``append`` returns only after the batch is durable and
    contiguous; nothing acknowledged is lost or rewritten; ``load`` of a cold session returns
    a balanced log and makes its repair durable; ``inspect`` and ``diagnose`` never write; a
    session created but never appended leaves no trace in storage.

    ``repair`` computes closers for an interrupted log (pass ``recovery.closers``).
    ``write_batch_max_delay_ms`` is the batching window of live sessions;
    ``prepared_session_cache_size`` bounds the cache of cold inspections reused while their
    revision is unchanged; ``scheduler`` replaces the event loop's timers (tests).
    """

    def __init__(
        self,
        storage: Storage,
        *,
        repair: Repair,
        write_batch_max_delay_ms: int = 200,
        prepared_session_cache_size: int = 5,
        scheduler: Scheduler | None = None,
    ) -> None:
        validate_options(prepared_session_cache_size, write_batch_max_delay_ms)
        self.storage = storage
        """Where the bytes live."""
        self.name = storage.name
        """The backend's label in log messages and errors."""
        self._cache_size, self._delay_ms = prepared_session_cache_size, write_batch_max_delay_ms
        self._scheduler = scheduler
        self.ledger = Ledger(storage, repair, prepared_session_cache_size)
        """Per-id state, locks and validated cold reads (shared by the cold and live paths)."""
        self.writer = LiveWriter(
            self.ledger, delay_ms=write_batch_max_delay_ms, scheduler=scheduler
        )

        """The live sessions' write path."""
        self.cold: ColdSource | None = None
        """The store's cold tier, when it has one: a session not held here is read from it,
        and brought back by :meth:`resume` (:mod:`session.persistence.cold`)."""
        self.integrity: Anchoring | None = None
        """Set by :meth:`chain_logs`: the live sessions' logs are hash-chained."""
        self._store: SessionStore | None = None
        self._closing = False
        self._closed = False

    # --- plugin -----------------------------------------------------------------------------

    def install(self, scope: PluginScope) -> None:
        """Attach to a runtime: persist every live session of its store, and serve its
        ``resume``."""
        runtime = scope.runtime
        if self._store is not None and self._store is not runtime.sessions:
            raise SessionBackendStateError(f"{self.name} is already installed in another runtime")
        self._store = runtime.sessions
        writer = self.writer
        if self.integrity is not None:  # (its anchors join each flush's batch: before_flush)
            scope.observe(SESSION_CREATED, self.integrity.on_created)
            scope.observe(SESSION_DISPOSED, self.integrity.on_disposed)
        scope.observe(SESSION_CREATED, writer.on_created)
        scope.observe(SESSION_EVENT, writer.on_event)
        scope.listen(SESSION_FLUSH, writer.on_flush)
        scope.observe(SESSION_DISPOSED, writer.on_disposed)
        scope.on_dispose(runtime.sessions.bind_loader(self.resume))
        runtime.persistence = self

        def uninstall() -> None:
            if runtime.persistence is self:
                runtime.persistence = None

        scope.on_dispose(uninstall)
        # When the runtime is garbage-collected, or the process exits, with appends that
        # were never made durable, the log names the sessions. (The writer reaches this
        # backend through the sessions, so only the runtime can be watched.)
        weakref.finalize(runtime, writer.warn_unflushed, self.name)
        for session in runtime.sessions.list():  # sessions that were live before install
            writer.start(session)

    def wrap_storage(self, wrap: Callable[[Storage], Storage]) -> None:
        """Put ``wrap(storage)`` in the storage's place (a sealing layer): call before
        :meth:`chain_logs` and :meth:`install`, so every write and read goes through it."""
        if self._store is not None or self.integrity is not None:
            raise SessionBackendStateError(
                f"{self.name}: wrap_storage() must come before chain_logs() and install"
            )
        self.storage = wrap(self.storage)
        self.ledger = Ledger(self.storage, self.ledger.repair, self._cache_size)
        self.writer = LiveWriter(self.ledger, delay_ms=self._delay_ms, scheduler=self._scheduler)

    def chain_logs(self) -> None:
        """Hash-chain every log this backend writes from now on (``open_store(...,
        integrity=True)``): call before :meth:`install`. See :mod:`agent_session.audit`."""
        from agent_session.session.chain.anchoring import Anchoring

        if self._store is not None:
            raise SessionBackendStateError(f"{self.name}: chain_logs() must come before install")
        if self.integrity is None:
            self.integrity = Anchoring(self.storage, self.writer)
            self.writer.before_flush = self.integrity.on_flush
            self.writer.on_line = self.integrity.on_line

    # --- public API -------------------------------------------------------------------------

    async def create(self, header: SessionHeader | Mapping[str, Any]) -> None:
        """Register a session lazily (no I/O but an existence check). Raises ``TypeError``
        for bad metadata, ``ValueError`` for an id the storage cannot store, and
        :class:`SessionCollisionError` when the id exists here or in storage."""
        raw_id = header.id if isinstance(header, SessionHeader) else header.get("id")
        if isinstance(raw_id, str):
            self.storage.check_id(raw_id)
        checked = checked_header(header)
        self._check_open()
        async with self.ledger.locks.hold(checked.id):
            await self.ledger.create(checked)

    def append(
        self, id: str, events: Sequence[SessionEvent | Mapping[str, Any]]
    ) -> Awaitable[None]:
        """Durably append ``events``, snapshotted when called (later changes to the caller's
        objects are ignored). An id known only to storage is adopted first (which repairs an
        interrupted log). Raises ``TypeError`` for non-JSON data at the call; the awaitable
        raises ``SessionError`` for a seq that does not continue the log."""
        batch = snapshot_batch(events)
        self._check_open()
        return self._append(id, batch)

    async def _append(self, id: str, batch: list[SessionEvent]) -> None:
        if not batch:
            return
        await self.writer.wait_retirement(id)
        async with self.ledger.locks.hold(id):
            await self.ledger.claim(id)
            if self.ledger.state(id) is None:
                await self.ledger.commit_cold(id)
            await self.ledger.append(id, batch)

    async def load(self, id: str) -> StoredSession:
        """Live: flush and return the live log (refused while its turn is open). Cold: read,
        validate, repair durably (truncate a torn tail, append closers), return. A log with
        a compaction boundary is read from the last one on: the events before it are read
        only when somebody reaches for one of them."""
        self._check_open()
        live = await self._live_or_none(id)
        if live is None:
            async with self.ledger.locks.hold(id):
                live = self.writer.session(id)
                if live is None:
                    return (
                        await self.ledger.commit_cold(id, window=self._reads_from_boundary)
                    ).balanced
        return await self._load_live(live)

    async def _live_or_none(self, id: str) -> Session | None:
        await self.writer.wait_retirement(id)
        return self.writer.session(id)

    async def _load_live(self, session: Session) -> StoredSession:
        events = session.events
        await self._require_store().flush(session)
        if not events:
            raise SessionNotFoundError(f'session "{session.id}" not found')
        if self.ledger.repair(events):
            raise SessionOpenTurnError(
                f'cannot load session "{session.id}" while its live turn is open; use the live '
                "Session or wait for the turn to close"
            )
        state = self.ledger.state(session.id)
        return StoredSession(state.header if state else session.header, events)

    @falls_back
    async def inspect(self, id: str) -> StoredSession:
        """The stored log plus closers in memory; never writes. A live session's own
        (possibly open) log is returned as it is."""
        self._check_open()
        live = await self._live_or_none(id)
        if live is not None:
            state = self.ledger.state(id)
            return StoredSession(state.header if state else live.header, live.events)
        async with self.ledger.locks.hold(id):
            return (await self.ledger.inspect(id)).balanced

    @falls_back
    async def diagnose(self, id: str) -> Diagnosis:
        """What an operator asks of a stored session: :meth:`inspect`'s log, how many events
        are stored, how many closers a load would add, whether the tail is torn, the stored
        size and where it lives, from a read of what is stored now. Never writes (a live
        session's writes are not flushed).

        Raises :class:`SessionNotFoundError`, ``SessionPersistenceCorruptionError`` and
        ``SessionFormatUnsupportedError`` as :meth:`inspect`.
        """
        self._check_open()
        await self.writer.wait_retirement(id)
        async with self.ledger.locks.hold(id):
            inspection = await self.ledger.inspect(id, fresh=True)
            elsewhere = await self.storage.writer_elsewhere(id)
        return Diagnosis(
            inspection.balanced,
            len(inspection.stored),
            len(inspection.closers),
            inspection.cut_at is not None,
            inspection.size,
            self.storage.locate(inspection.header),
            elsewhere,
        )

    @falls_back
    async def read_from(self, id: str, from_seq: int) -> Sequence[SessionEvent]:
        """The stored events from ``from_seq`` on, exactly as stored (no closers, no repair)."""
        if not is_safe_int(from_seq) or from_seq < 0:
            raise TypeError(
                f"read_from from_seq must be a non-negative safe integer, got {from_seq!r}"
            )
        self._check_open()
        await self.writer.wait_retirement(id)
        async with self.ledger.locks.hold(id):
            return (await self.ledger.inspect(id)).stored[from_seq:]

    @falls_back
    async def read_tail(self, id: str, count: int) -> SessionTail:
        """The last ``count`` events of a session (all, when it holds fewer), read from the
        log's end where the storage can (JSONL in plain encoding, SQLite, PostgreSQL), so the
        cost does not grow with the log. Each event is checked on its own (the rules that
        need the events before it are a whole load's); no closers are added and nothing is
        repaired: ``torn`` says whether a load would cut a torn tail. A session live here
        gives its own log's last events. Never writes.

        Raises :class:`SessionNotFoundError`, ``SessionPersistenceCorruptionError`` and
        ``SessionFormatUnsupportedError`` as :meth:`inspect`.
        """
        if type(count) is not int or count < 0:
            raise TypeError(f"read_tail count must be a non-negative integer, got {count!r}")
        self._check_open()
        live = await self._live_or_none(id)
        if live is not None:
            events = live.events
            if not events:
                raise SessionNotFoundError(f'session "{id}" not found')
            start = max(0, len(events) - count)
            return SessionTail(live.header, start, tuple(events[start:]), False)
        async with self.ledger.locks.hold(id):
            return await self.ledger.tail(id, count)

    async def list_headers(self) -> list[SessionHeader]:
        """Headers of materialized stored sessions (never-appended ones are absent)."""
        self._check_open()
        return [snapshot.header for snapshot in await self.storage.list_snapshots()]

    async def list_snapshots(self) -> list[SessionSnapshot]:
        """Headers and revisions of materialized stored sessions."""
        self._check_open()
        return await self.storage.list_snapshots()

    def locate(self, header: SessionHeader) -> str | None:
        """Where the session's log lives (a path for file storage), without any I/O."""
        return self.storage.locate(header)

    @falls_back
    async def read_raw(self, id: str) -> RawArtifact | None:
        """The stored bytes of a session, verbatim, or ``None`` when it does not exist."""
        self._check_open()
        return await self.storage.read_raw(id)

    async def delete(self, id: str, *, keep_cold: bool = False) -> None:
        """Remove the stored session ``id`` durably, with every event (see
        :meth:`Storage.delete`), and its cold copy unless ``keep_cold`` (the cold tier drops
        a hot copy it archived so); what this backend knew of it is forgotten.

        Raises:
            SessionCollisionError: It is live here (dispose it first), or another writer
                holds it; nothing is removed.
            SessionHeldError: A legal hold stands on it (``governance.holds``), checked
                under its writer lock; nothing is removed.
            SessionNotFoundError: Nothing of ``id`` is stored.
        """
        self._check_open()
        await self.writer.wait_retirement(id)
        async with self.ledger.locks.hold(id):
            state = self.ledger.state(id)
            if self.writer.session(id) is not None or (state and state.owner is not None):
                raise SessionCollisionError(
                    f'cannot delete session "{id}" while it is live; dispose it first'
                )
            taken = await self.storage.acquire(id)  # (no hold lands between check and delete)
            try:
                await self.refuse_held(id)
                self.ledger.forget(id)
                deleted = await self.storage.delete(id)
            finally:
                if taken:
                    await self.storage.release(id)
        if self.cold is not None and not keep_cold:  # (nothing brings the session back)
            deleted = await self.cold.forget(id) or deleted
        if not deleted:
            raise SessionNotFoundError(f'session "{id}" not found')

    async def refuse_held(self, id: str) -> None:
        """Raise :class:`SessionHeldError` when a legal hold stands on ``id`` (hot or cold
        copy), read from its stored bytes (``session.events.holds``); what :meth:`delete`
        checks under the writer lock, for a caller that must know before it starts."""
        from agent_session.session.events.holds import check_not_held, holds_in_lines

        raw = await self.read_raw(id)
        if raw is not None:
            check_not_held(holds_in_lines(raw.content), id)

    async def resume(self, id: str, *, keep_open: bool = False) -> Session:
        """Load a stored session (repairing it durably if it was interrupted) and publish it as
        a live session that continues at the next seq. Its seed is the stored log, followed by
        one ``session/end-seed``; nothing stored is written again, and the log is read and
        validated once, from its last compaction boundary on when it has one (as
        :meth:`load`). It returns only once this backend is the session's one writer (on a
        medium with writer locks, it holds the lock): a second resumer of a session, in any
        process, is refused here, before it can decide or run anything. A session only the
        store's cold tier holds is brought back into the store first. With ``keep_open``, a
        turn a crash left open stays open (a torn tail is still cut): for a driver that goes
        on with that turn itself (a durable-execution engine recovering its workflow); any
        other load closes it.

        Raises:
            SessionCollisionError: The session is live here, or another writer holds it.
        """
        store = self._require_store()
        self._check_open()
        await self.writer.wait_retirement(id)
        try:
            loaded = await self._commit(id, keep_open)
        except SessionNotFoundError:
            if self.cold is None or not await self.cold.restore(self, id):
                raise
            loaded = await self._commit(id, keep_open)  # (brought back from the cold tier)
        session = Session.restore(loaded.header, loaded.checked, clock=store.clock)
        if self.integrity is not None:
            await self.integrity.adopt(session)
        store.attach(session)
        try:
            await self.writer.claimed(session)
        except BaseException:
            store.detach(session)
            raise
        return session

    async def _commit(self, id: str, keep_open: bool) -> Inspection:
        store = self._require_store()
        async with self.ledger.locks.hold(id):
            if store.get(id) is not None or self.writer.session(id) is not None:
                raise SessionCollisionError(f'cannot resume session "{id}" while it is live')
            return await self.ledger.commit_cold(
                id, close=not keep_open, window=self._reads_from_boundary
            )

    async def aclose(self) -> None:
        """Flush every live session, wait for retirements and every per-id lock, then close
        storage (always). A flush that failed is raised: the error itself when one session
        failed (an ``OSError`` stays catchable as one), an ``ExceptionGroup``
        (``"<name> dispose failed"``) of one error per session when several did."""
        if self._closed or self._closing:
            return
        self._closing = True  # stop admitting new public calls
        errors = await self.writer.flush_all()
        await self.ledger.locks.drain()
        self._closed = True
        self.writer.close(self.name)
        try:
            await self.storage.close()
        finally:
            if len(errors) == 1:
                raise errors[0]
            if errors:
                raise ExceptionGroup(f"{self.name} dispose failed", errors)

    # --- helpers ----------------------------------------------------------------------------

    @property
    def _reads_from_boundary(self) -> bool:
        """Whether a load or resume may read a log from its last compaction boundary on (not
        on a chained store, whose resume folds every stored line)."""
        return self.integrity is None

    def _require_store(self) -> SessionStore:
        if self._store is None:
            raise SessionBackendStateError(f"{self.name} is not installed in a runtime")
        return self._store

    def _check_open(self) -> None:
        if self._closed or self._closing:
            raise SessionBackendStateError(f"{self.name} is closed")
