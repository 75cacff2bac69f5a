"""``MemoryStorage``: a :class:`session.persistence.storage.Storage` kept in memory, for users'
tests and for ours. Nothing survives the process; use it for debugging and testing only.

Logs live in a :class:`MemoryStore` that can outlive a backend instance, so "restart the
process" is modelled by a new ``MemoryPersistence`` over the same store. Events are kept as
their encoded lines, as a file backend would keep them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent_session.session.errors import SessionCollisionError
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.header import SessionHeader, header_line
from agent_session.session.json.codec import decode_json
from agent_session.session.persistence.api import RawArtifact, SessionSnapshot, StoredLog
from agent_session.session.persistence.ledger import Repair
from agent_session.session.persistence.service import SessionPersistence
from agent_session.session.persistence.storage import Storage
from agent_session.session.persistence.write_behind import Scheduler

__all__ = ["MemoryLog", "MemoryPersistence", "MemoryStorage", "MemoryStore"]

_revisions = itertools.count(1)


@dataclass(slots=True)
class MemoryLog:
    """One stored log: its header and its encoded event lines."""

    header: SessionHeader
    lines: list[bytes] = field(default_factory=list)
    revision: str = ""

    def touch(self) -> None:
        """Give the log a new revision (after any change)."""
        self.revision = f"mem:{next(_revisions)}"


class MemoryStore:
    """Durable-for-the-process storage shared by ``MemoryStorage`` instances."""

    def __init__(self) -> None:
        self.logs: dict[str, MemoryLog] = {}
        """Materialized logs by session id."""
        self.append_calls = 0
        """How many batches were written (materializations and appends), for tests."""


class MemoryStorage(Storage):
    """A :class:`Storage` over a :class:`MemoryStore`: every write is "durable" at once, there
    are no writer locks, and nothing is ever torn."""

    name = "session-persistence-memory"

    def __init__(self, store: MemoryStore | None = None) -> None:
        self.store = store if store is not None else MemoryStore()
        """The logs this storage reads and writes."""

    async def load(self, id: str) -> StoredLog | None:
        log = self.store.logs.get(id)
        if log is None:
            return None
        events = [decode_json(line) for line in log.lines]
        size = sum(len(line) + 1 for line in [_header_line(log), *log.lines])
        return StoredLog(log.header, events, log.revision, None, size)

    def stored_now(self, id: str) -> bool | None:
        return id in self.store.logs

    async def revision(self, id: str) -> str | None:
        log = self.store.logs.get(id)
        return None if log is None else log.revision

    async def append(
        self, header: SessionHeader, events: Sequence[SessionEvent], *, materialized: bool
    ) -> None:
        lines = [event.encode() for event in events]  # encode all first: all or nothing
        self.store.append_calls += 1
        log = self.store.logs.get(header.id)
        if log is None:
            log = self.store.logs[header.id] = MemoryLog(header)
        elif not materialized:
            raise SessionCollisionError(
                f'refusing to materialize "{header.id}": a log already exists'
            )
        log.lines.extend(lines)
        log.touch()

    async def commit_repair(
        self, header: SessionHeader, cut_at: object | None, closers: Sequence[SessionEvent]
    ) -> None:
        log = self.store.logs[header.id]
        log.lines.extend(event.encode() for event in closers)
        log.touch()

    async def list_snapshots(self) -> list[SessionSnapshot]:
        return [SessionSnapshot(log.header, log.revision) for log in self.store.logs.values()]

    async def read_raw(self, id: str) -> RawArtifact | None:
        log = self.store.logs.get(id)
        if log is None:
            return None
        content = b"".join(line + b"\n" for line in [_header_line(log), *log.lines])
        return RawArtifact(log.header, "session.jsonl", content)

    async def delete(self, id: str) -> bool:
        return self.store.logs.pop(id, None) is not None

    async def close(self) -> None:
        return None


def _header_line(log: MemoryLog) -> bytes:
    """The header line of the artifact ``read_raw`` returns, as a JSONL log's first line."""
    return header_line(log.header)


class MemoryPersistence(SessionPersistence):
    """``SessionPersistence`` kept in memory (the service holding a :class:`MemoryStorage`).
    Same contract as every backend; nothing survives the process."""

    def __init__(
        self,
        store: MemoryStore | None = None,
        *,
        repair: Repair,
        write_batch_max_delay_ms: int = 200,
        prepared_session_cache_size: int = 5,
        scheduler: Scheduler | None = None,
    ) -> None:
        storage = MemoryStorage(store)
        super().__init__(
            storage,
            repair=repair,
            write_batch_max_delay_ms=write_batch_max_delay_ms,
            prepared_session_cache_size=prepared_session_cache_size,
            scheduler=scheduler,
        )
        self.memory = storage
        """The memory storage this backend holds."""

    @property
    def store(self) -> MemoryStore:
        """The logs this backend reads and writes."""
        return self.memory.store
