"""Compaction boundaries: where a summary replaced a log's whole model history, read from the
log alone.

A compaction (``agent_session.agent_loop.compaction``) writes, between two turns and in one
flush: ``compaction/start``, ``compaction/summary``, the summary as a ``user/message`` whose
surface op replaces every current node (citing them all, in model order), then
``context/compacted`` (the facts of it: what triggered it, the estimated sizes, the last turn's
number) and ``compaction/end``. Nothing before it is changed or removed.

Guarantees: a log read from a boundary's ``start`` on, with the surface the summary names,
reaches the same surface, the same next turn number and the same request header state as the
whole log (``session.persistence.window``); the readers here go back from the end and stop at
the last boundary, so what they cost does not grow with the history before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_session.session.errors import SessionEventError
from agent_session.session.events.eventlog import (
    EarlierEvents,
    is_log,
    is_run,
    iter_parts,
    walk_back,
)
from agent_session.session.events.surface import Surface, SurfaceReplace, projected_message
from agent_session.session.events.types import CONTEXT_COMPACTED, USER_MESSAGE
from agent_session.session.json.lossless import is_safe_int

__all__ = [
    "Boundary",
    "boundary_of",
    "boundary_problem",
    "is_summary",
    "last_boundary",
    "latest_of",
    "refuse_bad_boundary",
    "uncompacted",
    "unread_boundary",
]


@dataclass(frozen=True, slots=True)
class Boundary:
    """One compaction, as its ``context/compacted`` event records it."""

    seq: int
    """The seq of the ``context/compacted`` event."""
    start: int
    """The seq of its ``compaction/start``: a reader of the log from the boundary starts here."""
    summary: int
    """The seq of the summary ``user/message``."""
    turn: int | None
    """The number of the last turn before it (``None``: there was none)."""
    requested: bool
    """Whether a ``request/header`` was logged before it."""
    budgeted: bool
    """Whether a ``budget/set`` was logged before it (a budget's spend then needs the
    history before it)."""


def boundary_of(event: Any) -> Boundary | None:
    """The boundary a ``context/compacted`` event (built, or a wire dict) records; ``None`` for
    any other event or one whose data does not say where it starts."""
    wire = type(event) is dict or (not hasattr(event, "type") and isinstance(event, Mapping))
    kind = event.get("type") if wire else getattr(event, "type", None)
    if kind != CONTEXT_COMPACTED or is_run(event):  # (the type first: asked of every event)
        return None
    data = event.get("data") if wire else event.data
    seq = event.get("seq") if wire else event.seq
    if not isinstance(data, Mapping) or not is_safe_int(seq):
        return None
    start, summary, turn = data.get("start"), data.get("summary"), data.get("turn")
    if not (is_safe_int(start) and is_safe_int(summary) and 0 <= start < summary < seq):
        return None
    if turn is not None and not (is_safe_int(turn) and turn >= 1):
        return None
    requested = data.get("requested") is not False
    return Boundary(seq, start, summary, turn, requested, data.get("budgeted") is not False)


def last_boundary(events: Sequence[Any]) -> Boundary | None:
    """The last compaction boundary of ``events``, read back from its end (streamed runs
    stay unbuilt); ``None`` when it has none."""
    for _, event in walk_back(events):
        found = boundary_of(event)
        if found is not None:
            return found
    return None


def boundary_problem(event: Any, nodes: Sequence[int]) -> str | None:
    """What is wrong with a ``context/compacted`` event given the surface ``nodes`` when it
    is appended: a boundary whose summary is not then the whole surface would make a read
    from it disagree with a whole read. ``None`` when it is right, or is no boundary."""
    boundary = boundary_of(event)
    if boundary is None or list(nodes) == [boundary.summary]:
        return None
    return (
        f"context/compacted at seq {boundary.seq} names the summary at seq {boundary.summary}, "
        f"which is not the whole surface then ({len(nodes)} node(s)): a read from this "
        "boundary would not see what a whole read sees"
    )


def refuse_bad_boundary(seq: int, data: Any, nodes: Sequence[int]) -> None:
    """Raise :class:`SessionEventError` for a ``context/compacted`` about to be appended at
    ``seq`` with ``data`` that :func:`boundary_problem` finds wrong."""
    problem = boundary_problem({"type": CONTEXT_COMPACTED, "seq": seq, "data": data}, nodes)
    if problem is not None:
        raise SessionEventError(f'session event "{CONTEXT_COMPACTED}" is refused: {problem}')


def unread_boundary(events: Sequence[Any]) -> Boundary | None:
    """The last boundary of a log whose history before it was not read (a resume from that
    boundary: ``session.persistence.window``); ``None`` otherwise. Reads nothing before it."""
    parts = events.parts if is_log(events) else ()
    if not parts or type(parts[0]) is not EarlierEvents or parts[0].loaded:
        return None
    return last_boundary(events)


def latest_of(events: Sequence[Any], kind: str) -> tuple[Any, Boundary | None]:
    """The last event of type ``kind`` after the last boundary (``None`` if none), and that
    boundary (``None`` when the search reached the start of the log). Reads back from the
    end, never past the boundary: what it costs does not grow with the history before it."""
    for _, event in walk_back(events):
        if getattr(event, "type", None) == kind:
            return event, None
        found = boundary_of(event)
        if found is not None:
            return None, found
    return None, None


def is_summary(event: Any) -> bool:
    """Whether ``event`` is a compaction's summary: a ``user/message`` that a surface replace
    put in place of what came before, from the ``compaction`` plugin."""
    if getattr(event, "type", None) != USER_MESSAGE or not isinstance(
        event.surface_op, SurfaceReplace
    ):
        return False
    source = event.data.get("source") if isinstance(event.data, Mapping) else None
    return isinstance(source, Mapping) and source.get("plugin") == "compaction"


def uncompacted(events: Sequence[Any]) -> list[Any]:
    """The model history of a whole log as if no compaction had summarized it: the surface
    replayed without the summaries' replacements (every other replacement applies)."""
    surface = Surface()
    for event in iter_parts(events):
        if is_run(event) or event.surface_op is None or is_summary(event):
            continue
        surface.apply(event.seq, event.surface_op)
    messages = (projected_message(events[seq]) for seq in surface.nodes)
    return [message for message in messages if message is not None]
