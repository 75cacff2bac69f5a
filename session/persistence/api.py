"""The persistence service every backend provides (``SessionPersistence``) and the values it
returns. The shared implementation is ``session.persistence.coordinator.PersistenceCoordinator``,
which holds a backend's ``Storage``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from session.events.event import SessionEvent
from session.events.header import SessionHeader

__all__ = [
    "ListedSession",
    "RawArtifact",
    "SessionPersistence",
    "SessionSnapshot",
    "StoredLog",
    "StoredSession",
]


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A session as storage holds it: its header and its events (immutable)."""

    header: SessionHeader
    """The durable header."""
    events: Sequence[SessionEvent]
    """The events, seq 0 first. From ``load`` and ``inspect`` of a cold session: balanced.
    A tuple, or an :class:`session.events.eventlog.EventLog` whose packed streaming deltas are built
    on first read; either way immutable, and equal to any sequence of equal events."""


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """A stored session's header with the revision of its log."""

    header: SessionHeader
    """The durable header."""
    revision: str
    """Opaque; equal for an unchanged log, different after any append or repair."""


@dataclass(frozen=True, slots=True)
class ListedSession:
    """One stored session as a database backend lists it for operator tools, from index
    queries (no event read or parsed)."""

    id: str
    header: SessionHeader | None
    """``None`` when the stored header breaks a rule (``error`` says which)."""
    error: Exception | None
    events: int
    """Its last seq + 1: how many events it holds unless rows are missing (a damaged log,
    which a full read reports)."""
    last_bracket: Literal["start", "end"] | None
    """Whether its last ``turn/start`` or ``turn/end`` is a start or an end (``None``:
    neither)."""
    writer_active: bool = False
    """Whether a live writer holds the session now (where the store can tell)."""


@dataclass(frozen=True, slots=True)
class RawArtifact:
    """A session's stored bytes, verbatim (torn tail included)."""

    header: SessionHeader
    """The header parsed from the artifact."""
    filename: str
    """The artifact's file name, e.g. ``session.jsonl``."""
    content: bytes
    """The stored bytes."""


@dataclass(frozen=True, slots=True)
class StoredLog:
    """What a storage's ``load`` returns: the valid stored prefix of one log."""

    header: SessionHeader
    """The header as stored (any version; the coordinator checks it)."""
    events: Sequence[SessionEvent | Mapping[str, Any]]
    """The valid, contiguous stored events, seq 0 first: wire dicts, or events the backend
    built itself from a shape it checked, possibly as an :class:`session.events.eventlog.EventLog`
    with unbuilt :class:`session.events.eventlog.LazyRun` parts (the coordinator validates all)."""
    revision: str
    """Revision of exactly the bytes these events were read from."""
    cut_at: object | None = None
    """Where a torn tail past these events starts, as the storage's own token (a byte offset
    for files), to hand back to ``commit_repair``; ``None`` when there is none."""
    size: int | None = None
    """How many bytes the stored artifact has, where the storage can say."""


class SessionPersistence(ABC):
    """The durable store of sessions, installed into a runtime with ``runtime.install(backend)``.

    Guarantees every implementation keeps: ``append`` returns only after the batch is durable
    and contiguous; nothing acknowledged is lost or rewritten; ``load`` of a cold session returns
    a balanced log and makes its repair durable; ``inspect`` never writes; a session created but
    never appended leaves no trace in storage.
    """

    @abstractmethod
    async def create(self, header: SessionHeader | Mapping[str, Any]) -> None:
        """Register a new session lazily: nothing is written until its first append."""

    @abstractmethod
    def append(
        self, id: str, events: Sequence[SessionEvent | Mapping[str, Any]]
    ) -> Awaitable[None]:
        """Durably append a contiguous batch that continues the stored log. The batch is
        snapshotted when called; the awaitable resolves once it is durable."""

    @abstractmethod
    async def load(self, id: str) -> StoredSession:
        """The balanced stored log; a cold interrupted log is repaired durably first."""

    @abstractmethod
    async def inspect(self, id: str) -> StoredSession:
        """The stored log with any closers added in memory only; storage is untouched."""

    @abstractmethod
    async def read_from(self, id: str, from_seq: int) -> Sequence[SessionEvent]:
        """The stored events with ``seq >= from_seq``, exactly as stored (no closers); an
        immutable sequence, as :attr:`StoredSession.events`."""

    @abstractmethod
    async def list_headers(self) -> list[SessionHeader]:
        """Headers of every materialized stored session."""

    @abstractmethod
    async def list_snapshots(self) -> list[SessionSnapshot]:
        """Headers and revisions of every materialized stored session."""

    @abstractmethod
    def locate(self, header: SessionHeader) -> str | None:
        """Where the session's log lives (a path for file backends), without any I/O."""

    @abstractmethod
    async def read_raw(self, id: str) -> RawArtifact | None:
        """The stored bytes of a session, or ``None`` when it does not exist."""

    @abstractmethod
    async def delete(self, id: str) -> None:
        """Remove a stored session durably (the reference has no delete). Refused while a
        writer holds it: a live session of this backend, or another process's writer."""

    @abstractmethod
    async def aclose(self) -> None:
        """Quiescent teardown: flush every live session, wait for all work, release storage."""
