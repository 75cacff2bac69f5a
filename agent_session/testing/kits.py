"""The kit a backend gives the contract suite (:class:`Kit`), and the in-memory backend's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from agent_session.recovery import closers
from agent_session.session import SessionHeader, encode_json
from agent_session.session.json.lossless import snapshot
from agent_session.session.persistence.kit import Scheduler, SessionPersistence
from agent_session.session.persistence.memory import MemoryLog, MemoryPersistence, MemoryStore

__all__ = ["Kit", "MemoryKit"]


class Kit(Protocol):
    """What the contract suite needs of a backend: fresh instances over one shared storage
    (a new instance models a process restart) and a way to plant stored logs as an earlier
    process would have written them, for the read-side cases. Give the suite yours with a
    ``kit`` fixture."""

    name: str
    """The backend's name in test ids."""
    keeps_ignorable: bool
    """Whether the medium stores an event's ``ignorable`` flag (SQLite rows cannot)."""
    header_names_id: bool
    """Whether a stored header carries an id that can disagree with where it is stored."""
    answers_at_once: bool
    """Whether ``stored_now`` knows about logs other instances wrote (SQLite only knows its
    own: asking the database would block the event loop; a storage without ``stored_now``
    knows none)."""
    deletes: bool
    """Whether the storage implements ``delete`` (without it, a delete raises
    ``NotImplementedError`` and removes nothing)."""

    def make(
        self, *, scheduler: Scheduler | None = None, write_batch_max_delay_ms: int = 200
    ) -> SessionPersistence: ...

    def plant(
        self,
        header: Mapping[str, Any],
        events: Sequence[Mapping[str, Any]],
        *,
        under: str | None = None,
    ) -> None:
        """Store a log as if an earlier process had written it (no validation), at the place
        of session ``under`` (default: the header's own id)."""

    def append_calls(self) -> int:
        """How many batches storage received so far."""


class MemoryKit:
    """The kit of :class:`session.persistence.memory.MemoryPersistence`: a worked example."""

    name = "memory"
    keeps_ignorable = header_names_id = answers_at_once = deletes = True

    def __init__(self) -> None:
        self.store = MemoryStore()

    def make(
        self, *, scheduler: Scheduler | None = None, write_batch_max_delay_ms: int = 200
    ) -> SessionPersistence:
        return MemoryPersistence(
            self.store,
            repair=closers,
            scheduler=scheduler,
            write_batch_max_delay_ms=write_batch_max_delay_ms,
        )

    def plant(
        self,
        header: Mapping[str, Any],
        events: Sequence[Mapping[str, Any]],
        *,
        under: str | None = None,
    ) -> None:
        log = MemoryLog(SessionHeader.model_validate(header))
        log.lines = [encode_json(snapshot(e)) for e in events]
        log.touch()
        self.store.logs[under if under is not None else str(header["id"])] = log

    def append_calls(self) -> int:
        return self.store.append_calls
