"""Read-only event sequences that build some of their events only when they are read.

A cold load of a long streamed answer is mostly ``assistant/chunk`` events stored as packed
rows (one row per run of deltas). Building a frozen Python object per delta costs far more
than parsing the row, and most readers (recovery, ``inspect``, listings) never look at the
deltas. So a backend may hand over a checked row as a :class:`LazyRun`, and the stored log is
an :class:`EventLog` of parts: plain events and runs. Reading a run's member builds the whole
run once and keeps it, so every read returns the same objects.

Guarantees: an :class:`EventLog` is a ``Sequence[SessionEvent]`` that never changes; it equals
any sequence with equal events in the same order; building a run cannot fail (its backend
checked everything it needs when the run was made).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Self, TypeVar, overload

from typing_extensions import TypeIs

from agent_session.session.events.event import SessionEvent
from agent_session.session.json.gcpause import gc_paused, untrack

__all__ = [
    "EarlierEvents",
    "EventLog",
    "LazyRun",
    "event_part",
    "first_seq",
    "is_log",
    "is_run",
    "iter_parts",
    "last_type",
    "same_events",
    "seq_gap",
    "walk_back",
]

_T = TypeVar("_T")

_BUILDING = threading.RLock()


_RUN_TYPES: set[type] = set()
""":class:`LazyRun` and its subclasses (:func:`is_run`)."""
_LOG_TYPES: set[type] = set()
""":class:`EventLog` and its subclasses (each adds itself), for :func:`is_log`."""


def is_run(item: object) -> TypeIs[LazyRun]:
    """Whether ``item`` is a :class:`LazyRun` (of any subclass): one set lookup, where an
    ``isinstance`` of this ``Sequence`` subclass goes through the ABC machinery (readers ask
    it for every item of a log)."""
    return type(item) in _RUN_TYPES


class _BuiltOnRead(Sequence[SessionEvent]):
    """Events a subclass builds or reads all at once, the first time one is read
    (:meth:`events`), and keeps."""

    __slots__ = ()

    def events(self) -> tuple[SessionEvent, ...]:
        """All of them, built or read now if they were not."""
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> SessionEvent: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[SessionEvent]: ...
    def __getitem__(self, index: int | slice) -> SessionEvent | Sequence[SessionEvent]:
        return self.events()[index]

    def __iter__(self) -> Iterator[SessionEvent]:
        return iter(self.events())


class LazyRun(_BuiltOnRead):
    """``count`` events of one ``type``, with seqs from ``seq0``, none of them on the surface,
    built by ``build`` on first read (all at once; then kept).

    A run is out of the cyclic collector's view, and so is a ``functools.partial`` builder
    with its arguments' lists and tuples: a builder must never refer back to its run."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _RUN_TYPES.add(cls)

    __slots__ = ("_build", "_count", "_events", "_time0", "seq0", "type")

    def __init__(
        self,
        type: str,
        seq0: int,
        count: int,
        build: Callable[[], list[SessionEvent]] | None,
        time0: int | None = None,
    ) -> None:
        self.type = type
        """The type of every member."""
        self.seq0 = seq0
        """The first member's seq; the others follow without gaps."""
        self._time0 = time0
        self._count = count
        self._build: Callable[[], list[SessionEvent]] | None = build
        self._events: tuple[SessionEvent, ...] | None = None
        _untrack_run(self, build)

    @property
    def built(self) -> bool:
        """Whether the members exist as objects yet."""
        return self._events is not None

    @property
    def time0(self) -> int:
        """The first member's time: read without building the run where its maker knew it
        (every store's reader does), else from the built first member."""
        return self._time0 if self._time0 is not None else int(self.events()[0].time)

    def events(self) -> tuple[SessionEvent, ...]:
        """The members (built now if they were not); the same tuple on every call."""
        events = self._events
        if events is None:
            with _BUILDING:  # threads reading one run at once get the same objects
                events = self._events
                if events is None:
                    with gc_paused():  # many new objects, none in a cycle
                        events = tuple(self._make())
                    if len(events) != self._count or (events and events[0].seq != self.seq0):
                        raise AssertionError("a lazy run built other events than it announced")
                    self._events, self._build = events, None
        return events

    def _make(self) -> list[SessionEvent]:
        """Build the members: with ``build`` (a subclass without one builds them itself)."""
        build = self._build
        assert build is not None
        return build()

    def __len__(self) -> int:
        return self._count

    def cut(self, start: int, stop: int) -> Sequence[SessionEvent]:
        """Members ``start`` to ``stop`` as a part of their own (a subclass that can cut
        without building does)."""
        return self.events()[start:stop]

    def __repr__(self) -> str:
        state = "built" if self.built else "not built"
        return f"<LazyRun {self.type} seq {self.seq0}..{self.seq0 + self._count - 1}, {state}>"


_RUN_TYPES.add(LazyRun)


