"""The values the persistence service (:class:`session.persistence.service.SessionPersistence`)
and a backend's ``Storage`` hand each other and their callers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent_session.session.events.event import SessionEvent
from agent_session.session.events.header import SessionHeader

__all__ = [
    "Diagnosis",
    "ListedSession",
    "RawArtifact",
    "SessionSnapshot",
    "SessionTail",
    "StoredLog",
    "StoredSession",
    "StoredTail",
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
    updated: int | None = None
    """When it was last written (ms since the epoch), where the store can tell at once."""
    turns: int | None = None
    """How many turns it holds (the number its last ``turn/start`` names), where the store
    can tell at once."""


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
    """The header as stored (any version; the service checks it)."""
    events: Sequence[SessionEvent | Mapping[str, Any]]
    """The valid, contiguous stored events, seq 0 first: wire dicts, or events the backend
    built itself from a shape it checked, possibly as an :class:`session.events.eventlog.EventLog`
    with unbuilt :class:`session.events.eventlog.LazyRun` parts (the service validates all)."""
    revision: str
    """Revision of exactly the bytes these events were read from."""
    cut_at: object | None = None
    """Where a torn tail past these events starts, as the storage's own token (a byte offset
    for files), to hand back to ``commit_repair``; ``None`` when there is none."""
    size: int | None = None
    """How many bytes the stored artifact has, where the storage can say."""


@dataclass(frozen=True, slots=True)
class StoredTail:
    """What a storage's ``read_tail`` returns: the last stored events of one log."""

    header: SessionHeader
    """The header as stored (any version; the service checks it)."""
    start: int
    """The seq of ``events[0]`` (how many stored events come before them)."""
    events: Sequence[SessionEvent | Mapping[str, Any]]
    """The last complete, contiguous stored events, seq ``start`` first: wire dicts or
    events the backend built from a shape it checked (the service checks each)."""
    torn: bool
    """Whether a torn tail past them exists (a load would cut it)."""

    def last(self, count: int) -> StoredTail:
        """Only the last ``count`` of these events."""
        drop = max(0, len(self.events) - count)
        return StoredTail(self.header, self.start + drop, self.events[drop:], self.torn)


@dataclass(frozen=True, slots=True)
class SessionTail:
    """The last events of a session, as the persistence service reads them from its log's
    end (``SessionPersistence.read_tail``)."""

    header: SessionHeader
    """The durable header."""
    start: int
    """The seq of ``events[0]``."""
    events: Sequence[SessionEvent]
    """The last stored events, each checked on its own (no closers added)."""
    torn: bool
    """Whether a load would cut a torn tail past them (and so repair the log)."""


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """An operator's read-only view of one stored session (what
    :meth:`session.persistence.service.SessionPersistence.diagnose` returns)."""

    session: StoredSession
    """The log as ``inspect`` returns it (closers added in memory)."""
    stored_events: int
    """How many events are stored (the closers excluded)."""
    closers: int
    """How many closers a load would append (the last turn is open when > 0)."""
    torn_tail: bool
    """Whether the stored artifact ends in a torn fragment a load would cut."""
    size: int | None
    """How many bytes the stored artifact has, where the storage says."""
    location: str | None
    """Where it lives (a path for file storage)."""
    writer_elsewhere: bool = False
    """Whether another writer holds the session now: an open last turn is then still
    running, not interrupted."""
