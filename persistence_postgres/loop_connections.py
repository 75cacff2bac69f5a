"""Connections that run checkpoints on the event loop itself (psycopg's ``AsyncConnection``),
so a checkpoint's statement costs no hop to a worker thread and back (two thread wake-ups,
which cost about as much as the statement on a small machine).

Guarantees: at most ``size`` connections, opened on first need with the storage's settings
and checked like every other (``synchronous_commit = on``, a server that acknowledges
unflushed commits refused); one statement at a time on each; a caller waits (FIFO) when all
are busy; a connection that failed is closed and replaced on the next need, never reused. The
set belongs to the first loop it runs on: on another loop :meth:`usable` is false and the
caller uses its worker threads instead.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg

from persistence_postgres.schema import DURABILITY_QUERY, refuse_undurable

__all__ = ["LoopConnection", "LoopConnections"]

T = TypeVar("T")
LoopConnection = psycopg.AsyncConnection[tuple[Any, ...]]
"""An asynchronous connection, as this backend opens them."""


class LoopConnections:
    """Up to ``size`` asynchronous connections to ``conninfo`` (see the module docstring)."""

    def __init__(self, conninfo: str, settings: dict[str, Any], size: int) -> None:
        self._conninfo = conninfo
        self._settings = settings
        self._size = size
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[LoopConnection] = []
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    def usable(self) -> bool:
        """Whether the running loop may use this set (the one it belongs to, or the first)."""
        if self._closed:
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        return self._loop is None or self._loop is loop

    async def run(self, work: Callable[[LoopConnection], Awaitable[T]]) -> T:
        """Run ``work`` on a connection of the set; a connection it leaves broken (the
        driver raised ``OperationalError``, or finds it broken or closed) or that it was
        cancelled on is closed and not reused."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        connection = await self._acquire()
        try:
            result = await work(connection)
        except BaseException as e:  # a cancelled statement may still be running: discard
            failed = isinstance(e, psycopg.OperationalError) or not isinstance(e, Exception)
            await self._put_back(connection, failed)
            raise
        await self._put_back(connection, False)
        return result

    async def _acquire(self) -> LoopConnection:
        while True:
            if self._idle:
                return self._idle.pop()
            if self._open < self._size:
                self._open += 1
                try:
                    return await self._connect()
                except BaseException:
                    self._open -= 1
                    self._wake()
                    raise
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # woken, then cancelled: wake the next in line instead
                else:
                    self._waiters.remove(waiter)
                raise

    async def _connect(self) -> LoopConnection:
        connection = await psycopg.AsyncConnection.connect(self._conninfo, **self._settings)
        try:
            cursor = await connection.execute(DURABILITY_QUERY)
            refuse_undurable(await cursor.fetchone())
        except BaseException:
            await connection.close()
            raise
        return connection

    async def _put_back(self, connection: LoopConnection, failed: bool) -> None:
        """Make ``connection`` idle again, or (it failed, or the driver finds it broken or
        closed, e.g. after ``work`` handled a failure itself; or the set is closed) close it
        and free its slot: the next caller opens a new one."""
        if failed or connection.broken or connection.closed or self._closed:
            self._open -= 1
            self._wake()
            await connection.close()
        else:
            self._idle.append(connection)
            self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def close(self) -> None:
        """Close the idle connections; a busy one is closed when its work ends. Later
        :meth:`usable` is false."""
        self._closed = True
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        for connection in idle:
            await connection.close()