class EarlierEvents(_BuiltOnRead):
    """The first events of a log that a reader started past (a resume from a compaction
    boundary) and has not read: reading any of them reads them all once, through ``read``,
    which blocks the calling thread; until then they cost nothing.

    Guarantees: once read, every read returns the same objects; a ``read`` that returns
    another number of events raises ``RuntimeError`` rather than shift every seq after it.
    """

    __slots__ = ("_events", "_len", "_lock", "_read")

    def __init__(self, length: int, read: Callable[[], Sequence[SessionEvent]]) -> None:
        self._len = length
        self._read = read
        self._events: tuple[SessionEvent, ...] | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the events were read."""
        return self._events is not None

    def events(self) -> tuple[SessionEvent, ...]:
        """All of them, read now if they were not."""
        with self._lock:
            if self._events is None:
                events = tuple(self._read())
                if len(events) != self._len:
                    raise RuntimeError(
                        f"the history before the compaction boundary has {len(events)} "
                        f"events, not the {self._len} the resume counted"
                    )
                self._events = events
            return self._events

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        return f"<EarlierEvents {self._len} {'read' if self.loaded else 'unread'}>"


class EventLog(Sequence[_T]):
    """An immutable concatenation of parts: sequences of items (events; wire dicts in a
    scanner's log) and :class:`LazyRun`. ``EventLog[SessionEvent]`` is a stored log. Its
    parts are :func:`event_part` tuples (an item never refers back to its log)."""

    __slots__ = ("_len", "_parts", "_starts")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _LOG_TYPES.add(cls)

    def __init__(self, parts: Iterable[Sequence[_T]] = ()) -> None:
        kept: list[Sequence[_T]] = []
        for part in parts:
            if isinstance(part, EventLog):
                kept.extend(part.parts)  # none empty
            elif is_run(part):
                if len(part):  # counted without building it
                    kept.append(part)  # type: ignore[arg-type]  # a run is a part of event logs
            elif type(part) is EarlierEvents:
                if len(part):  # (kept unread)
                    kept.append(part)  # type: ignore[arg-type]  # a part of event logs
            elif part:
                kept.append(event_part(part))
        self._parts: tuple[Sequence[_T], ...] = tuple(kept)
        self._starts = list(itertools.accumulate((len(p) for p in self._parts), initial=0))
        self._len = self._starts.pop()

    @property
    def parts(self) -> tuple[Sequence[_T], ...]:
        """The parts, in order (none empty)."""
        return self._parts

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> _T: ...
    @overload
    def __getitem__(self, index: slice) -> EventLog[_T]: ...
    def __getitem__(self, index: int | slice) -> _T | EventLog[_T]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._len)
            if step != 1:
                return EventLog([tuple(self)[index]])
            return self._slice(start, stop)
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("event index out of range")
        at = bisect.bisect_right(self._starts, index) - 1
        return self._parts[at][index - self._starts[at]]

    @classmethod
    def of_parts(cls, parts: tuple[Sequence[_T], ...], starts: list[int], size: int) -> Self:
        """A log of non-empty ``parts`` starting at ``starts``, ``size`` events in all: taken
        as they are (no copy, no checks; the caller counted)."""
        log = cls.__new__(cls)
        log._parts, log._starts, log._len = parts, starts, size
        return log

    def joined(self, tail: Sequence[_T]) -> EventLog[_T]:
        """This log followed by ``tail`` (copied), sharing this log's parts: a copy of two
        arrays, however many parts there are."""
        if not tail:
            return self
        return EventLog.of_parts(
            (*self._parts, tuple(tail)), [*self._starts, self._len], self._len + len(tail)
        )

    def _slice(self, start: int, stop: int) -> EventLog[_T]:
        """Whole parts are shared (a run stays unbuilt); only the two edge parts are cut."""
        if start >= stop:
            return EventLog()
        if start == 0 and stop == self._len:
            return self
        starts = self._starts
        first = bisect.bisect_right(starts, start) - 1
        last = bisect.bisect_right(starts, stop - 1) - 1
        parts = list(self._parts[first : last + 1])
        if stop < starts[last] + len(parts[-1]):  # the end first: the start keeps its offset
            parts[-1] = _cut(parts[-1], 0, stop - starts[last])
        if start > starts[first]:
            parts[0] = _cut(parts[0], start - starts[first], len(parts[0]))
        bounds = [s - start for s in starts[first : last + 1]]
        bounds[0] = 0
        return EventLog.of_parts(tuple(parts), bounds, stop - start)

    def __iter__(self) -> Iterator[_T]:
        for part in self._parts:
            yield from part

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence (tuple, list, log) of equal events in the same order."""
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(other) == self._len and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[_T]) -> EventLog[_T]:
        return EventLog([self, other])

    def __radd__(self, other: Sequence[_T]) -> EventLog[_T]:
        return EventLog([other, self])

    def __repr__(self) -> str:
        return f"<EventLog of {self._len} events in {len(self._parts)} parts>"


