"""The write-behind controller: one per live session.

Appended events are buffered and written in batches. The first pending event opens a fixed
batching window; later events join the batch without extending it. When the window expires the
batch is written in the background; events admitted while a write is in flight form the next
batch. ``flush()`` is the barrier: it cancels the wait and drains everything pending, including
events admitted while it runs. A failed background write keeps its batch in order, is logged
once, and pauses automatic retries until the next event or flush. A flush with nothing pending
and no write in flight returns ``None`` at once: no I/O, no task, no thread hop.

Internal to ``session.persistence``: its names may change between releases.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from agent_session.session.events.event import SessionEvent
from agent_session.session.events.livelog import OpenRun
from agent_session.session.live.hooks import CallerFuture
from agent_session.session.persistence.futures import on_landing, outcome, settle

__all__ = [
    "LoopScheduler",
    "Pending",
    "Scheduler",
    "TimerHandle",
    "WriteBehindController",
    "Writer",
    "WriterNow",
]

log = logging.getLogger("session.persistence")


class TimerHandle(Protocol):
    """A scheduled callback that can be cancelled."""

    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """Schedules the batching window; tests inject a manual clock."""

    def call_later(self, delay_ms: float, callback: Callable[[], None]) -> TimerHandle | None: ...

    def now_ms(self) -> float:
        """The clock ``call_later`` counts on, in milliseconds."""
        ...


class LoopScheduler:
    """The default scheduler: the running asyncio loop's ``call_later``."""

    def call_later(self, delay_ms: float, callback: Callable[[], None]) -> TimerHandle | None:
        """Schedule on the running loop; without one (a synchronous caller) nothing is armed
        and the events wait for the next flush."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        return loop.call_later(delay_ms / 1000, callback)

    def now_ms(self) -> float:
        """The running loop's clock (asked only once a timer is armed on it)."""
        return asyncio.get_running_loop().time() * 1000


Pending = SessionEvent | OpenRun
"""A buffered item: a committed event, or a run of streamed deltas (all of it, up to when
the batch that holds it is written)."""

Writer = Callable[[list[Pending]], Awaitable[None]]
"""Durably writes one contiguous batch; raises on failure (nothing of the batch is kept)."""

WriterNow = Callable[[list[Pending]], "bool | asyncio.Future[None]"]
"""Writes one contiguous batch at once, without a task: ``True`` once it is durable; or a
future of the running loop, when the write was handed to an I/O thread, that resolves once it
is durable (or raises, with nothing of the batch kept); or declines at once with ``False``
(nothing written; the batch then goes through the :data:`Writer`). Raises on failure with
nothing of the batch kept."""


