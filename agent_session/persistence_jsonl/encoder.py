"""The encoder of a batch: one line per event, runs of streamed deltas packed into rows
(:mod:`persistence_jsonl.rows`), at the checkpoint that writes them.

A live session's deltas arrive as :class:`~session.events.livelog.DeltaRun` parts of the
batch: their rows are made from the run's columns, without building its events.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any

from agent_session.persistence_jsonl.rows import MIN_RUN, delta_head, packed_row, run_head, run_key
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.eventlog import EventLog
from agent_session.session.events.livelog import DeltaRun
from agent_session.session.json.codec import encode_json
from agent_session.session.json.lossless import MAX_SAFE_INTEGER

__all__ = ["BatchEncoder", "encode_batch", "encode_lines"]


def encode_batch(events: Sequence[SessionEvent], pack: bool) -> bytes:
    """The bytes appended for one batch: one line per event or packed row, each ending in
    ``\\n``. With ``pack``, every maximal run of three or more deltas that share a run key, with
    consecutive seqs and time steps a row can store, becomes one row."""
    lines = _encoded(events, pack)[0]
    lines.append(b"")
    return b"\n".join(lines)


def encode_lines(events: Sequence[SessionEvent], pack: bool) -> list[tuple[bytes, int]]:
    """The lines of :func:`encode_batch` (without newlines), each with how many events it
    holds (more than one for a packed row)."""
    lines, bounds = _encoded(events, pack)
    starts = [0, *bounds[:-1]] if bounds else []
    return [(line, end - start) for line, end, start in zip(lines, bounds, starts, strict=True)]


def _encoded(events: Sequence[SessionEvent], pack: bool) -> tuple[list[bytes], list[int]]:
    encoder = BatchEncoder(pack)
    encoder.known = getattr(events, "lines", None) or {}  # a live writer's batch has some
    parts = events.parts if isinstance(events, EventLog) else (events,)
    for part in parts:
        if pack and type(part) is DeltaRun:
            encoder.add_run(part)  # from its columns
        else:
            for event in part:
                encoder.add(event)
    return encoder.finish()


class BatchEncoder:
    """Encodes one batch's events in order (:meth:`add`, :meth:`add_run`), then returns its
    lines (:meth:`finish`).

    Runs are found as events arrive: a delta that continues the open run adds its payload and
    time step to it; any other event closes the run (encoding it as one row, or line by line
    when shorter than three) and is encoded itself.
    """

    __slots__ = (
        "_bounds",
        "_count",
        "_dts",
        "_head",
        "_key",
        "_last_seq",
        "_last_time",
        "_lines",
        "_members",
        "_payloads",
        "known",
        "pack",
    )

    def __init__(self, pack: bool) -> None:
        self.pack = pack
        self._lines: list[bytes] = []
        self._bounds: list[int] = []  # _bounds[i]: how many events lines[: i + 1] hold
        self._count = 0  # events added
        self._key: Any = None  # the open run's key; None: no open run
        self._head: dict[str, Any] = {}  # the open run's first member, as a row needs it
        self._members: list[SessionEvent | tuple[DeltaRun, int, int]] = []
        """The open run's members, as added: events, and stretches of live runs."""
        self._payloads: list[str] = []
        self._dts: list[int] = []
        self._last_seq = -1
        self._last_time = 0
        self.known: dict[int, bytes] = {}
        """Lines already encoded, by seq (used instead of encoding those events again);
        never an ``assistant/chunk``'s, which a row may pack."""

    def add(self, event: SessionEvent) -> None:
        """Encode ``event`` next."""
        line = self.known.get(event.seq) if self.known else None
        if line is not None:  # (a known line is never a chunk's: see Batch.lines)
            if self._key is not None:
                self._close()
            self._lines.append(line)
            self._count += 1
            self._bounds.append(self._count)
            return
        key = run_key(event) if self.pack else None
        if key is not None:
            fields = event.__dict__
            chunk = fields["data"]["chunk"]
            payload = chunk["argumentsDelta" if key[0] == "tool-call-delta" else "text"]
            if self._continues(key, fields["seq"], fields["time"]):
                self._members.append(event)
                self._payloads.append(payload)
                return
            self._open(key, run_head(event), event, fields["seq"], fields["time"])
            self._payloads.append(payload)
            return
        if self._key is not None:
            self._close()
        self._lines.append(event.encode())
        self._count += 1
        self._bounds.append(self._count)

    def add_run(self, run: DeltaRun) -> None:
        """Encode a live run of deltas next, from its columns (its time steps are taken in
        one pass over the column, not one Python step per member)."""
        source = run.source
        key = (source.kind, source.turn, source.step, source.index)  # as run_key makes it
        times, texts = run.times(), run.texts()
        seq = run.seq0
        dts = list(map(operator.sub, itertools.islice(times, 1, None), times))
        if dts and not (min(dts) >= -MAX_SAFE_INTEGER and max(dts) <= MAX_SAFE_INTEGER):
            for at in range(len(run)):  # (not a clock's steps) member by member
                self._add_member(key, run, at, seq + at, times[at], texts[at])
            return
        self._add_member(key, run, 0, seq, times[0], texts[0])
        if dts:
            self._members.append((run, 1, len(times)))
            self._payloads.extend(texts[1:])
            self._dts.extend(dts)
            self._last_seq, self._last_time = seq + len(times) - 1, times[-1]

    def _add_member(self, key: Any, run: DeltaRun, at: int, seq: int, time: int, text: str) -> None:
        """Encode member ``at`` of a live run next."""
        if not self._continues(key, seq, time):
            source = run.source
            head = delta_head(source.kind, source.turn, source.step, source.index, seq, time)
            self._open(key, head, None, seq, time)
        self._members.append((run, at, at + 1))
        self._payloads.append(text)

    def _continues(self, key: Any, seq: int, time: int) -> bool:
        """Whether a member of ``key`` at ``seq`` and ``time`` joins the open run (then its
        time step is recorded)."""
        if key != self._key or seq != self._last_seq + 1:
            return False
        step = time - self._last_time
        if not -MAX_SAFE_INTEGER <= step <= MAX_SAFE_INTEGER:
            return False
        self._dts.append(step)
        self._last_seq, self._last_time = seq, time
        return True

    def _open(
        self, key: Any, head: dict[str, Any], first: SessionEvent | None, seq: int, time: int
    ) -> None:
        if self._key is not None:
            self._close()
        self._key, self._head = key, head
        self._members = [] if first is None else [first]
        self._payloads, self._dts = [], []
        self._last_seq, self._last_time = seq, time

    def _close(self) -> None:
        """Encode the open run."""
        size = len(self._payloads)
        if size >= MIN_RUN:
            self._lines.append(encode_json(packed_row(self._head, self._dts, self._payloads)))
            self._count += size
            self._bounds.append(self._count)
        else:
            for member in self._members:
                if isinstance(member, tuple):
                    run, start, stop = member
                    events: Sequence[SessionEvent] = run.cut(start, stop)
                else:
                    events = (member,)
                for event in events:
                    self._lines.append(event.encode())
                    self._count += 1
                    self._bounds.append(self._count)
        self._key = None
        self._members = []

    def finish(self) -> tuple[list[bytes], list[int]]:
        """The lines of everything added, with how many events lie up to each line."""
        if self._key is not None:
            self._close()
        return self._lines, self._bounds
