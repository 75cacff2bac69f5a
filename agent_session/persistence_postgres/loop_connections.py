"""Connections that run checkpoints on the event loop itself, speaking libpq's asynchronous
protocol directly (psycopg's ``pgconn``): when an idle connection has a checkpoint's
statement prepared (:meth:`LoopConnections.ready_now`), it is sent the moment the checkpoint
is asked for, and its answer is read by one callback of the loop, with no thread hop, no task
and no driver machinery between (on a small machine those cost about a third of the
statement); otherwise a task gets a connection and prepares it there
(:meth:`LoopConnections.ready`).

Guarantees: at most ``size`` connections, opened on first need with the storage's settings
and checked like every other (``synchronous_commit = on``, a server that acknowledges
unflushed commits refused); one statement at a time on each, prepared once per connection
(up to :data:`PREPARED_PER_CONNECTION` texts; past those a statement goes with its text); a
caller waits (FIFO) when all are busy. A connection is idle again only once its statement's
answer was read whole, so a caller that stops waiting (cancellation) never leaves a
statement running on an idle connection. Each connection has one reader for its life, so an
idle connection the server ended (a restart) leaves the set as soon as the loop sees it. A
connection that failed (the driver raised ``OperationalError``, or it is no longer idle and
healthy after an error) is closed, never reused, and replaced on the next need. The set
belongs to the first loop it runs on: on another loop :meth:`usable` is false and the caller
uses its worker threads instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Final

import psycopg
from psycopg import pq
from psycopg.errors import DatabaseError, lookup

from agent_session.persistence_postgres.schema import DURABILITY_QUERY, refuse_undurable

__all__ = ["PREPARED_PER_CONNECTION", "Link", "LoopConnections"]

PREPARED_PER_CONNECTION: Final = 64
"""Statement texts prepared on one connection at most; a text past those is sent with its
parameters each time (parsed and planned by the server on every call)."""

Params = Sequence[bytes | None]
"""A statement's parameters in the protocol's text format."""


class Link:
    """One connection of the set, the statements prepared on it, and what reads it."""

    __slots__ = ("connection", "fd", "pgconn", "prepared", "reading")

    def __init__(self, connection: psycopg.AsyncConnection[Any]) -> None:
        self.connection = connection
        """The driver's connection: it set the connection up and handles its notices (and
        would warn if collected open); its ``pgconn`` is what this set speaks through."""
        self.pgconn = connection.pgconn
        self.fd = self.pgconn.socket
        self.prepared: dict[bytes, bytes] = {}
        """Statement text -> the name it is prepared under on this connection."""
        self.reading: Callable[[], None] | None = None
        """The reader of the answer in flight; ``None`` while the connection is idle."""


class LoopConnections:
    """Up to ``size`` connections to ``conninfo`` (see the module docstring)."""

    def __init__(self, conninfo: str, settings: dict[str, Any], size: int) -> None:
        self._conninfo = conninfo
        self._settings = settings
        self._size = size
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[Link] = []
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    def usable(self) -> bool:
        """Whether the running loop may use this set (the one it belongs to, or the first);
        never for a set of no connections."""
        if self._closed or self._size == 0:
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        return self._loop is None or self._loop is loop

    def ready_now(self, query: bytes) -> Link | None:
        """An idle connection on which ``query`` is prepared, taken for one :meth:`send`; or
        ``None`` (then :meth:`ready` gets one)."""
        if self._waiters:
            return None  # callers already wait: no overtaking
        idle = self._idle
        for at in range(len(idle) - 1, -1, -1):
            if query in idle[at].prepared:
                return idle.pop(at)
        return None

    async def ready(self, query: bytes) -> Link:
        """A connection taken for one :meth:`send` of ``query``, prepared there: an idle
        one, a new one, or (all ``size`` busy) the next one put back, in the order asked."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        link = await self._acquire()
        if query in link.prepared or len(link.prepared) >= PREPARED_PER_CONNECTION:
            return link
        name = b"agent_session_%d" % len(link.prepared)

        def abandoned(done: asyncio.Future[int]) -> None:  # the caller stopped waiting, or failed
            if done.exception() is None:
                link.prepared[query] = name
            self._idle_or_closed(link, _failed(done))

        answered = self._answer(link, lambda: link.pgconn.send_prepare(name, query), _done)
        try:
            await asyncio.shield(answered)  # the answer is read whole, even if we stop waiting
        except BaseException:
            answered.add_done_callback(abandoned)
            raise
        link.prepared[query] = name
        return link

    def send(self, link: Link, query: bytes, params: Params) -> asyncio.Future[int]:
        """Send ``query`` on ``link``, which :meth:`ready` or :meth:`ready_now` took for it
        (prepared there, or past the limit sent with its text); the future is its row count,
        or the driver's error. The connection is put back once the
        answer was read whole (also when a caller cancelled the future meanwhile)."""
        pgconn = link.pgconn
        name = link.prepared.get(query)

        def start() -> None:
            if name is None:
                pgconn.send_query_params(query, params)
            else:
                pgconn.send_query_prepared(name, params)

        return self._answer(link, start, _row_count, self._idle_or_closed)

    async def execute(self, query: bytes, params: Params) -> int:
        """:meth:`send` on a connection :meth:`ready` gets."""
        return await self.send(await self.ready(query), query, params)

    def _answer(
        self,
        link: Link,
        start: Callable[[], None],
        read: Callable[[pq.abc.PGresult], int],
        ended: Callable[[Link, bool], None] | None = None,
    ) -> asyncio.Future[int]:
        """Run ``start`` (which sends one command) and read its answer from the loop's
        callbacks; the future is ``read`` of its last result, or the error it carried. Once
        the answer is read whole (or the connection failed), ``ended(link, failed)``."""
        loop = self._loop or asyncio.get_running_loop()
        answered: asyncio.Future[int] = loop.create_future()
        pgconn, fd = link.pgconn, link.fd
        results: list[pq.abc.PGresult] = []

        def end(error: BaseException | None) -> None:
            link.reading = None
            loop.remove_writer(fd)
            if error is None:
                failed = next((r for r in results if r.status == pq.ExecStatus.FATAL_ERROR), None)
                if failed is not None:
                    error = _error(failed)
                elif not results:
                    error = psycopg.OperationalError("the server sent no answer")
            if ended is not None:
                ended(link, isinstance(error, psycopg.OperationalError))
            if answered.cancelled():
                return
            if error is not None:
                answered.set_exception(error)
            else:
                try:
                    answered.set_result(read(results[-1]))
                except Exception as e:  # an answer of a shape this code does not expect
                    answered.set_exception(e)

        def readable() -> None:
            try:
                pgconn.consume_input()
                while not pgconn.is_busy():
                    result = pgconn.get_result()
                    if result is None:
                        end(None)
                        return
                    results.append(result)
            except psycopg.OperationalError as e:
                end(e)

        def writable() -> None:
            try:
                if pgconn.flush() == 0:
                    loop.remove_writer(fd)
            except psycopg.OperationalError as e:
                end(e)

        link.reading = readable  # (the connection's reader, registered once, calls it)
        try:
            start()
            if pgconn.flush() != 0:
                loop.add_writer(fd, writable)
        except psycopg.OperationalError as e:
            end(e)
        return answered

    async def _acquire(self) -> Link:
        if not self._waiters:
            if self._idle:
                return self._idle.pop()
            if self._open < self._size:
                return await self._open_one()
        first = False
        while True:
            waiter = asyncio.get_running_loop().create_future()
            if first:
                self._waiters.appendleft(waiter)  # woken, then overtaken: still next in line
            else:
                self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # woken, then cancelled: wake the next in line instead
                else:
                    self._waiters.remove(waiter)
                raise
            if self._idle:
                return self._idle.pop()
            if self._open < self._size:
                return await self._open_one()
            first = True

    async def _open_one(self) -> Link:
        self._open += 1
        try:
            return await self._connect()
        except BaseException:
            self._open -= 1
            self._wake()
            raise

    async def _connect(self) -> Link:
        connection = await psycopg.AsyncConnection.connect(self._conninfo, **self._settings)
        try:
            cursor = await connection.execute(DURABILITY_QUERY)
            refuse_undurable(await cursor.fetchone())
        except BaseException:
            await connection.close()
            raise
        link = Link(connection)
        asyncio.get_running_loop().add_reader(link.fd, self._readable, link)
        return link

    def _readable(self, link: Link) -> None:
        """The one reader of a connection: its answer's, while a command is in flight; while
        it is idle, the server spoke unasked (a notice, or the end of the connection, as when
        the server stops): a connection found ended leaves the set at once."""
        reading = link.reading
        if reading is not None:
            reading()
            return
        with contextlib.suppress(psycopg.OperationalError):  # (then its status says so)
            link.pgconn.consume_input()
        if link.pgconn.status != pq.ConnStatus.OK and link in self._idle:
            self._idle.remove(link)
            self._closed_link(link)
            self._wake()  # its slot is free: a waiter may open a new one

    def _idle_or_closed(self, link: Link, failed: bool) -> None:
        """Make ``link`` idle again, or (it failed, it is not idle and healthy, or the set is
        closed) close it and free its slot: the next caller opens a new one."""
        pgconn = link.pgconn
        if (
            failed
            or self._closed
            or pgconn.status != pq.ConnStatus.OK
            or pgconn.transaction_status != pq.TransactionStatus.IDLE
        ):
            self._closed_link(link)
        else:
            self._idle.append(link)
        self._wake()

    def _closed_link(self, link: Link) -> None:
        """Stop reading ``link``, close it and free its slot."""
        self._open -= 1
        loop = self._loop or asyncio.get_running_loop()
        loop.remove_reader(link.fd)
        loop.remove_writer(link.fd)
        link.pgconn.finish()  # what the driver's close does, without a task

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def close(self) -> None:
        """Close the idle connections; a busy one is closed when its statement ends. Later
        :meth:`usable` is false."""
        self._closed = True
        idle, self._idle = self._idle, []
        for link in idle:
            self._closed_link(link)


def _done(result: pq.abc.PGresult) -> int:
    return 0


def _row_count(result: pq.abc.PGresult) -> int:
    return int(result.command_tuples or b"0")


def _failed(done: asyncio.Future[int]) -> bool:
    """Whether a statement's end leaves its connection unfit: the driver failed (an error
    the server answered, such as a refused row, leaves it fit)."""
    if done.cancelled():
        return False  # the answer was read whole all the same
    return isinstance(done.exception(), psycopg.OperationalError)


def _error(result: pq.abc.PGresult) -> psycopg.Error:
    """The driver's exception for a failed result (its class from the SQLSTATE)."""
    state = (result.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode("ascii", "replace")
    message = (result.error_message or b"").decode("utf-8", "replace").strip()
    try:
        kind: type[psycopg.Error] = lookup(state)
    except KeyError:
        kind = psycopg.OperationalError if state.startswith("08") else DatabaseError
    return kind(message)
