"""Reading a stored log from its last compaction boundary, so that resuming a long session
costs what follows its last compaction, not the history before it.

A compaction's summary replaces every surface node and cites them in model order
(``session.events.compaction``), so the surface just before the boundary is known from the
summary alone, and the events after the boundary are checked by every rule of a whole load,
as the continuation of a log whose earlier events are not read (:class:`EarlierEvents`:
reading one of them reads them all, once). JSONL in plain encoding, SQLite and PostgreSQL
read from the last ``compaction/start`` on, found by a search (:meth:`Storage.read_from_last`);
others read the log's end (:meth:`Storage.read_tail`), growing the read until it holds the
boundary.

Guarantees: a window is used only when the bytes did not change while it was read, no tail
is torn and the boundary is what this build writes; otherwise ``None`` asks for the whole
read, whose rules decide. Never writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from agent_session.session.events.compaction import Boundary, last_boundary
from agent_session.session.events.eventlog import EarlierEvents, EventLog
from agent_session.session.events.header import SessionHeader
from agent_session.session.events.rules import CheckedLog, validate_log
from agent_session.session.events.surface import Surface, SurfaceReplace
from agent_session.session.events.types import COMPACTION_START, USER_MESSAGE
from agent_session.session.persistence.api import StoredTail
from agent_session.session.persistence.storage import Storage

__all__ = ["Window", "blocking", "read_window", "surface_at"]

_FIRST = 256
"""Events read from the end first; each further read takes four times as many."""
_MOST = 1 << 20
"""Past this many events after a boundary, the whole log is read instead."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Window:
    """The stored events from the last boundary on, and the revision they were read at."""

    header: SessionHeader
    boundary: Boundary
    events: Sequence[Any]
    """Wire dicts or built events, seq ``boundary.start`` first."""
    revision: str


async def read_window(storage: Storage, id: str) -> Window | None:
    """The stored log of ``id`` from its last compaction boundary on; ``None`` when it has
    none, is not stored, ends torn, changed while it was read, or the boundary is more than
    a million events back (then the whole read serves). A storage that searches
    (:attr:`Storage.reads_from_last`) reads from the last ``compaction/start`` on, once; for
    a log without one, it reads no event."""
    revision = await storage.revision(id)
    if revision is None:
        return None
    if storage.reads_from_last:
        tail = await storage.read_from_last(id, COMPACTION_START)
        boundary = None if tail is None or tail.torn else last_boundary(tail.events)
        if tail is None or boundary is None or boundary.start != tail.start:
            return None  # (none, or a bracket a crash cut last: the whole read decides)
        return await _window(storage, id, revision, tail, boundary)
    count = _FIRST
    while count <= _MOST:
        tail = await storage.read_tail(id, count)
        if tail is None or tail.torn:
            return None
        boundary = last_boundary(tail.events)
        if boundary is not None and boundary.start >= tail.start:
            return await _window(storage, id, revision, tail, boundary)
        if boundary is not None:
            count = tail.start + len(tail.events) - boundary.start
        elif tail.start == 0:
            return None
        else:
            count *= 4
    return None


async def _window(
    storage: Storage, id: str, revision: str, tail: StoredTail, boundary: Boundary
) -> Window | None:
    """The events of ``tail`` from ``boundary`` on, if the log did not change meanwhile."""
    if await storage.revision(id) != revision:
        return None
    return Window(tail.header, boundary, tail.events[boundary.start - tail.start :], revision)


def surface_at(window: Window) -> Surface | None:
    """The surface just before the boundary: the nodes the summary replaced, in model order;
    ``None`` when the summary is not a replace of exactly the nodes it cites."""
    at = window.boundary.summary - window.boundary.start
    if not 0 <= at < len(window.events):
        return None
    summary = window.events[at]
    wire = summary if isinstance(summary, dict) else summary.to_json()
    op, sources = wire.get("surfaceOp"), wire.get("sourceEventSeqs")
    if wire.get("type") != USER_MESSAGE or not isinstance(op, dict | SurfaceReplace):
        return None
    op = op if isinstance(op, dict) else op.to_json()
    if not isinstance(sources, list | tuple) or not sources:
        return None
    nodes = list(sources)
    start = window.boundary.start
    if nodes[0] != op.get("start") or nodes[-1] != op.get("end"):
        return None
    if set(map(type, nodes)) != {int} or min(nodes) < 0 or max(nodes) >= start:
        return None
    if len(set(nodes)) < len(nodes):
        return None
    return Surface.of_nodes(nodes)


def checked_window(window: Window, read_before: Callable[[], Sequence[Any]]) -> CheckedLog | None:
    """The window checked by every rule of a whole load, as the continuation of the events
    before it (unread: ``read_before`` reads them when somebody reaches for one); ``None``
    when the summary does not say the surface (the whole read decides). Raises as
    :func:`validate_log`."""
    surface = surface_at(window)
    if surface is None:
        return None
    earlier = EarlierEvents(window.boundary.start, read_before)
    return validate_log(window.events, after=CheckedLog(EventLog([earlier]), surface))


def blocking(work: Callable[[], Awaitable[T]]) -> T:
    """The result of the coroutine ``work()`` makes, run to its end on a thread of its own
    with an event loop of its own (so a caller on an event loop can wait for it)."""
    with ThreadPoolExecutor(1, thread_name_prefix="agent-session-history") as pool:
        return pool.submit(lambda: asyncio.run(_awaited(work))).result()


async def _awaited(work: Callable[[], Awaitable[T]]) -> T:
    return await work()
