"""``Storage``: the base class a persistence backend derives from, held by the generic
:class:`session.persistence.service.SessionPersistence`.

A backend implements the required core, the abstract methods (``load``, ``revision``,
``append``, ``commit_repair``, ``list_snapshots``, ``close``) and a ``name``; every other
method is an optional capability whose default here is the answer of a medium without it (no
writer locks, no answer without blocking, no locations, no inline or early appends). A
minimal backend is the core only: see ``docs/development.md`` for one in a page, and
:mod:`agent_session.testing` for the contract suite every backend passes.

The service owns everything that is the same for every backend: per-id serialization,
lazy creation, seq contiguity, collision checks, validation of what was read, repair policy,
the live write-behind path and teardown. A storage only moves bytes, and states for each
method what is durable when it returns. The service never runs two writes of one id at
once: ``append``, ``append_inline``, ``start_append`` (until its future is done),
``commit_repair``, ``acquire`` and ``release`` of an id are serialized (``append_inline`` and
``start_append`` only run while nothing else holds the id), and so are the
reads a write depends on; ``list_snapshots``, ``read_raw`` and ``locate`` may run at any
time. A medium that writes each event's JSONL line says so (:attr:`Storage.writes_lines`):
a live writer's batch then carries the lines it already encoded for its events other than
deltas (``session.persistence.batches.Batch.lines``).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence

from agent_session.session.events.event import SessionEvent
from agent_session.session.events.header import SessionHeader, header_line
from agent_session.session.json.codec import encode_json
from agent_session.session.persistence.api import (
    RawArtifact,
    SessionSnapshot,
    StoredLog,
    StoredTail,
)

__all__ = ["Storage", "check_text_id", "tail_of"]


def tail_of(stored: StoredLog | None, count: int) -> StoredTail | None:
    """The last ``count`` events of a whole read (a packed run among them is built)."""
    if stored is None:
        return None
    whole = StoredTail(stored.header, 0, stored.events, stored.cut_at is not None).last(count)
    return StoredTail(whole.header, whole.start, list(whole.events), whole.torn)


def check_text_id(id: str, medium: str) -> None:
    """Refuse an id a database's text key cannot hold exactly: empty, with NUL, or with a
    lone surrogate (not UTF-8). ``medium`` names the column in the message.

    Raises:
        ValueError: Saying why.
    """
    if not id:
        raise ValueError("session id must be a non-empty string")
    if "\0" in id:
        raise ValueError(f"session id contains NUL, which {medium} cannot hold")
    try:
        id.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"session id contains a lone surrogate U+{ord(id[e.start]):04X} at index "
            f"{e.start}, which cannot be stored as UTF-8 text"
        ) from None


class Storage(ABC):
    """Where sessions' logs live: one implementation per medium (JSONL files, memory, ...)."""

    name: str
    """The backend's label, used in log messages and errors (``session-persistence-jsonl``)."""

    writes_lines: bool = False
    """Whether an append writes each event's JSONL line (``SessionEvent.encode``): then a live
    writer encodes each event but a delta as it is committed, and its batches carry those
    lines (``Batch.lines``). A medium that stores events otherwise leaves it ``False`` and
    is spared that work."""

    reuses_line: bool = True
    """Whether :meth:`stored_line` makes use of the event's JSONL line when it is given one
    (so a chain encodes each line once, at commit, and shares it); a medium that stores
    other bytes (a sealed one) does not, and is spared the encoding."""

    pack: bool = False
    """Whether appends pack runs of streamed deltas into one stored line (a medium that can
    sets it; a chained store turns it off, so each seq has its own line)."""

    def stored_line(self, id: str, event: SessionEvent, line: bytes | None = None) -> bytes:
        """The line this medium keeps of ``event`` of session ``id``, byte for byte as
        :meth:`read_raw` renders it once written (unpacked), without any I/O; ``line``: the
        event's JSONL line when the caller has it. By default its JSONL line."""
        return event.encode() if line is None else line

    def check_id(self, id: str) -> None:
        """Refuse an id this medium cannot store.

        Args:
            id: The id of a session about to be created.

        Raises:
            ValueError: Saying why (empty, too long, unencodable); nothing is reserved.
        """
        return None  # every id; a medium with limits refuses here

    @abstractmethod
    async def load(self, id: str) -> StoredLog | None:
        """Read the valid stored prefix of one log, and the revision of exactly those bytes.

        Args:
            id: The session id.

        Returns:
            The header, the complete events (wire dicts, or events the storage built itself
            from a shape it checked), the revision and ``cut_at`` (where a torn tail starts);
            ``None`` when the session is not stored.

        Raises:
            SessionPersistenceCorruptionError: The stored artifact cannot be read as a log.
            SessionFormatUnsupportedError: It is a format or layout this storage refuses.

        Never writes.
        """

    @abstractmethod
    async def revision(self, id: str) -> str | None:
        """The revision :meth:`load` would report now, without reading events (a ``stat``).

        Returns:
            ``None`` when the session is not stored. Equal revisions mean unchanged bytes.
        """

    def stored_now(self, id: str) -> bool | None:
        """Whether a log of ``id`` is stored, answered at once on the calling (event-loop)
        thread, so that ``sessions.create(id)`` can refuse a stored id when it is called
        rather than at the first flush.

        Returns:
            ``None`` when the medium cannot tell without blocking the event loop (a network
            round trip); the collision is then reported at the first flush.

        Raises:
            As :meth:`load` for a foreign artifact of ``id`` it refuses, and ``OSError``.

        Never writes; must cost no more than a few ``stat`` calls per place a log of
        ``id`` could be (JSONL: per project directory).
        """
        return None

    @abstractmethod
    async def append(
        self, header: SessionHeader, events: Sequence[SessionEvent], *, materialized: bool
    ) -> None:
        """Durably append a contiguous batch that continues the stored log.

        Args:
            header: The session's header.
            events: The batch, seq-contiguous with what is stored (the service checked).
            materialized: Whether the log exists. When ``False``, the header and this first
                batch appear together, atomically: a crash leaves either no log or both.

        Raises:
            SessionCollisionError: Another writer holds the session, or (first batch) a log
                already exists.
            SessionDurabilityError: The batch could not be written and not rolled back either;
                the storage refuses further appends to that session.
            OSError: Any other I/O failure; nothing of the batch is left in the log.

        When it returns, the batch is on stable storage.
        """

    async def append_batches(
        self, header: SessionHeader, batches: Sequence[Sequence[SessionEvent]]
    ) -> None:
        """Store a new session's whole log, given as the batches it was written in, at once:
        when it returns, every batch is durable; a crash or a failure leaves none of them
        (what a copy needs: never a prefix that lists as a session).

        Raises:
            As :meth:`append` with ``materialized=False``.

        By default one :meth:`append` of every event (atomic as a first append is); a medium
        that keeps how a batch was packed overrides it to keep each batch's packing.
        """
        events = [event for batch in batches for event in batch]
        await self.append(header, events, materialized=False)

    def append_inline(
        self, header: SessionHeader, events: Sequence[SessionEvent], *, sole_writer: bool
    ) -> bool:
        """Optionally append a batch to a materialized log before returning, on the calling
        (event-loop) thread, sparing a checkpoint a task and a thread hop.

        Args:
            header: The session's header.
            events: The batch, contiguous with what is stored.
            sole_writer: ``True`` when this is the only live session of the service, so no
                other session's I/O is waiting behind the event loop.

        Returns:
            ``True`` once the batch is durable; ``False`` to decline at once with nothing
            written (the service then calls :meth:`append`).

        Raises:
            As :meth:`append`, with nothing of the batch kept.
        """
        return False

    def start_append(
        self, header: SessionHeader, events: Sequence[SessionEvent]
    ) -> asyncio.Future[None] | None:
        """Optionally hand the append of a batch to a materialized log to the storage's I/O
        at once, sparing a checkpoint the task and coroutines of :meth:`append` (called on
        the event loop, after :meth:`append_inline` declined).

        Args:
            header: The session's header.
            events: The batch, contiguous with what is stored. The service holds the id
                until the returned future is done.

        Returns:
            A future of the running loop that resolves once the batch is durable, or raises
            as :meth:`append` does with nothing of the batch kept; ``None`` to decline at
            once with nothing written (the service then calls :meth:`append`).

        Raises:
            As :meth:`append`, with nothing of the batch kept, for what it checks before the
            hand-off.
        """
        return None

    @abstractmethod
    async def commit_repair(
        self, header: SessionHeader, cut_at: object | None, closers: Sequence[SessionEvent]
    ) -> None:
        """Make a repair durable: cut the torn tail, then append the closers.

        Args:
            header: The stored header.
            cut_at: The ``cut_at`` of the :meth:`load` the repair was computed from, or
                ``None`` when nothing is to be cut.
            closers: Events that balance the log (may be empty).

        When it returns, the cut and the closers are on stable storage. Only a tail past
        every complete event is ever cut; committed events are never rewritten.
        """

    def as_stored(self, events: Sequence[SessionEvent]) -> Sequence[SessionEvent]:
        """``events`` as a later read of this storage would return them: equal values, in
        the key order the medium keeps (a row-based medium does not keep a written order).
        A load that repairs returns its closers this way, so it returns what every later
        load returns. No I/O."""
        return events

    @abstractmethod
    async def list_snapshots(self) -> list[SessionSnapshot]:
        """The header and revision of every materialized session (never-appended ones are
        absent). Never writes."""

    async def acquire(self, id: str) -> bool:
        """Become the writer of a stored session before adopting, repairing or appending to
        it; a no-op for a medium without writer locks or for a session not stored yet.

        Returns:
            ``True`` when this call made this instance the writer (it was not before): what
            the caller learned of the log earlier may be stale and must be checked again.
            ``False`` when it already was, or when the medium has no writer locks.

        Raises:
            SessionCollisionError: Another writer holds it (naming that writer if known).
        """
        return False

    async def writer_elsewhere(self, id: str) -> bool:
        """Whether another writer (another process, or another instance) holds ``id`` now, as
        far as the medium can tell without taking anything; ``False`` for a medium without
        writer locks. Never writes and never blocks a writer."""
        return False

    async def release(self, id: str) -> None:
        """Give up whatever this instance holds to write ``id`` (its live session left)."""
        return None

    def locate(self, header: SessionHeader) -> str | None:
        """Where the session's log lives (a path for file storage), without any I/O;
        ``None`` for a medium without locations."""
        return None

    async def read_raw(self, id: str) -> RawArtifact | None:
        """The stored bytes of a session verbatim (torn tail included), or ``None`` when it
        does not exist. Never writes. By default, the JSONL a :meth:`load` reads as (for a
        medium that keeps no bytes of its own)."""
        stored = await self.load(id)
        if stored is None:
            return None
        lines = [header_line(stored.header)]
        lines += [
            event.encode() if isinstance(event, SessionEvent) else encode_json(event)
            for event in stored.events
        ]
        return RawArtifact(stored.header, "session.jsonl", b"".join(line + b"\n" for line in lines))

    async def read_tail(self, id: str, count: int) -> StoredTail | None:
        """At least the last ``count`` complete stored events of ``id``'s log (all, when it
        holds fewer), with its header; ``None`` when it is not stored. Never writes.

        A medium that can read a log from its end reads only about that much; by default
        this is :meth:`load`'s read, sliced. Raises as :meth:`load`.
        """
        return tail_of(await self.load(id), count)

    reads_from_last: bool = False
    """Whether :meth:`read_from_last` finds its event without reading the events before it."""

    async def read_from_last(self, id: str, type: str) -> StoredTail | None:
        """The stored events of ``id``'s log from its last event of ``type`` on (that event
        found by a byte search or an index, without parsing the events before it), with
        ``torn`` as :meth:`read_tail` says it; ``None`` when there is no such event, the log
        is not stored, or this log cannot be searched so (a compressed one): the caller then
        reads the whole log. Only asked when :attr:`reads_from_last`; by default there is no
        such read. Never writes."""
        raise NotImplementedError(f"{self.name} cannot read from an event it searched for")

    async def delete(self, id: str) -> bool:
        """Remove the stored log of ``id`` durably: when it returns, a restart finds no trace
        of it; a crash during it leaves either the whole log or none.

        Returns:
            ``False`` when no log of ``id`` is stored.

        Raises:
            SessionCollisionError: Another writer holds the session (nothing is removed).
            NotImplementedError: By default, for a stored session: the medium cannot
                delete (an id not stored is answered ``False``).
        """
        if await self.revision(id) is None:
            return False
        raise NotImplementedError(f"{self.name} cannot delete a stored session")

    @abstractmethod
    async def close(self) -> None:
        """Release every resource (locks, descriptors); called once, last, by the
        service's ``aclose``."""
