"""The ledger: what the service knows about each id, shared by the cold path (load, inspect,
repair) and the live write path.

It holds the per-id state (stored length, whether the log exists, which live session owns
it), one FIFO lock per id, and a bounded cache of cold inspections reused while their revision
is unchanged. A cold read is validated here, once: the repair that follows, and a resume after
it, reuse what that read learned instead of reading and checking the log again.

Internal to ``session.persistence``: its names may change between releases.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agent_session.session.errors import (
    JsonValueError,
    SessionChangedError,
    SessionCollisionError,
    SessionError,
    SessionFormatUnsupportedError,
    SessionNotFoundError,
    SessionPersistenceCorruptionError,
    SessionSealError,
    SessionSeqError,
)
from agent_session.session.events.event import SessionEvent, is_known_event_type
from agent_session.session.events.eventlog import EventLog, LazyRun, is_run, iter_parts, seq_gap
from agent_session.session.events.header import SessionHeader, version_problem
from agent_session.session.events.rules import CheckedLog, check_events, validate_log
from agent_session.session.events.subagents import ChildAnswer, child_answer, unanswered_children
from agent_session.session.persistence.api import SessionTail, StoredLog, StoredSession
from agent_session.session.persistence.keyed_locks import KeyedLocks
from agent_session.session.persistence.storage import Storage
from agent_session.session.persistence.window import blocking, checked_window, read_window

__all__ = ["Inspection", "Ledger", "Repair", "State"]


class Repair(Protocol):
    """Computes the closers of an interrupted log (``recovery.closers``); ``[]`` when
    balanced. ``children``: what the logs of the child agents its unanswered calls ran say
    (asked only when there are some)."""

    def __call__(
        self, events: Sequence[SessionEvent], children: Mapping[Any, ChildAnswer] = ..., /
    ) -> list[SessionEvent]: ...


_REPAIR_ROUNDS = 8
_CHILD_TAIL = 64
"""Events read from a child's end to tell its state (its last answer is among them)."""


@dataclass(slots=True)
class State:
    """What the service knows about one stored or lazily created id."""

    header: SessionHeader
    cursor: int
    """The stored length, which is the next seq to append."""
    materialized: bool
    """Whether the log exists in storage."""
    owner: object | None = None
    """The live session bound to this id, if any."""


@dataclass(frozen=True, slots=True)
class Inspection:
    """One validated cold read: the stored events, the closers that would balance them (in
    memory only), and where the read came from."""

    header: SessionHeader
    checked: CheckedLog
    """The valid stored events and the surface they leave."""
    closers: tuple[SessionEvent, ...]
    closed: CheckedLog
    """``checked`` with the closers appended and validated (``checked`` when there are
    none): a repair never writes a closer the load rules would refuse."""
    revision: str
    """The revision of exactly the bytes read."""
    cut_at: object | None
    """Where a torn tail starts (storage's token), or ``None``."""
    size: int | None
    """How many bytes the stored artifact has, where the storage says; ``None`` also after a
    repair made here (the bytes were not read again)."""
    windowed: bool = False
    """Whether it was read from the last compaction boundary on (the events before it are
    :class:`EarlierEvents`, read when somebody reaches for one)."""

    @property
    def stored(self) -> EventLog[SessionEvent]:
        """The stored events."""
        return self.checked.events

    @property
    def needs_repair(self) -> bool:
        """Whether a load must write (cut a torn tail or append closers)."""
        return self.cut_at is not None or bool(self.closers)

    @property
    def balanced(self) -> StoredSession:
        """The stored log with the closers added."""
        return StoredSession(self.header, self.closed.events)

    def kept_open(self) -> Inspection:
        """This inspection without its closers: its last turn stays as stored."""
        return dataclasses.replace(self, closers=(), closed=self.checked)

    def repaired(self, revision: str, closers: Sequence[SessionEvent]) -> Inspection:
        """The inspection of the log once this one's repair is durable at ``revision``, with
        the closers as a read of the storage returns them (``storage.as_stored``)."""
        closed = self.closed
        if [e.encode() for e in closers] != [e.encode() for e in self.closers]:
            closed = validate_log(closers, after=self.checked)
        return dataclasses.replace(
            self,
            checked=closed,
            closers=(),
            closed=closed,
            revision=revision,
            cut_at=None,
            size=None,
        )


