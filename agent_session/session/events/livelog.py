"""A live session's log, where streamed deltas cost a list append each.

An agent streams most of its events as ``assistant/chunk`` deltas, and the stored log packs
runs of them into one row each (:mod:`persistence_jsonl.rows`). Building a frozen event per
delta at append time costs several times more than the delta itself; so a live log keeps a
run of deltas as columns (their times and texts) in an :class:`OpenRun`, and builds the
member events only when somebody reads one, exactly as a load's :class:`LazyRun` does. A
writer encodes a run straight from its columns (:class:`DeltaRun`), never building it.

Guarantees: a :class:`LiveLog` reads as the sequence of every event appended, in order,
whether it came as an event or as a delta; a delta's member event equals the event
``Session.append`` would have built for the same chunk at the same time; a member is built
once and every read returns the same object; a :meth:`LiveLog.view` never changes.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Final, overload

from agent_session.session.events.event import SessionEvent, build_plain_events
from agent_session.session.events.eventlog import EventLog, LazyRun, event_part
from agent_session.session.events.types import ASSISTANT_CHUNK
from agent_session.session.json.gcpause import untrack
from agent_session.session.json.lossless import FrozenDict

__all__ = ["DELTA_KEYS", "DELTA_KINDS", "DeltaRun", "LiveLog", "OpenRun", "delta_data"]

DELTA_KINDS: Final = frozenset({"text-delta", "reasoning-delta"})
"""The chunk types a live log keeps as columns: ``{type, index, text}`` deltas."""
DELTA_KEYS: Final = ("type", "index", "text")
"""The keys of such a chunk, in order."""


def delta_data(turn: Any, step: Any, text: Any, index: Any, kind: Any) -> dict[str, Any]:
    """The ``assistant/chunk`` data of a delta, in the key order an append keeps."""
    return {"turn": turn, "step": step, "chunk": {"type": kind, "index": index, "text": text}}


_MEMBERS = threading.Lock()


class OpenRun:
    """Consecutive deltas of one kind, turn, step and index, from seq ``seq0``: their times
    and texts as columns, and the members built so far. Appended to only by its
    :class:`LiveLog`, until it is closed; a closed run never changes."""

    __slots__ = ("_built", "closed", "index", "kind", "seq0", "step", "texts", "times", "turn")

    def __init__(self, kind: str, turn: int, step: int, index: int, seq0: int) -> None:
        self.kind = kind
        self.turn = turn
        self.step = step
        self.index = index
        self.seq0 = seq0
        self.times: list[int] = []
        self.texts: list[str] = []
        self.closed = False
        """Set once the run takes no more deltas (its log moved on, or a writer took it)."""
        self._built: list[SessionEvent] = []
        for value in (self, self.times, self.texts, self._built):
            untrack(value)  # never in a cycle: a long live log adds no tracked object per run

    def seal(self) -> DeltaRun:
        """Close the run (the next delta starts a new one) and return all of it."""
        self.closed = True
        return self.part()

    def part(self, offset: int = 0, count: int | None = None) -> DeltaRun:
        """Members ``offset`` to ``offset + count`` (to the current end without ``count``)."""
        if count is None:
            count = len(self.texts) - offset
        return DeltaRun(self, offset, count)

    def members(self, offset: int, count: int) -> list[SessionEvent]:
        """Members ``offset`` to ``offset + count``, built now if they were not."""
        end = offset + count
        built = self._built
        if len(built) < end:
            with _MEMBERS:  # readers on other threads get the same objects
                start = len(built)
                if start < end:
                    turn, step, kind, index = self.turn, self.step, self.kind, self.index
                    datas = [
                        FrozenDict(
                            turn=turn, step=step, chunk=FrozenDict(type=kind, index=index, text=t)
                        )
                        for t in self.texts[start:end]
                    ]
                    built.extend(
                        build_plain_events(
                            ASSISTANT_CHUNK,
                            self.seq0 + start,
                            self.times[start:end],
                            datas,  # in the key order of an append, as Session.append's
                        )
                    )
        return built[offset:end]


class DeltaRun(LazyRun):
    """A fixed stretch of an :class:`OpenRun`, as a part of an :class:`EventLog`: its members
    are the open run's (built on first read), its columns readable without building them."""

    __slots__ = ("offset", "source")

    def __init__(self, source: OpenRun, offset: int, count: int) -> None:
        super().__init__(ASSISTANT_CHUNK, source.seq0 + offset, count, None, source.times[offset])
        self.source = source
        self.offset = offset

    def _make(self) -> list[SessionEvent]:
        return self.source.members(self.offset, len(self))

    def times(self) -> list[int]:
        """The members' times, in order."""
        return self.source.times[self.offset : self.offset + len(self)]

    def texts(self) -> list[str]:
        """The members' texts, in order."""
        return self.source.texts[self.offset : self.offset + len(self)]

    def cut(self, start: int, stop: int) -> DeltaRun:
        """Members ``start`` to ``stop`` of this stretch, without building them."""
        return DeltaRun(self.source, self.offset + start, stop - start)


