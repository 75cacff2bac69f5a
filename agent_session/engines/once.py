"""The seam between the log and a durable-execution engine (DBOS, Temporal, Restate ...):
a step's appends keyed by the step's identity, so an engine that runs a step again after a
crash gets back what the first run stored instead of a second copy, and a step that reads
the conversation by reference (a session id and a seq) instead of carrying it in the
engine's own history.

- :meth:`EngineSteps.append_once` appends a step's events followed by one ``engine/step`` event
  ``{key, seqs}`` (marked ``ignorable``: the reference skips it), in one flush, and returns
  their seqs; for a key the log already holds it appends nothing and returns the seqs
  stored then. The key is the engine's step identity as a list of strings and integers:
  DBOS ``[workflow_id, function_id]``, Temporal ``[workflow_id, run_id, activity_id]``,
  Restate ``[invocation_id, journal_index]``.
- :meth:`EngineSteps.of` is the index of a log's keys.
- :func:`read_after` is the part of a stored log after a seq.

Guarantees: on SQLite and PostgreSQL a flush is one transaction, so a step's events and its
marker are stored together or not at all. On JSONL a flush is one append of its lines;
a kill during the write of a batch larger than a page, or a power loss, can keep some of its
lines without the marker (a line cut in two is dropped on load), and the step's second run
then appends its events again: the log keeps both, nothing is lost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agent_session.session.errors import SessionEventError
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.types import ENGINE_STEP
from agent_session.session.live.runtime import Runtime
from agent_session.session.live.session import Session
from agent_session.session.persistence.service import SessionPersistence

__all__ = ["EngineSteps", "read_after"]

Key = tuple[str | int, ...]
_KEPT = 256
"""How many sessions' indexes are kept before those no longer live are forgotten."""


def _key(key: Sequence[Any]) -> Key:
    if not key or not all(type(part) in (str, int) for part in key):
        raise SessionEventError(
            f"an engine step's key is a non-empty list of strings and integers, got {key!r}"
        )
    return tuple(key)


class EngineSteps:
    """The engine steps of the live sessions of ``runtime``: :meth:`append_once` and the
    index of each log's keys (built once per live session, and kept as its log grows)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._indexes: dict[str, tuple[Session, dict[Key, tuple[int, ...]], int]] = {}

    def of(self, session: Session) -> dict[Key, tuple[int, ...]]:
        """The steps the log of ``session`` records: key -> the seqs of its events."""
        kept = self._indexes.get(session.id)
        index, folded = (kept[1], kept[2]) if kept is not None and kept[0] is session else ({}, 0)
        events = session.events
        for event in events[folded:]:
            if event.type == ENGINE_STEP:
                index[tuple(event.data["key"])] = tuple(event.data["seqs"])
        self._indexes[session.id] = (session, index, len(events))
        if len(self._indexes) > _KEPT:  # (forget the sessions no longer live)
            for gone in [
                i for i, k in self._indexes.items() if self.runtime.sessions.get(i) is not k[0]
            ]:
                del self._indexes[gone]
        return index

    async def append_once(
        self, session: Session, key: Sequence[Any], write: Callable[[Session], object]
    ) -> list[int]:
        """Run ``write(session)``, which appends the step ``key``'s events to the live
        ``session``, and return their seqs once they are durable; for a key the log holds,
        the seqs it stored, and ``write`` is not called (see the module docstring).

        Raises:
            SessionEventError: A key that is not a list of strings and integers, or a
                ``write`` that appended nothing (nothing is recorded for the key).
        """
        step = _key(key)
        done = self.of(session).get(step)
        if done is not None:
            await self.runtime.sessions.flush(session)  # (durable, if a flush had failed)
            return list(done)
        first = session.seq
        write(session)
        seqs = list(range(first, session.seq))
        if not seqs:
            raise SessionEventError(f"engine step {list(step)!r} appended no events")
        session.append(ENGINE_STEP, {"key": list(step), "seqs": seqs})
        await self.runtime.sessions.flush(session)
        return seqs


async def read_after(store: SessionPersistence, id: str, seq: int) -> Sequence[SessionEvent]:
    """The events of the stored session ``id`` after ``seq`` (``-1``: all), exactly as
    stored: what a step needs of a conversation it holds a ``(id, seq)`` reference to."""
    return await store.read_from(id, seq + 1)
