"""One FIFO lock per session id, on the event loop, that a checkpoint can also take and give
back without a task: the service serializes every write of an id through it.

Guarantees: holders get an id's lock in the order they asked; a holder that fails or is
cancelled never poisons it (the next in line gets it); a waiter cancelled after the lock was
handed to it passes it on; an id nobody holds or waits for has no entry (``held`` is then
false and ``busy`` counts only ids in use).

Internal to ``session.persistence``: its names may change between releases.
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType

__all__ = ["KeyedLocks"]


class _Hold:
    """``async with locks.hold(id)``: a plain object, not a generator (a checkpoint's path)."""

    __slots__ = ("_id", "_locks")

    def __init__(self, locks: KeyedLocks, id: str) -> None:
        self._locks = locks
        self._id = id

    async def __aenter__(self) -> None:
        await self._locks.acquire(self._id)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._locks.give(self._id)


class KeyedLocks:
    """One FIFO lock per id (see the module docstring)."""

    def __init__(self) -> None:
        self._entries: dict[str, deque[asyncio.Future[None]]] = {}
        """The ids whose lock is taken, each with the futures of those waiting for it."""

    def hold(self, id: str) -> _Hold:
        """``async with hold(id)``: hold ``id``'s lock, in the order the holders asked."""
        return _Hold(self, id)

    def take(self, id: str) -> bool:
        """Take ``id``'s lock now if nobody holds or waits for it; ``False`` otherwise. A
        ``True`` must be matched by one :meth:`give`."""
        if id in self._entries:
            return False
        self._entries[id] = deque()
        return True

    async def acquire(self, id: str) -> None:
        """Wait for ``id``'s lock and take it (match with one :meth:`give`)."""
        waiters = self._entries.get(id)
        if waiters is None:
            self._entries[id] = deque()
            return
        waiter = asyncio.get_running_loop().create_future()
        waiters.append(waiter)
        try:
            await waiter  # give() hands the lock over by resolving it
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give(id)  # handed over, then cancelled: pass it on
            else:
                waiters.remove(waiter)
            raise

    def give(self, id: str) -> None:
        """Give ``id``'s lock back: to the first waiter still waiting, or drop the entry."""
        waiters = self._entries[id]
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        del self._entries[id]

    @property
    def busy(self) -> bool:
        """Whether anyone holds or waits for any id."""
        return bool(self._entries)

    def held(self, id: str) -> bool:
        """Whether anyone holds or waits for ``id``."""
        return id in self._entries

    async def drain(self) -> None:
        """Wait until every id is idle."""
        while self._entries:
            async with self.hold(next(iter(self._entries))):
                pass