class Ledger:
    """Per-id state, locks and validated cold reads over one :class:`Storage`.

    Every method that reads or changes an id's state runs inside ``locks.hold(id)``.
    """

    def __init__(self, storage: Storage, repair: Repair, cache_size: int) -> None:
        self.storage = storage
        self.repair = repair
        """The closers of an interrupted log."""
        self.locks = KeyedLocks()
        self._states: dict[str, State] = {}
        self._cache: OrderedDict[str, Inspection] = OrderedDict()
        self._cache_size = cache_size

    # --- state ------------------------------------------------------------------------------

    def state(self, id: str) -> State | None:
        """What is known about ``id``, or ``None``."""
        return self._states.get(id)

    def record(self, state: State) -> State:
        """Record ``state`` for its header's id; return it."""
        self._states[state.header.id] = state
        return state

    def forget(self, id: str) -> None:
        """Drop what is known about ``id``: its state and any cached read (the next access
        reads storage afresh)."""
        self._states.pop(id, None)
        self._cache.pop(id, None)

    def cached(self, id: str) -> bool:
        """Whether a cold inspection of ``id`` is cached."""
        return id in self._cache

    # --- creation and appends ---------------------------------------------------------------

    async def create(self, header: SessionHeader) -> None:
        """Register a new id lazily; refuse one known here or stored."""
        if header.id in self._states:
            raise SessionCollisionError(f'session "{header.id}" already exists in this backend')
        if await self.storage.revision(header.id) is not None:
            raise SessionCollisionError(
                f'session "{header.id}" already has a persisted log on disk; load/resume it '
                "instead of creating"
            )
        self.record(State(header, 0, False))

    async def append(self, id: str, batch: Sequence[SessionEvent]) -> None:
        """Durably append a batch that must continue the stored log exactly."""
        state = self._states.get(id)
        if state is None:
            raise SessionNotFoundError(f'session "{id}" not found')
        gap = seq_gap(batch, state.cursor)
        if gap is not None:
            index, seq = gap
            raise SessionSeqError(
                f'append seq mismatch for "{id}": expected {state.cursor + index} at index '
                f"{index}, got {seq}"
            )
        await self.storage.append(state.header, batch, materialized=state.materialized)
        self.appended(id, state, len(batch))

    async def claim(self, id: str) -> None:
        """Become the writer of ``id`` and make sure what is known of it is still what is
        stored. A cursor learned before the writer lock was taken is never used after it:
        when the lock is newly taken, the stored log is read again (a cached read if its
        revision is unchanged) and must hold exactly the known events; a torn tail another
        writer left is cut.

        Raises:
            SessionCollisionError: Another writer holds the lock, or changed the log since it
                was read here. Then the state is forgotten and the lock given back, so a retry
                reads the log afresh and can never append at the stale seq.
        """
        taken = await self.storage.acquire(id)
        state = self._states.get(id)
        if not taken or state is None or not state.materialized:
            return
        try:
            inspection = await self.inspect(id, window=True)
            stored = len(inspection.stored)
            if stored != state.cursor:
                raise SessionCollisionError(
                    f'session "{id}" was changed by another writer since it was read here '
                    f"({state.cursor} events known, {stored} stored); load or resume it again"
                )
        except BaseException:
            if state.owner is None:
                self.forget(id)
                await self.storage.release(id)
            raise
        if inspection.cut_at is not None:
            await self.storage.commit_repair(state.header, inspection.cut_at, ())
            self._cache.pop(id, None)

    def appended(self, id: str, state: State, count: int) -> None:
        """Record that ``count`` events reached storage after ``state.cursor``."""
        state.materialized = True
        state.cursor += count
        self._cache.pop(id, None)

    # --- cold path --------------------------------------------------------------------------

    async def commit_cold(self, id: str, *, close: bool = True, window: bool = False) -> Inspection:
        """Make the stored log balanced and durable (cut a torn tail, append closers; with
        ``close`` false only cut), record ownerless state, and return the inspection of what
        is stored then. The log is read and validated once (from its last compaction
        boundary on, with ``window``); if another writer changed it between the read and the
        repair, it is read again (bounded)."""
        for _ in range(_REPAIR_ROUNDS):
            inspection = await self.inspect(id, window=window)
            if not close:
                inspection = inspection.kept_open()
            if inspection.needs_repair:
                await self.storage.acquire(id)
                if await self.storage.revision(id) != inspection.revision:
                    self._cache.pop(id, None)  # another writer changed it since we read
                    continue
                await self.storage.commit_repair(
                    inspection.header, inspection.cut_at, inspection.closers
                )
                revision = await self.storage.revision(id)
                stored = self.storage.as_stored(inspection.closers)
                inspection = inspection.repaired(revision or "", stored)
                self._remember(id, inspection)
            self.record(State(inspection.header, len(inspection.stored), True))
            return inspection
        raise SessionChangedError(f'session "{id}" kept changing while it was being repaired')

    async def inspect(self, id: str, *, fresh: bool = False, window: bool = False) -> Inspection:
        """The validated stored log and its closers (in memory); reuses a cached read while
        the revision is unchanged, unless ``fresh`` (read what is stored now, with its size).
        With ``window``, a log with a compaction boundary may be read from it on (and a
        cached read of either kind serves); without, the read is whole. Raises
        :class:`SessionNotFoundError` when absent."""
        cached = None if fresh else self._cache.get(id)
        if cached is not None and (window or not cached.windowed):
            # (another id's inspection may evict this one while the revision is read)
            if await self.storage.revision(id) == cached.revision:
                self._remember(id, cached)
                return cached
            self._cache.pop(id, None)
        found = await self._from_boundary(id) if window and not fresh else None
        if found is not None:
            header, checked, revision = found
            cut_at: object | None = None
            size: int | None = None
        else:
            stored = await self.storage.load(id)
            if stored is None:
                raise SessionNotFoundError(f'session "{id}" not found')
            header, checked, revision = stored.header, self.check(id, stored), stored.revision
            cut_at, size = stored.cut_at, stored.size
        children = await self._children(checked.events)
        try:
            repair = self.repair
            closers = tuple(
                repair(checked.events, children) if children else repair(checked.events)
            )
            closed = validate_log(closers, after=checked) if closers else checked
        except Exception as e:
            raise SessionPersistenceCorruptionError(
                f'stored session "{id}" failed validation: {e}'
            ) from e
        inspection = Inspection(
            header, checked, closers, closed, revision, cut_at, size, found is not None
        )
        self._remember(id, inspection)
        return inspection

    async def _children(self, events: Sequence[SessionEvent]) -> dict[Any, ChildAnswer]:
        """What the logs of the child agents the open turn's unanswered calls ran say (a
        child whose log cannot be read is left out: its call stays unknown)."""
        known: dict[Any, ChildAnswer] = {}
        for call_id, child in unanswered_children(events).items():
            try:
                tail = await self.tail(child, _CHILD_TAIL)
            except SessionNotFoundError:
                known[call_id] = child_answer(child, None)
                continue
            except (SessionError, OSError):
                continue
            known[call_id] = child_answer(child, tail.events, tail.start)
        return known

    async def _from_boundary(self, id: str) -> tuple[SessionHeader, CheckedLog, str] | None:
        """The stored log read from its last compaction boundary on, checked; ``None`` when
        it has none (or anything about it asks for the whole read)."""
        window = await read_window(self.storage, id)
        if window is None:
            return None
        self._check_header(id, window.header)
        where = self._where(window.header)
        _check_vocabulary(id, window.events, lambda: where, window.boundary.start)
        start = window.boundary.start

        def read_before() -> Sequence[SessionEvent]:
            stored = blocking(lambda: self.storage.load(id))
            if stored is None:
                raise SessionNotFoundError(f'session "{id}" was deleted while it was open')
            return self.check(id, stored).events[:start]

        try:
            checked = checked_window(window, read_before)
        except (SessionError, JsonValueError, ValueError, TypeError) as e:
            _refuse_sealed(id, window.events)
            raise SessionPersistenceCorruptionError(
                f'stored session "{id}" failed validation: {e}'
            ) from e
        return None if checked is None else (window.header, checked, window.revision)

    def _remember(self, id: str, inspection: Inspection) -> None:
        self._cache[id] = inspection
        self._cache.move_to_end(id)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def check(self, id: str, stored: StoredLog) -> CheckedLog:
        """Identity, version, vocabulary and event validation of a storage read."""
        self._check_header(id, stored.header)
        _check_vocabulary(id, stored.events, lambda: self._where(stored.header))
        try:
            return validate_log(stored.events)
        except (SessionError, JsonValueError, ValueError, TypeError) as e:
            _refuse_sealed(id, stored.events)
            raise SessionPersistenceCorruptionError(
                f'stored session "{id}" failed validation: {e}'
            ) from e

    async def tail(self, id: str, count: int) -> SessionTail:
        """The last ``count`` stored events, read from the log's end where the storage can,
        with identity, version, vocabulary and every rule of each event on its own checked.
        Raises :class:`SessionNotFoundError` when absent."""
        stored = await self.storage.read_tail(id, count)
        if stored is None:
            raise SessionNotFoundError(f'session "{id}" not found')
        self._check_header(id, stored.header)
        _check_vocabulary(id, stored.events, lambda: self._where(stored.header), stored.start)
        try:
            events = check_events(stored.events, stored.start)
        except (SessionError, JsonValueError, ValueError, TypeError) as e:
            _refuse_sealed(id, stored.events)
            raise SessionPersistenceCorruptionError(
                f'stored session "{id}" failed validation: {e}'
            ) from e
        return SessionTail(stored.header, stored.start, events, stored.torn)

    def _check_header(self, id: str, header: SessionHeader) -> None:
        problem = version_problem(header)
        if problem is not None:
            raise SessionFormatUnsupportedError(problem + self._where(header))
        if header.id != id:
            raise SessionPersistenceCorruptionError(
                f'stored session identity mismatch: requested "{id}", header contains "{header.id}"'
            )

    def _where(self, header: SessionHeader) -> str:
        """`` (raw log: <where>)`` for an error message, when the storage has a location."""
        location = self.storage.locate(header)
        return f" (raw log: {location})" if location else ""


