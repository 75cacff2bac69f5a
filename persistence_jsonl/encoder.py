"""The encoder of a live session's batches: events are encoded as they are committed, runs
of streamed deltas packed into rows (:mod:`persistence_jsonl.rows`) as they grow, so that a
checkpoint only joins lines it already has.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from persistence_jsonl.rows import MIN_RUN, packed_row, run_key
from session.events.event import SessionEvent
from session.json.codec import encode_json
from session.json.lossless import MAX_SAFE_INTEGER

__all__ = ["BatchEncoder", "LiveEncoders", "encode_batch", "encode_lines"]


def encode_batch(events: Sequence[SessionEvent], pack: bool) -> bytes:
    """The bytes appended for one batch: one line per event or packed row, each ending in
    ``\\n``. With ``pack``, every maximal run of three or more deltas that share a run key, with
    consecutive seqs and time steps a row can store, becomes one row."""
    return _joined(_fresh(events, pack)[0])


def encode_lines(events: Sequence[SessionEvent], pack: bool) -> list[tuple[bytes, int]]:
    """The lines of :func:`encode_batch` (without newlines), each with how many events it
    holds (more than one for a packed row)."""
    return _counted(*_fresh(events, pack))


def _fresh(events: Sequence[SessionEvent], pack: bool) -> tuple[list[bytes], list[int]]:
    encoder = BatchEncoder(pack, restart_on_gap=False)
    for event in events:
        encoder.prepare(event)
    return encoder._take_all()


def _joined(lines: list[bytes]) -> bytes:
    lines.append(b"")
    return b"\n".join(lines)


def _counted(lines: list[bytes], bounds: list[int]) -> list[tuple[bytes, int]]:
    """Lines with how many events each holds, from ``bounds`` (events up to each line)."""
    starts = [0, *bounds[:-1]]
    return [(line, end - start) for line, end, start in zip(lines, bounds, starts, strict=True)]


class BatchEncoder:
    """Encodes a session's events as they are committed, so that writing a batch later only
    joins lines. :meth:`encode` returns exactly ``encode_batch(events, pack)`` for any batch,
    prepared or not, in any split.

    Runs are found as events arrive: a delta that continues the open run adds its payload and
    time step to it; any other event closes the run (encoding it as one row, or line by line
    when shorter than three) and is encoded itself. So a checkpoint of what was prepared
    encodes at most its last, still open run.
    """

    __slots__ = (
        "_bounds",
        "_dts",
        "_events",
        "_key",
        "_last_time",
        "_lines",
        "_payloads",
        "_start",
        "pack",
        "restart_on_gap",
    )

    def __init__(self, pack: bool, *, restart_on_gap: bool = True) -> None:
        self.pack = pack
        self.restart_on_gap = restart_on_gap
        self._events: list[SessionEvent] = []  # prepared, consecutive seqs
        self._lines: list[bytes] = []  # the lines of _events[:_start]
        self._bounds: list[int] = []  # _bounds[i]: how many events lines[: i + 1] hold
        self._key: Any = None  # the open run's key; None: no open run
        self._start = 0  # index in _events of the open run's first event
        self._payloads: list[str] = []
        self._dts: list[int] = []
        self._last_time = 0

    def prepare(self, event: SessionEvent) -> None:
        """Do the per-event encoding work for ``event`` now. Events come in seq order; with
        ``restart_on_gap`` (a live session's encoder), one that does not follow the last
        drops everything prepared and starts over."""
        events = self._events
        if self.restart_on_gap and events and event.seq != events[-1].seq + 1:
            self.clear()
            events = self._events
        key = run_key(event) if self.pack else None
        if key is not None:
            fields = event.__dict__
            chunk = fields["data"]["chunk"]
            payload = chunk["argumentsDelta" if key[0] == "tool-call-delta" else "text"]
            time = fields["time"]
            if key == self._key and fields["seq"] == events[-1].seq + 1:
                step = time - self._last_time
                if -MAX_SAFE_INTEGER <= step <= MAX_SAFE_INTEGER:
                    events.append(event)
                    self._payloads.append(payload)
                    self._dts.append(step)
                    self._last_time = time
                    return
            if self._key is not None:
                self._close()
            events.append(event)
            self._key, self._start, self._last_time = key, len(events) - 1, time
            self._payloads, self._dts = [payload], []
            return
        if self._key is not None:
            self._close()
        events.append(event)
        self._lines.append(event.encode())
        self._bounds.append(len(events))
        self._start = len(events)

    def _close(self) -> None:
        """Encode the open run (it holds every event from ``_start`` on)."""
        start, end = self._start, len(self._events)
        run = self._events[start:]
        if len(run) >= MIN_RUN:
            self._lines.append(encode_json(packed_row(run[0], self._dts, self._payloads)))
            self._bounds.append(end)
        else:
            self._lines.extend(e.encode() for e in run)
            self._bounds.extend(range(start + 1, end + 1))
        self._start = end
        self._key = None

    def encode(self, events: Sequence[SessionEvent]) -> bytes:
        """The batch's bytes; prepared work up to its last event is used and released."""
        return _joined(self._take(events)[0]) if events else b""

    def lines(self, events: Sequence[SessionEvent]) -> list[tuple[bytes, int]]:
        """:func:`encode_lines` of the batch, as :meth:`encode` takes it."""
        return _counted(*self._take(events)) if events else []

    def _take(self, events: Sequence[SessionEvent]) -> tuple[list[bytes], list[int]]:
        """The lines of a non-empty batch and how many of its events lie up to each."""
        prepared = self._events
        count = len(events)
        if (
            count <= len(prepared)
            and events[0] is prepared[0]
            and events[-1] is prepared[count - 1]  # so a prefix: prepared seqs follow on
        ):
            if count == len(prepared):
                return self._take_all()
            cut = bisect.bisect_left(self._bounds, count)
            if cut < len(self._bounds) and self._bounds[cut] == count:
                taken = self._lines[: cut + 1], self._bounds[: cut + 1]
                self._drop(cut + 1, count)
                return taken
        # Not a prefix of what was prepared, or cut inside a run: encode it afresh, then
        # prepare again what follows it.
        last = events[-1].seq
        rest = [e for e in prepared if e.seq > last]
        self.clear()
        taken = _fresh(events, self.pack)
        for event in rest:
            self.prepare(event)
        return taken

    def _take_all(self) -> tuple[list[bytes], list[int]]:
        """The lines of everything prepared, with their bounds; forget it."""
        if self._key is not None:
            self._close()
        taken = self._lines, self._bounds
        self.clear()
        return taken

    def _drop(self, lines: int, events: int) -> None:
        """Forget the first ``lines`` lines, which hold the first ``events`` events."""
        if events == len(self._events):
            self.clear()
            return
        del self._lines[:lines], self._bounds[:lines], self._events[:events]
        self._bounds = [bound - events for bound in self._bounds]
        self._start -= events

    def clear(self) -> None:
        """Drop everything prepared."""
        self._events = []
        self._lines = []
        self._bounds = []
        self._key = None
        self._start = 0
        self._payloads = []
        self._dts = []

    def __len__(self) -> int:
        return len(self._events)


class LiveEncoders:
    """One :class:`BatchEncoder` per live session of a storage, keyed by id: what a storage's
    ``prepare`` feeds and its appends take from. A batch of an id never prepared is encoded
    afresh, with the same result."""

    __slots__ = ("_by_id", "pack")

    def __init__(self, pack: bool) -> None:
        self.pack = pack
        self._by_id: dict[str, BatchEncoder] = {}

    def prepare(self, id: str, event: SessionEvent) -> None:
        """Encode a live session's event as it is committed."""
        encoder = self._by_id.get(id)
        if encoder is None:
            encoder = self._by_id[id] = BatchEncoder(self.pack)
        encoder.prepare(event)

    def encode(self, id: str, events: Sequence[SessionEvent]) -> bytes:
        """:func:`encode_batch` of a batch of ``id``."""
        encoder = self._by_id.get(id)
        return encode_batch(events, self.pack) if encoder is None else encoder.encode(events)

    def lines(self, id: str, events: Sequence[SessionEvent]) -> list[tuple[bytes, int]]:
        """:func:`encode_lines` of a batch of ``id``."""
        encoder = self._by_id.get(id)
        return encode_lines(events, self.pack) if encoder is None else encoder.lines(events)

    def forget(self, id: str) -> None:
        """Drop what was prepared for ``id`` (its writer let it go)."""
        self._by_id.pop(id, None)

    def clear(self) -> None:
        self._by_id.clear()