_LOG_TYPES.add(EventLog)


def _cut(part: Sequence[_T], start: int, stop: int) -> Sequence[_T]:
    if is_run(part):
        return part.cut(start, stop)  # type: ignore[return-value]  # a run is a part of event logs
    return tuple(part[start:stop])


def is_log(events: object) -> TypeIs[EventLog[Any]]:
    """Whether ``events`` is an :class:`EventLog` (of any subclass): one set lookup, as
    :func:`is_run` (the write path asks it of every batch)."""
    return type(events) in _LOG_TYPES


def first_seq(events: Sequence[Any]) -> int:
    """The seq of the first event of a non-empty ``events``, without building a run."""
    first = events.parts[0] if is_log(events) else events
    return first.seq0 if is_run(first) else int(first[0].seq)


def event_part(items: Iterable[_T]) -> tuple[_T, ...]:
    """``items`` as a part of a log: a tuple out of the cyclic collector's view (it holds no
    cycle, but the collector keeps a tuple of events tracked), so a long log adds no tracked
    object per part."""
    part = tuple(items)
    untrack(part)
    return part


def _untrack_run(run: LazyRun, build: object) -> None:
    """Untrack a run and its partial builder's containers (they hold JSON values and
    columns, never a cycle): a long log adds no tracked object per run."""
    untrack(run)
    if type(build) is functools.partial:
        untrack(build)
        untrack(build.args)
        for value in build.args:
            if type(value) is list or type(value) is tuple:
                untrack(value)


def last_type(events: Sequence[SessionEvent]) -> str | None:
    """The type of the last event, without building a run that ends the log."""
    parts = events.parts if is_log(events) else (events,)
    last = parts[-1] if parts else ()
    if is_run(last):
        return last.type
    return last[-1].type if last else None


def seq_gap(events: Sequence[Any], seq: int) -> tuple[int, int] | None:
    """Where ``events`` stops counting up from ``seq`` by one: the index and the seq found
    there; ``None`` when every event follows. Runs are read by their bounds, never built."""
    index = 0
    for item in iter_parts(events):
        if is_run(item):
            if item.seq0 != seq + index:
                return index, item.seq0
            index += len(item)
            continue
        if item.seq != seq + index:
            return index, int(item.seq)
        index += 1
    return None


def walk_back(events: Sequence[Any]) -> Iterator[tuple[int, Any]]:
    """``(index, event)`` of ``events`` from its end back, skipping packed runs (a built
    run's part too: streamed deltas, which readers going back for other types skip), so a
    reader that stops early reads only what it passed."""
    end = len(events)
    for part in reversed(events.parts if is_log(events) else (events,)):
        end -= len(part)
        if is_run(part):
            continue
        for offset in range(len(part) - 1, -1, -1):
            entry = part[offset]
            if not is_run(entry):
                yield end + offset, entry


def iter_parts(events: Iterable[Any]) -> Iterator[Any]:
    """The items of ``events``, except that an unbuilt :class:`LazyRun` part of an
    :class:`EventLog` comes as one item: readers that need only some event types skip it
    whole (check :func:`is_run`)."""
    if not is_log(events):
        yield from events
        return
    for part in events.parts:
        if is_run(part) and not part.built:
            yield part
        else:
            yield from part


def same_events(
    a: Sequence[SessionEvent], b: Sequence[SessionEvent], same: Callable[[Any, Any], bool]
) -> bool:
    """Whether ``a`` and ``b`` hold equal events in the same order, by ``same`` on each pair,
    without building a run both share (the same :class:`LazyRun` object is equal to
    itself)."""
    if len(a) != len(b):
        return False
    parts_a = a.parts if isinstance(a, EventLog) else (a,)
    parts_b = b.parts if isinstance(b, EventLog) else (b,)
    if len(parts_a) == len(parts_b) and all(x is y for x, y in zip(parts_a, parts_b, strict=True)):
        return True  # the same parts: a live log seeded with this stored log, unchanged
    shared = 0  # leading parts both hold (a seed's, unread history among them): equal
    for part_a, part_b in zip(parts_a, parts_b, strict=False):
        if part_a is not part_b:
            break
        shared += len(part_a)
    left: Iterator[Any] = iter_parts(a[shared:] if shared else a)
    right: Iterator[Any] = iter_parts(b[shared:] if shared else b)
    held: list[Any] = []  # members of a run only one side has, still to compare
    held_right: list[Any] = []
    while True:
        x = held.pop() if held else next(left, None)
        y = held_right.pop() if held_right else next(right, None)
        if x is None or y is None:
            return x is None and y is None
        if x is y:
            continue
        if is_run(x) or is_run(y):
            if is_run(x):
                held.extend(reversed(x.events()))
            else:
                held.append(x)
            if is_run(y):
                held_right.extend(reversed(y.events()))
            else:
                held_right.append(y)
            continue
        if not same(x, y):
            return False
