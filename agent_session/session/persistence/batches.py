"""The batches a live writer takes from its write-behind controller: the buffered events and
runs of streamed deltas as one event log, and what storage still lacks of it.

Internal to ``session.persistence``: its names may change between releases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_session.session.events.event import SessionEvent
from agent_session.session.events.eventlog import EventLog, first_seq, is_run
from agent_session.session.events.livelog import OpenRun

__all__ = ["Batch", "batch_of", "events_in", "follows", "keep_run_lines", "unwritten"]


class Batch(EventLog[SessionEvent]):
    """A live writer's batch: its events, and the lines it already has for some of them."""

    __slots__ = ("lines",)

    lines: dict[int, bytes]
    """The JSONL line of some of its events, by seq, encoded as they were committed (an
    encoder may use them instead of encoding those events again). A run's deltas have lines
    only where a chain encoded them, in a store that packs no rows."""


def events_in(pending: Sequence[Any]) -> int:
    """How many events the controller's items hold (a run of deltas, all of its members)."""
    return sum(len(item.texts) if type(item) is OpenRun else 1 for item in pending)


def batch_of(items: list[Any], lines: dict[int, bytes]) -> Batch:
    """The events of the controller's items: each run of deltas is sealed (its later deltas
    start a new run, which the writer hears of) and taken whole, unbuilt; the lines of its
    events are taken out of ``lines``."""
    parts: list[Sequence[SessionEvent]] = []
    starts: list[int] = []
    size = 0
    plain: list[SessionEvent] = []
    known: dict[int, bytes] = {}
    for item in items:
        if type(item) is OpenRun:
            if plain:
                parts.append(tuple(plain))
                starts.append(size)
                size += len(plain)
                plain = []
            run = item.seal()
            if run.seq0 in lines:  # (a chain encoded its deltas: all of them)
                for seq in range(run.seq0, run.seq0 + len(run)):
                    known[seq] = lines.pop(seq)
            parts.append(run)
            starts.append(size)
            size += len(run)
        else:
            plain.append(item)
            line = lines.pop(item.seq, None)
            if line is not None:
                known[item.seq] = line
    if plain:
        parts.append(tuple(plain))
        starts.append(size)
        size += len(plain)
    batch = Batch.of_parts(tuple(parts), starts, size)
    batch.lines = known
    return batch


def keep_run_lines(
    pending: Sequence[Any], encoded: dict[int, bytes], lines: dict[int, bytes]
) -> None:
    """Copy into ``lines`` (a live session's, which its next batch takes) the ``encoded``
    JSONL lines of each run of deltas still ``pending``: all of a run's, or none."""
    for item in pending:
        if type(item) is not OpenRun:
            continue
        end = item.seq0 + len(item.texts)
        if item.seq0 in encoded and end - 1 in encoded:
            for seq in range(item.seq0, end):
                lines[seq] = encoded[seq]


def follows(batch: EventLog[SessionEvent], cursor: int) -> bool:
    """Whether ``batch`` starts at ``cursor`` and ends where its length says (its items came
    in commit order; a gap inside would show at one of its ends)."""
    last = batch.parts[-1]
    end = last.seq0 + len(last) - 1 if is_run(last) else last[-1].seq
    return first_seq(batch) == cursor and end == cursor + len(batch) - 1


def unwritten(batch: EventLog[SessionEvent], cursor: int) -> EventLog[SessionEvent]:
    """The tail of a live batch that storage lacks: binding a session may already have written
    its head (a batch is contiguous by seq)."""
    skip = cursor - first_seq(batch) if batch else 0
    return batch[skip:] if skip > 0 else batch
