"""An in-memory backend implementing the storage hooks: for users' tests and for ours.

Storage lives in a :class:`MemoryStore` that can outlive a backend instance, so "restart the
process" is modelled by a new ``MemoryPersistence`` over the same store. Events are kept as
their encoded lines, as a file backend would keep them.
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from session.events.event import SessionEvent
from session.events.header import SessionHeader
from session.json.codec import decode_json, encode_json
from session.persistence.api import RawArtifact, SessionSnapshot, StoredLog
from session.persistence.coordinator import PersistenceCoordinator, Repair
from session.persistence.write_behind import Scheduler

__all__ = ["MemoryPersistence", "MemoryStore"]

_revisions = itertools.count(1)


@dataclass(slots=True)
class _Log:
    header: SessionHeader
    lines: builtins.list[bytes] = field(default_factory=builtins.list)
    revision: str = ""

    def touch(self) -> None:
        self.revision = f"mem:{next(_revisions)}"


class MemoryStore:
    """Durable-for-the-process storage shared by ``MemoryPersistence`` instances."""

    def __init__(self) -> None:
        self.logs: dict[str, _Log] = {}
        """Materialized logs by session id."""
        self.append_calls = 0
        """How many batches were written (materializations and appends), for tests."""


class MemoryPersistence(PersistenceCoordinator):
    """``SessionPersistence`` kept in memory. Same contract as every backend; nothing
    survives the process."""

    name = "session-persistence-memory"

    def __init__(
        self,
        store: MemoryStore | None = None,
        *,
        repair: Repair,
        write_batch_max_delay_ms: int = 200,
        prepared_session_cache_size: int = 5,
        scheduler: Scheduler | None = None,
    ) -> None:
        super().__init__(
            repair=repair,
            write_batch_max_delay_ms=write_batch_max_delay_ms,
            prepared_session_cache_size=prepared_session_cache_size,
            scheduler=scheduler,
        )
        self.store = store if store is not None else MemoryStore()
        """The storage this backend reads and writes."""

    async def load_stored(self, id: str) -> StoredLog | None:
        log = self.store.logs.get(id)
        if log is None:
            return None
        return StoredLog(log.header, [decode_json(line) for line in log.lines], log.revision)

    async def read_stored_revision(self, id: str) -> str | None:
        log = self.store.logs.get(id)
        return None if log is None else log.revision

    async def append_batch(
        self, header: SessionHeader, events: Sequence[SessionEvent], materialized: bool
    ) -> None:
        lines = [event.encode() for event in events]  # encode all first: all or nothing
        self.store.append_calls += 1
        log = self.store.logs.get(header.id)
        if log is None:
            log = self.store.logs[header.id] = _Log(header)
        log.lines.extend(lines)
        log.touch()

    async def commit_repair(
        self, header: SessionHeader, torn_marker: object | None, closers: Sequence[SessionEvent]
    ) -> None:
        log = self.store.logs[header.id]
        log.lines.extend(event.encode() for event in closers)
        log.touch()

    async def list_stored(self) -> builtins.list[SessionSnapshot]:
        return [SessionSnapshot(log.header, log.revision) for log in self.store.logs.values()]

    async def read_raw(self, id: str) -> RawArtifact | None:
        log = self.store.logs.get(id)
        if log is None:
            return None
        header = encode_json({"type": "session", **log.header.to_json()})
        content = b"".join(line + b"\n" for line in [header, *log.lines])
        return RawArtifact(log.header, "session.jsonl", content)

    async def close(self) -> None:
        return None