class WriteBehindController:
    """Buffers one session's events and writes them in batches (see the module docstring).

    ``label`` names the session in the single log line a failed background write produces.
    ``write_now``, when given, is tried first by :meth:`flush` while no background write is in
    flight: a barrier it completes costs no task and no event-loop round trip, and one it hands
    to an I/O thread costs no task (the barrier is the hand-off's future, followed by a drain
    of what was admitted meanwhile).
    """

    def __init__(
        self,
        write: Writer,
        *,
        write_now: WriterNow | None = None,
        max_delay_ms: int = 200,
        scheduler: Scheduler | None = None,
        label: str = "",
    ) -> None:
        self._write = write
        self._write_now = write_now
        self._max_delay_ms = max_delay_ms
        self._scheduler: Scheduler = scheduler or LoopScheduler()
        self._label = label
        self._pending: list[Pending] = []
        self._timer: TimerHandle | None = None
        """The armed timer. It may outlive the window it was armed for (see :meth:`_arm`)."""
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        """The event loop that was running when the timer was armed."""
        self._window: float | None = None
        """When the open batching window ends (scheduler milliseconds); ``None``: none open."""
        self._active: asyncio.Future[None] | None = None
        self._barrier: asyncio.Future[None] | None = None
        """The running drain task's barrier (shared by its callers), if any."""
        self._waiters: list[CallerFuture] | None = None
        """While a handed-off write's barrier runs: its callers' futures (each settled on
        its own when the barrier ends); ``None`` otherwise."""
        self._handed: list[Pending] = []
        """The batch of the handed-off write in flight (put back if it fails)."""
        self._deadline_expired = False
        self._paused = False

    @property
    def has_work(self) -> bool:
        """Events are pending or a write is in flight."""
        return bool(self._pending) or self._active is not None

    @property
    def window_ends_ms(self) -> float | None:
        """When the open batching window ends, on the scheduler's clock; ``None`` when no
        window is open (nothing pending, a barrier draining, or retries paused)."""
        return self._window

    @property
    def pending(self) -> tuple[Pending, ...]:
        """The buffered events and runs, oldest first."""
        return tuple(self._pending)

    def enqueue(self, event: Pending) -> None:
        """Buffer one committed event or a run of deltas (events are immutable, so no copy
        is needed)."""
        was_empty = not self._pending
        self._pending.append(event)
        barrier = self._barrier  # (_in_barrier inlined: every append passes here)
        if self._waiters is not None or (barrier is not None and not barrier.done()):
            return  # the running barrier drains it
        if self._paused:
            self._paused = False
            self._arm()
        elif was_empty and self._window is None:
            self._arm()

    def flush(self) -> asyncio.Future[None] | None:
        """The barrier. ``None`` when there is nothing to do; otherwise a future that resolves
        once everything pending (including events admitted meanwhile) is written, or raises the
        write's error with the batch retained. Concurrent calls share one barrier: a drain
        task, or each its own :class:`~session.live.hooks.CallerFuture` of a handed-off
        write's (a caller that cancels it stops only its own wait).

        When ``write_now`` takes the batch, the write is done before this returns: ``None`` on
        success; its error is raised here, with the batch retained."""
        waiters = self._waiters
        if waiters is not None:  # a hand-off's barrier runs: wait for it too
            waiter = CallerFuture(loop=waiters[0].get_loop())
            waiters.append(waiter)
            return waiter
        running = self._running()
        if running is not None:
            return running
        if not self._pending and self._active is None:
            return None
        self._window = None
        self._paused = False
        if self._active is None and self._write_now is not None:
            batch = self._pending
            self._pending = []
            try:
                written = self._write_now(batch)
            except BaseException:
                self._retain(batch)
                raise
            if written is True:
                return None
            if written is not False:
                return self._follow(written, batch)
            self._pending = batch + self._pending
        barrier = self._barrier = asyncio.ensure_future(self._drain())
        barrier.add_done_callback(self._barrier_done)
        return barrier

    def _in_barrier(self) -> bool:
        """Whether a barrier runs (a drain task's, or a handed-off write's): it writes every
        event admitted before it ends."""
        return self._waiters is not None or self._running() is not None

    def _running(self) -> asyncio.Future[None] | None:
        """The drain task's barrier still running, if any. One that finished (its
        done-callbacks may not have run yet: other ready callbacks run first) covers none of
        the events admitted since, so it is never handed out again."""
        barrier = self._barrier
        return barrier if barrier is not None and not barrier.done() else None

    def _follow(self, write: asyncio.Future[None], batch: list[Pending]) -> CallerFuture:
        """The barrier of a handed-off write of ``batch``: it runs until the write lands
        (:meth:`_landed`, which settles each caller's future at once: no barrier future of
        its own, no loop callback per step)."""
        waiter = CallerFuture(loop=write.get_loop())
        self._waiters = [waiter]
        self._active = write
        self._handed = batch
        on_landing(write, self._landed)
        return waiter

    def _landed(self, error: BaseException | None) -> None:
        """A handed-off write ended: keep its batch if it failed (as a drain does) and end
        its barrier, after draining what was admitted meanwhile. If every caller stopped
        waiting, nobody hears of the write: it ends as a background write does."""
        batch, self._handed = self._handed, []
        waiters = self._waiters
        assert waiters is not None
        for waiter in waiters:
            if not waiter.done():
                break
        else:  # every caller stopped waiting
            self._background_landed(error, batch)  # (the barrier still runs meanwhile)
            self._end(waiters, None)
            return
        self._active = None
        if error is not None:
            self._retain(batch)
        elif self._pending:  # admitted meanwhile: the barrier covers them too
            self._waiters = None
            try:
                following = self.flush()
            except BaseException as e:
                error = e
            else:
                if following is not None:
                    following.add_done_callback(lambda after: self._end(waiters, outcome(after)))
                    return
        self._end(waiters, error)

    def _end(self, waiters: list[CallerFuture], error: BaseException | None) -> None:
        """End a hand-off's barrier: each caller still waiting gets its outcome (a failure
        the caller sees is marked retrieved, as a drain barrier's is)."""
        if self._waiters is waiters:
            self._waiters = None
        for waiter in waiters:
            if settle(waiter, error) and error is not None:
                waiter.exception()
        self._rearm()

    def cancel_wait(self) -> None:
        """Close the batching window and cancel its timer (a flush is about to drain, or the
        backend closes: nothing may be written in the background any more)."""
        self._cancel_timer()

    async def _drain(self) -> None:
        active = self._active
        if active is not None:
            await asyncio.wait([active])  # its outcome is handled by its own callback
        while self._pending:
            batch = self._pending
            self._pending = []
            try:
                await self._write(batch)
            except BaseException:
                self._retain(batch)
                raise

    def _retain(self, batch: list[Pending]) -> None:
        """Put a failed batch back before newer events; no automatic retry until the next
        event or flush."""
        self._pending = batch + self._pending
        self._paused = True

    def _barrier_done(self, barrier: asyncio.Future[None]) -> None:
        if self._barrier is barrier:
            self._barrier = None
        if not barrier.cancelled():
            barrier.exception()  # the caller sees it; mark it retrieved
        self._rearm()

    def _rearm(self) -> None:
        """After a barrier: open a window for what is still buffered (unless one is open, or
        a failed batch waits for the next event or flush)."""
        if self._pending and self._window is None and not self._paused:
            self._arm()

    def _arm(self) -> None:
        """Open a window of ``max_delay_ms`` from now. A timer still armed for an earlier
        window (a flush closed that window without cancelling it) fires first and re-arms
        itself for the rest of this one: so a session that checkpoints more often than the
        window costs one timer per window length, not an arm and a cancel per checkpoint.
        Without a timer (no running loop) no window opens: the events wait for a flush."""
        self._deadline_expired = False
        scheduler = self._scheduler
        loop = asyncio._get_running_loop()
        if self._timer is not None and self._timer_loop is not loop:
            self._timer = None  # armed on an event loop no longer running: it never fires
        if self._timer is None:
            self._timer = scheduler.call_later(self._max_delay_ms, self._expired)
            self._timer_loop = loop
        if self._timer is not None:
            self._window = scheduler.now_ms() + self._max_delay_ms

    def _cancel_timer(self) -> None:
        self._window = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        window = self._window
        if window is None:
            return  # the window this timer was armed for was closed
        left = window - self._scheduler.now_ms()
        if left > 0:  # armed for an earlier window: wait out the rest of this one
            self._timer = self._scheduler.call_later(left, self._expired)
            return
        self._window = None
        if self._barrier is not None or self._waiters is not None or not self._pending:
            return
        if self._active is not None:
            self._deadline_expired = True
            return
        self._start_background()

    def _start_background(self) -> None:
        batch = self._pending
        self._pending = []
        self._deadline_expired = False
        active = self._active = asyncio.ensure_future(self._write(batch))
        active.add_done_callback(lambda done: self._background_done(done, batch))

    def _background_done(self, done: asyncio.Future[Any], batch: list[Pending]) -> None:
        self._background_landed(outcome(done), batch)

    def _background_landed(self, error: BaseException | None, batch: list[Pending]) -> None:
        self._active = None
        if error is not None:
            self._retain(batch)
            self._cancel_timer()
            log.warning(
                "background write for session %s failed (buffered events retained): %s",
                self._label,
                "cancelled" if isinstance(error, asyncio.CancelledError) else error,
            )
            return
        if not self._in_barrier() and self._pending and self._deadline_expired:
            self._start_background()