def _check_vocabulary(
    id: str,
    events: Sequence[SessionEvent | Mapping[str, Any]],
    where: Callable[[], str],
    start: int = 0,
) -> None:
    """Refuse a stored event (seqs from ``start``) of a type this build does not know and
    that is not marked ``ignorable``: it was likely written by a newer harness."""
    index = start  # the seq of the next item
    for raw in iter_parts(events):
        seq, index = index, index + (len(raw) if is_run(raw) else 1)
        if type(raw) is SessionEvent or isinstance(raw, SessionEvent | LazyRun):
            continue  # built by the storage from a known shape (a packed row)
        kind = raw.get("type") if isinstance(raw, Mapping) else None
        if (
            isinstance(kind, str)
            and not is_known_event_type(kind)
            and raw.get("ignorable") is not True
        ):
            raise SessionFormatUnsupportedError(
                f'session "{id}" contains event type "{kind}" (seq {raw.get("seq", seq)}) '
                "unknown to this harness and not marked ignorable; refusing to interpret the "
                f"log — it was likely written by a newer harness{where()}"
            )


def _refuse_sealed(id: str, events: Sequence[Any]) -> None:
    """Raise :class:`SessionSealError` when a log that failed validation is sealed (its
    content encrypted, ``agent_session.sealing``) and was read without its keyring."""
    for item in iter_parts(events):
        data = (
            None if is_run(item) else (item.get("data") if isinstance(item, Mapping) else item.data)
        )
        sealed = data.get("sealed") if isinstance(data, Mapping) else None
        if isinstance(sealed, str) and sealed.startswith("v1."):
            raise SessionSealError(
                f'session "{id}" is sealed (key {sealed.split(".")[1]}): open the store with '
                "its keyring (AGENT_SESSION_KEYRING and AGENT_SESSION_MASTER_KEY_FILE)"
            )
