"""Turn brackets: the one reading of ``turn/start`` … ``turn/end`` in a log.

A log is a sequence of turns. Each opens with ``turn/start`` (``data.turn`` is its number,
counted from 1) and, once finished, closes with ``turn/end``; a crash leaves the last turn open.
Every question about turns (is the last one open, where does it start, what is the next number)
is answered here, so that readers (the store, recovery, the loop, the CLI) cannot disagree.

The functions accept built events, wire dicts, and :class:`EventLog`\\ s holding unbuilt packed
runs; a packed run only ever holds streaming deltas, never a bracket, so it is skipped whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent_session.session.events.compaction import boundary_of
from agent_session.session.events.eventlog import is_run, iter_parts, walk_back
from agent_session.session.events.types import TURN_END, TURN_START

__all__ = ["UNNUMBERED", "Brackets", "bracket", "brackets", "next_turn_number"]

UNNUMBERED: Any = "?"
"""The number reported for a ``turn/start`` whose data names none (a hand-made log)."""


def bracket(entry: object) -> Literal["start", "end"] | None:
    """``"start"`` or ``"end"`` for a turn bracket (a built event, a wire dict or an unbuilt
    packed run), ``None`` for any other entry."""
    if is_run(entry):
        return None
    kind = entry.get("type") if isinstance(entry, Mapping) else getattr(entry, "type", None)
    if kind == TURN_START:
        return "start"
    if kind == TURN_END:
        return "end"
    return None


@dataclass(frozen=True, slots=True)
class Brackets:
    """Where the turns of a log stand at its end."""

    last: Literal["start", "end"] | None
    """The last bracket: ``"start"`` means the last turn is open; ``None``, there is none."""
    start_index: int | None
    """The index of the last ``turn/start`` (whether or not it was closed)."""
    start_number: Any
    """The number the last ``turn/start`` names (:data:`UNNUMBERED` if none), or ``None``."""

    @property
    def open_turn(self) -> Any:
        """The number of the turn left open at the end, or ``None`` when every turn closed."""
        return self.start_number if self.last == "start" else None

    @property
    def open_start(self) -> int | None:
        """The index of the open turn's ``turn/start``, or ``None`` when none is open."""
        return self.start_index if self.last == "start" else None


def brackets(events: Iterable[Any]) -> Brackets:
    """Read the turn brackets of ``events``: from its end for a sequence (reading back only
    to the last ``turn/start`` or compaction boundary, so a turn costs what it holds, not
    the log before it), else in one pass."""
    if isinstance(events, Sequence):
        return _from_end(events)
    last: Literal["start", "end"] | None = None
    start_index: int | None = None
    start: Any = None
    index = 0
    for entry in iter_parts(events):
        if is_run(entry):
            index += len(entry)
            continue
        kind = bracket(entry)
        if kind is not None:
            last = kind
            if kind == "start":
                start_index, start = index, entry
        index += 1
    if start is None:
        return Brackets(last, None, None)
    data = start.get("data") if isinstance(start, Mapping) else start.data
    number = data.get("turn", UNNUMBERED) if isinstance(data, Mapping) else UNNUMBERED
    return Brackets(last, start_index, number)


def _from_end(events: Sequence[Any]) -> Brackets:
    """:func:`brackets` of a sequence, reading back from its end."""
    last: Literal["start", "end"] | None = None
    for index, entry in walk_back(events):
        kind = bracket(entry)
        if kind is None:
            boundary = boundary_of(entry)
            if boundary is not None:  # every turn before a compaction was closed
                closed = last or ("end" if boundary.turn is not None else None)
                return Brackets(closed, None, boundary.turn)
            continue
        if last is None:
            last = kind
        if kind == "start":
            data = entry.get("data") if isinstance(entry, Mapping) else entry.data
            number = data.get("turn", UNNUMBERED) if isinstance(data, Mapping) else UNNUMBERED
            return Brackets(last, index, number)
    return Brackets(last, None, None)


def next_turn_number(events: Iterable[Any]) -> int:
    """The number the next turn gets: one more than the last ``turn/start`` names, or 1."""
    number = brackets(events).start_number
    return number + 1 if type(number) is int else 1
