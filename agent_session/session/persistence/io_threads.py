"""Threads that run a backend's blocking I/O for the event loop, with as little Python as a
hand-off can have: the loop puts the call on a C queue and gets back a future of its own; a
thread runs the call and settles that future with one ``call_soon_threadsafe`` (calls that end
while the loop has not yet taken the first share it).

``loop.run_in_executor`` does the same through a ``concurrent.futures`` future chained to an
asyncio one (locks, a condition, callbacks on both sides). With many live sessions every
checkpoint pays that, and the threads hold the GIL longer while the loop waits for it: 16
sessions checkpointed 21-34% faster over these threads (medians of three alternating
rounds).

Guarantees: calls start in the order they were submitted; a thread is started when none is
idle, up to ``size`` (by a starter thread: the loop waits for no thread's start but that
one's, at the first call); a call's exception is raised by its future; a call whose future
was cancelled still runs to its end (I/O is never abandoned halfway), and its outcome is
dropped; the threads are daemons, and :meth:`shutdown` ends each once the calls submitted
before it have run and refuses later ones, as an executor does.

Internal to ``session.persistence``: a backend imports what it needs of this module from
:mod:`session.persistence.kit`, whose names stay.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from agent_session.session.persistence.futures import Landing

__all__ = ["IOThreads"]

T = TypeVar("T")
_Call = tuple[asyncio.AbstractEventLoop, Landing, Callable[..., Any], tuple[Any, ...]]
_Landed = tuple[Landing, Any, "BaseException | None"]


class IOThreads:
    """Up to ``size`` threads named ``name-N`` (see the module docstring)."""

    def __init__(self, size: int, name: str) -> None:
        if type(size) is not int or size < 1:
            raise ValueError("an I/O thread pool needs at least one thread")
        self._size = size
        self._name = name
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._count = 0
        """How many threads were asked for (each is started by the starter thread)."""
        self._starts: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._starter: threading.Thread | None = None
        self._idle: queue.SimpleQueue[None] = queue.SimpleQueue()
        """A token per thread that finished a call and waits for the next: a call takes one,
        or has a thread started when none is left (up to ``size``). A thread leaves its token
        once its call ended, before the loop hears of it; a call queued just before may start
        a thread it did not need and leave a token too many, which a later call takes and
        then waits for the next free thread. No call is left without a thread: every thread
        takes calls until shutdown."""
        self._shut = False
        self._landed: dict[asyncio.AbstractEventLoop, list[_Landed]] = {}
        """Per loop, the calls that ended and that its next :meth:`_deliver` settles."""
        self._landed_lock = threading.Lock()

    def submit(self, call: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run ``call(*args)`` on a thread; its outcome settles the returned future (of the
        running loop). Raises ``RuntimeError`` after :meth:`shutdown`."""
        if self._shut:
            raise RuntimeError(f"the {self._name} I/O threads are shut down")
        loop = asyncio.get_running_loop()
        future = Landing(loop=loop)
        self._calls.put((loop, future, call, args))
        try:
            self._idle.get_nowait()  # a waiting thread takes it
        except queue.Empty:
            if self._count < self._size:
                self._grow()
        return future

    def _grow(self) -> None:
        """Have one more thread started, without waiting for it to run: ``Thread.start``
        waits for that, which takes milliseconds while other threads hold the GIL, and many
        sessions' first checkpoints would have the loop wait so for each thread. A starter
        thread of the pool's own (the one the loop waits for, at the first call) waits
        instead."""
        if self._starter is None:
            self._starter = threading.Thread(
                target=self._start_threads, name=f"{self._name}-starter", daemon=True
            )
            self._starter.start()
        self._starts.put(self._count)
        self._count += 1

    def _start_threads(self) -> None:
        while (number := self._starts.get()) is not None:
            threading.Thread(target=self._serve, name=f"{self._name}-{number}", daemon=True).start()

    def shutdown(self) -> None:
        """End every thread once the calls already submitted have run (without waiting);
        later calls are refused."""
        self._shut = True
        for _ in range(self._count):  # (a thread the starter has yet to start takes one too)
            self._calls.put(None)
        self._starts.put(None)

    def _post(
        self,
        loop: asyncio.AbstractEventLoop,
        future: Landing,
        result: Any,
        error: BaseException | None,
    ) -> None:
        """Hand an ended call to ``loop``: calls that end before the loop got to the first
        are settled by the same loop callback (one wake-up of the loop, not one each)."""
        with self._landed_lock:
            waiting = self._landed.get(loop)
            if waiting is not None:
                waiting.append((future, result, error))
                return
            self._landed[loop] = [(future, result, error)]
        try:
            loop.call_soon_threadsafe(self._deliver, loop)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            with self._landed_lock:
                self._landed.pop(loop, None)

    def _deliver(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._landed_lock:
            landed = self._landed.pop(loop, [])
        for future, result, error in landed:
            future.land(result, error)

    def _serve(self) -> None:
        take = self._calls.get
        while True:
            item = take()
            if item is None:
                return
            _run(self, *item)
            del item  # hold nothing of a finished call while waiting for the next


def _run(
    pool: IOThreads,
    loop: asyncio.AbstractEventLoop,
    future: Landing,
    call: Callable[..., Any],
    args: tuple[Any, ...],
) -> None:
    """Run one call; leave the thread's idle token before its outcome reaches the loop, so
    a call the loop submits on hearing of it finds this thread free (none is started)."""
    result: Any = None
    error: BaseException | None = None
    try:
        result = call(*args)
    except BaseException as e:  # the caller's to see, on its loop
        error = e
    pool._idle.put(None)
    pool._post(loop, future, result, error)