_FOLD = 4096
"""Appended events a live log keeps in its mutable tail before closing it into a part (a
view copies the tail and the list of parts)."""


class LiveLog(Sequence[SessionEvent]):
    """A live session's log: closed parts (the seed's, as it came, and what was appended
    since), then either a tail of events or an open run of deltas. Only :meth:`append` and
    :meth:`append_delta` change it; :meth:`view` is an immutable :class:`EventLog` of its
    current state, made in time bounded by the number of parts and :data:`_FOLD`."""

    __slots__ = ("_closed", "_parts", "_starts", "_tail", "run", "size")

    def __init__(self, seed: Sequence[SessionEvent] = ()) -> None:
        log = seed if isinstance(seed, EventLog) else EventLog([seed])
        self._parts: list[Sequence[SessionEvent]] = list(log.parts)
        self._starts = list(itertools.accumulate((len(p) for p in self._parts[:-1]), initial=0))
        del self._starts[len(self._parts) :]  # (none for an empty seed)
        self._closed = len(log)
        """How many events the closed parts hold."""
        self._tail: list[SessionEvent] = []
        self.run: OpenRun | None = None
        """The open run of deltas, or ``None``: appended to by :meth:`append_delta`, closed by
        anything else appended (or sealed by a writer). While it is open and unsealed, a
        delta that continues it may also be added to its columns directly, counted in
        :attr:`size` (``Session.append_delta``'s hot path: no call per delta)."""
        self.size = self._closed
        """How many events the log holds (its length)."""

    def append(self, event: SessionEvent) -> None:
        """Append one event (its seq is the log's length)."""
        if self.run is not None:
            self._close_run()
        tail = self._tail
        tail.append(event)
        self.size += 1
        if len(tail) >= _FOLD:  # a view copies the tail: keep it short
            self._close_tail()

    def append_delta(
        self, kind: str, turn: int, step: int, index: int, time: int, text: str
    ) -> OpenRun | None:
        """Append one delta (values already checked); return the run it starts, or ``None``
        when it continues the open one."""
        run = self.run
        self.size += 1
        if (
            run is not None
            and not run.closed
            and run.index == index
            and run.step == step
            and run.turn == turn
            and run.kind == kind
        ):
            run.times.append(time)
            run.texts.append(text)
            return None
        if run is not None:
            self._close_run()
        elif self._tail:
            self._close_tail()
        run = self.run = OpenRun(kind, turn, step, index, self.size - 1)
        run.times.append(time)
        run.texts.append(text)
        return run

    def _close_tail(self) -> None:
        self._add_part(event_part(self._tail))
        self._tail = []

    def _close_run(self) -> None:
        run = self.run
        assert run is not None
        self._add_part(run.seal())
        self.run = None

    def _add_part(self, part: Sequence[SessionEvent]) -> None:
        self._parts.append(part)
        self._starts.append(self._closed)
        self._closed += len(part)

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, index: int) -> SessionEvent: ...
    @overload
    def __getitem__(self, index: slice) -> EventLog[SessionEvent]: ...
    def __getitem__(self, index: int | slice) -> SessionEvent | EventLog[SessionEvent]:
        if isinstance(index, slice):
            return self.view()[index]
        size = self.size
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("event index out of range")
        closed = self._closed
        if index >= closed:
            at = index - closed
            run = self.run
            return run.members(at, 1)[0] if run is not None else self._tail[at]
        part = bisect.bisect_right(self._starts, index) - 1
        return self._parts[part][index - self._starts[part]]

    def __iter__(self) -> Iterator[SessionEvent]:
        return iter(self.view())

    def view(self) -> EventLog[SessionEvent]:
        """The log as it is now (closed parts shared, unbuilt runs included)."""
        parts: tuple[Sequence[SessionEvent], ...] = tuple(self._parts)
        starts = self._starts
        run = self.run
        if run is not None:
            return EventLog.of_parts((*parts, run.part()), [*starts, self._closed], self.size)
        if self._tail:
            return EventLog.of_parts(
                (*parts, tuple(self._tail)), [*starts, self._closed], self.size
            )
        return EventLog.of_parts(parts, list(starts), self.size)
