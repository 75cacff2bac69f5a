"""The write-behind controller (the reference's acceptance cases 99-106).

Time is driven by a manual scheduler, never by sleeping: ``clock.advance(ms)`` fires the
timers that are due. Writes are gated futures the test resolves, so every interleaving is
explicit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from agent_session.session import Session, SessionEvent
from agent_session.session.persistence.write_behind import WriteBehindController


class ManualClock:
    """A scheduler whose time only moves when the test says so."""

    def __init__(self) -> None:
        self.now = 0
        self.timers: list[tuple[float, Callable[[], None], Handle]] = []

    def call_later(self, delay_ms: float, callback: Callable[[], None]) -> Handle:
        handle = Handle()
        self.timers.append((self.now + delay_ms, callback, handle))
        return handle

    def now_ms(self) -> float:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms
        due = [t for t in self.timers if t[0] <= self.now and not t[2].cancelled]
        self.timers = [t for t in self.timers if t not in due and not t[2].cancelled]
        for _, callback, _ in sorted(due, key=lambda t: t[0]):
            callback()

    @property
    def armed(self) -> list[float]:
        return [when for when, _, handle in self.timers if not handle.cancelled]


class Handle:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Storage:
    """Records batches; each write waits for the test to release it when ``gated``."""

    def __init__(self, *, gated: bool = False) -> None:
        self.batches: list[list[int]] = []
        self.attempts: list[list[int]] = []
        self.gated = gated
        self.gates: list[asyncio.Future[None]] = []
        self.fail_next: list[Exception] = []

    async def write(self, batch: list[SessionEvent]) -> None:
        seqs = [e.seq for e in batch]
        self.attempts.append(seqs)
        if self.gated:
            gate = asyncio.get_running_loop().create_future()
            self.gates.append(gate)
            await gate
        if self.fail_next:
            raise self.fail_next.pop(0)
        self.batches.append(seqs)

    def release(self, index: int = -1) -> None:
        self.gates[index].set_result(None)


def events(n: int) -> list[SessionEvent]:
    session = Session.create("wb")
    return [session.append("plugin/e", {"i": i}) for i in range(n)]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


async def test_case_99_one_fixed_window_from_the_first_event(clock: ManualClock) -> None:
    storage = Storage()
    controller = WriteBehindController(storage.write, scheduler=clock)
    e0, e1 = events(2)
    controller.enqueue(e0)
    clock.advance(150)
    controller.enqueue(e1)
    assert controller.window_ends_ms == 200  # the second event did not extend the window
    clock.advance(49)
    await settle()
    assert storage.batches == []
    clock.advance(1)
    await settle()
    assert storage.batches == [[0, 1]]
    assert not controller.has_work


async def test_case_100_twenty_events_ten_ms_apart_make_one_batch(clock: ManualClock) -> None:
    storage = Storage()
    controller = WriteBehindController(storage.write, scheduler=clock)
    for event in events(20):
        controller.enqueue(event)
        clock.advance(10)
    await settle()
    assert storage.batches == [list(range(20))]


async def test_case_101_concurrent_flushes_share_one_barrier_that_drains_tails(
    clock: ManualClock,
) -> None:
    storage = Storage(gated=True)
    controller = WriteBehindController(storage.write, scheduler=clock)
    e0, e1 = events(2)
    controller.enqueue(e0)
    first, second = controller.flush(), controller.flush()
    assert first is second
    assert first is not None
    await settle()
    controller.enqueue(e1)  # admitted while the barrier's write is in flight
    storage.release(0)
    await settle()
    assert not first.done()
    storage.release(1)
    await first
    assert storage.batches == [[0], [1]]
    assert controller.window_ends_ms is None


async def test_case_102_idle_flush_completes_without_io_and_new_work_gets_a_window(
    clock: ManualClock,
) -> None:
    storage = Storage()
    controller = WriteBehindController(storage.write, scheduler=clock)
    assert controller.flush() is None
    (e0,) = events(1)
    controller.enqueue(e0)
    assert controller.window_ends_ms == 200
    clock.advance(200)
    await settle()
    assert storage.batches == [[0]]


async def test_frequent_checkpoints_share_one_timer_and_each_window_ends_on_time(
    clock: ManualClock,
) -> None:
    # A flush closes the window without cancelling its timer: ten checkpoints within one
    # window length leave the first window's timer the only one armed. When it fires, it waits
    # out the rest of the window open then, which still ends max_delay after its first event.
    storage = Storage()
    controller = WriteBehindController(storage.write, scheduler=clock)
    batch = events(11)
    for event in batch[:10]:
        controller.enqueue(event)
        clock.advance(10)
        barrier = controller.flush()
        assert barrier is not None
        await barrier
    assert clock.armed == [200]
    clock.advance(50)
    controller.enqueue(batch[10])  # at 150: its window ends at 350
    assert controller.window_ends_ms == 350
    clock.advance(50)  # the old timer fires at 200 and re-arms for the rest
    assert clock.armed == [350]
    clock.advance(149)
    await settle()
    assert storage.batches == [[i] for i in range(10)]
    clock.advance(1)
    await settle()
    assert storage.batches == [[i] for i in range(11)]
    assert controller.window_ends_ms is None


def test_a_window_opened_on_a_later_event_loop_still_ends() -> None:
    # The first loop's flush closes its window and leaves the timer armed; that loop then ends,
    # so the timer never fires. An event on the next loop opens a window that must get a timer
    # of its own (the real loop's scheduler, 10 ms).
    batches: list[list[int]] = []
    written: list[asyncio.Event] = []

    async def write(batch: list[SessionEvent]) -> None:
        batches.append([e.seq for e in batch])
        if written:
            written[0].set()

    controller = WriteBehindController(write, max_delay_ms=10)
    e0, e1 = events(2)

    async def first_loop() -> None:
        controller.enqueue(e0)
        barrier = controller.flush()
        assert barrier is not None
        await barrier

    async def second_loop() -> None:
        written.append(asyncio.Event())
        controller.enqueue(e1)
        await asyncio.wait_for(written[0].wait(), timeout=10)

    asyncio.run(first_loop())
    asyncio.run(second_loop())
    assert batches == [[0], [1]]


async def test_case_103_expired_tail_is_written_right_after_the_active_write(
    clock: ManualClock,
) -> None:
    storage = Storage(gated=True)
    controller = WriteBehindController(storage.write, scheduler=clock)
    e0, e1, e2 = events(3)
    controller.enqueue(e0)
    clock.advance(200)  # background write of [0] starts and hangs
    await settle()
    controller.enqueue(e1)  # tail window: 200 -> 400
    clock.advance(250)  # tail window expires during the active write
    await settle()
    assert storage.attempts == [[0]]
    storage.release(0)
    await settle()
    assert storage.attempts == [[0], [1]]  # immediately, not at a new window
    storage.release(1)
    await settle()
    controller.enqueue(e2)  # unexpired tail case: arms its own full window
    assert controller.window_ends_ms == 650


async def test_case_103_unexpired_tail_keeps_its_window(clock: ManualClock) -> None:
    storage = Storage(gated=True)
    controller = WriteBehindController(storage.write, scheduler=clock)
    e0, e1 = events(2)
    controller.enqueue(e0)
    clock.advance(200)
    await settle()
    clock.advance(10)
    controller.enqueue(e1)  # window until 410
    storage.release(0)
    await settle()
    assert storage.attempts == [[0]]
    clock.advance(199)
    await settle()
    assert storage.attempts == [[0]]
    clock.advance(1)
    await settle()
    assert storage.attempts == [[0], [1]]


async def test_case_104_failure_pauses_retries_and_keeps_order(
    clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    storage = Storage()
    storage.fail_next.append(OSError("disk on fire"))
    controller = WriteBehindController(storage.write, scheduler=clock, label='"s"')
    e0, e1 = events(2)
    with caplog.at_level(logging.WARNING, logger="session.persistence"):
        controller.enqueue(e0)
        clock.advance(200)
        await settle()
        clock.advance(1000)
        await settle()
    assert storage.attempts == [[0]]  # no automatic retry
    assert controller.window_ends_ms is None
    failures = [r for r in caplog.records if "background write" in r.getMessage()]
    assert len(failures) == 1
    assert "disk on fire" in failures[0].getMessage()
    controller.enqueue(e1)  # the next event re-opens a window, failed batch first
    assert controller.window_ends_ms == 1400
    clock.advance(200)
    await settle()
    assert storage.batches == [[0, 1]]


async def test_case_105_flush_retries_an_overlapping_background_failure(
    clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    storage = Storage(gated=True)
    storage.fail_next.append(OSError("transient"))
    controller = WriteBehindController(storage.write, scheduler=clock)
    (e0,) = events(1)
    with caplog.at_level(logging.WARNING, logger="session.persistence"):
        controller.enqueue(e0)
        clock.advance(200)
        await settle()
        barrier = controller.flush()
        assert barrier is not None
        storage.release(0)  # the background attempt fails
        await settle()
        storage.release(1)  # the barrier's retry succeeds
        await barrier
    assert storage.attempts == [[0], [0]]
    assert storage.batches == [[0]]
    assert sum("background write" in r.getMessage() for r in caplog.records) == 1


async def test_case_106_barrier_failure_is_raised_not_logged_and_batch_kept(
    clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    storage = Storage()
    storage.fail_next.append(OSError("full disk"))
    controller = WriteBehindController(storage.write, scheduler=clock)
    e0, e1 = events(2)
    controller.enqueue(e0)
    controller.enqueue(e1)
    with caplog.at_level(logging.WARNING, logger="session.persistence"):
        barrier = controller.flush()
        assert barrier is not None
        with pytest.raises(OSError, match="full disk"):
            await barrier
    assert not caplog.records
    assert [e.seq for e in controller.pending] == [0, 1]
    assert controller.window_ends_ms is None  # paused: only an event or a flush retries
    retry = controller.flush()
    assert retry is not None
    await retry
    assert storage.batches == [[0, 1]]


async def test_large_failed_batch_is_retained_in_order(clock: ManualClock) -> None:
    storage = Storage()
    storage.fail_next.append(OSError("nope"))
    controller = WriteBehindController(storage.write, scheduler=clock)
    session = Session.create("big")
    for i in range(150_000):
        controller.enqueue(session.append("plugin/e", i))
    barrier = controller.flush()
    assert barrier is not None
    with pytest.raises(OSError):
        await barrier
    assert [e.seq for e in controller.pending] == list(range(150_000))


class WriteNow:
    """A synchronous writer that takes, declines or fails batches as the test says."""

    def __init__(self) -> None:
        self.accept = True
        self.fail_next: list[Exception] = []
        self.batches: list[list[int]] = []
        self.offered: list[list[int]] = []

    def __call__(self, batch: list[SessionEvent]) -> bool:
        seqs = [e.seq for e in batch]
        self.offered.append(seqs)
        if self.fail_next:
            raise self.fail_next.pop(0)
        if not self.accept:
            return False
        self.batches.append(seqs)
        return True


async def test_write_now_completes_the_barrier_before_flush_returns(clock: ManualClock) -> None:
    storage, now = Storage(), WriteNow()
    controller = WriteBehindController(storage.write, write_now=now, scheduler=clock)
    for event in events(3):
        controller.enqueue(event)
    assert controller.window_ends_ms == 200
    assert controller.flush() is None  # done: no future, no task
    assert now.batches == [[0, 1, 2]]
    assert storage.attempts == []
    assert not controller.has_work
    assert controller.window_ends_ms is None  # the window is gone with the events it was for


async def test_declined_write_now_falls_back_to_the_async_writer(clock: ManualClock) -> None:
    storage, now = Storage(), WriteNow()
    now.accept = False
    controller = WriteBehindController(storage.write, write_now=now, scheduler=clock)
    for event in events(2):
        controller.enqueue(event)
    barrier = controller.flush()
    assert barrier is not None
    await barrier
    assert now.offered == [[0, 1]]
    assert storage.batches == [[0, 1]]


async def test_write_now_is_not_used_while_a_background_write_is_in_flight(
    clock: ManualClock,
) -> None:
    storage, now = Storage(gated=True), WriteNow()
    controller = WriteBehindController(storage.write, write_now=now, scheduler=clock)
    e0, e1 = events(2)
    controller.enqueue(e0)
    clock.advance(200)  # the background write of [0] starts and waits at its gate
    await settle()
    controller.enqueue(e1)
    barrier = controller.flush()
    assert barrier is not None  # ordering: [1] may not overtake the in-flight [0]
    assert now.offered == []
    storage.release(0)
    await settle()
    storage.release(1)
    await barrier
    assert storage.batches == [[0], [1]]


async def test_failed_write_now_raises_at_flush_and_keeps_the_batch(clock: ManualClock) -> None:
    storage, now = Storage(), WriteNow()
    now.fail_next.append(OSError("fsync failed"))
    controller = WriteBehindController(storage.write, write_now=now, scheduler=clock)
    for event in events(2):
        controller.enqueue(event)
    with pytest.raises(OSError, match="fsync failed"):
        controller.flush()
    assert [e.seq for e in controller.pending] == [0, 1]
    assert controller.window_ends_ms is None  # paused, as after a failed barrier
    assert controller.flush() is None  # the retry takes the same batch, in order
    assert now.batches == [[0, 1]]


class HandOff:
    """A ``write_now`` that hands each batch off: a future the test lands or fails."""

    def __init__(self) -> None:
        self.offered: list[list[int]] = []
        self.landed: list[list[int]] = []
        self.writes: list[asyncio.Future[None]] = []

    def __call__(self, batch: list[SessionEvent]) -> asyncio.Future[None]:
        seqs = [e.seq for e in batch]
        self.offered.append(seqs)
        write = asyncio.get_running_loop().create_future()
        write.add_done_callback(lambda done: None if done.exception() else self.landed.append(seqs))
        self.writes.append(write)
        return write


def handing_off(
    clock: ManualClock, label: str = ""
) -> tuple[Storage, HandOff, WriteBehindController]:
    """A controller whose ``write_now`` hands every batch off (the task path's writer is
    ``Storage``'s, for tests that check it is not used)."""
    storage, hand = Storage(), HandOff()
    controller = WriteBehindController(storage.write, write_now=hand, scheduler=clock, label=label)
    return storage, hand, controller


async def test_a_handed_off_write_is_the_barrier_without_a_task(clock: ManualClock) -> None:
    storage, hand, controller = handing_off(clock)
    for event in events(2):
        controller.enqueue(event)
    tasks = asyncio.all_tasks()
    barrier = controller.flush()
    assert barrier is not None
    assert not isinstance(barrier, asyncio.Task)
    assert asyncio.all_tasks() == tasks
    other = controller.flush()  # a concurrent flush waits on the same write, with a future
    assert other is not None  # of its own
    assert other is not barrier
    assert len(hand.offered) == 1
    assert controller.has_work
    assert controller.window_ends_ms is None
    await settle()
    assert not barrier.done()
    assert not other.done()
    hand.writes[0].set_result(None)
    await barrier
    await other
    assert hand.landed == [[0, 1]]
    assert storage.attempts == []
    assert not controller.has_work


async def admitted_during_a_hand_off(
    clock: ManualClock,
) -> tuple[HandOff, WriteBehindController, asyncio.Future[None]]:
    """A hand-off of event 0 that landed while events 1 and 2 were admitted: its barrier
    now waits for their write (the second hand-off)."""
    _, hand, controller = handing_off(clock)
    e0, e1, e2 = events(3)
    controller.enqueue(e0)
    barrier = controller.flush()
    assert barrier is not None
    controller.enqueue(e1)
    controller.enqueue(e2)
    assert controller.window_ends_ms is None  # the running barrier drains them
    hand.writes[0].set_result(None)
    await settle()
    assert hand.offered == [[0], [1, 2]]
    assert not barrier.done()
    return hand, controller, barrier


async def test_events_admitted_during_a_hand_off_are_drained_before_its_barrier(
    clock: ManualClock,
) -> None:
    hand, controller, barrier = await admitted_during_a_hand_off(clock)
    hand.writes[1].set_result(None)
    await barrier
    assert hand.landed == [[0], [1, 2]]
    assert not controller.has_work


async def test_a_hand_off_whose_following_write_fails_raises_at_its_barrier(
    clock: ManualClock,
) -> None:
    """The barrier covers the events admitted while its write was in flight: when their
    write fails, the barrier's caller hears of it and they stay pending, in order."""
    hand, controller, barrier = await admitted_during_a_hand_off(clock)
    hand.writes[1].set_exception(OSError("disk full"))
    with pytest.raises(OSError, match="disk full"):
        await barrier
    assert hand.landed == [[0]]
    assert [e.seq for e in controller.pending] == [1, 2]


async def test_a_failed_hand_off_raises_at_its_barrier_and_keeps_the_batch_in_order(
    clock: ManualClock,
) -> None:
    _, hand, controller = handing_off(clock)
    e0, e1, e2 = events(3)
    controller.enqueue(e0)
    controller.enqueue(e1)
    barrier = controller.flush()
    assert barrier is not None
    controller.enqueue(e2)
    hand.writes[0].set_exception(OSError("fsync failed"))
    with pytest.raises(OSError, match="fsync failed"):
        await barrier
    assert [e.seq for e in controller.pending] == [0, 1, 2]
    assert controller.window_ends_ms is None  # paused, as after a failed barrier
    retry = controller.flush()
    assert retry is not None
    assert retry is not barrier
    hand.writes[1].set_result(None)
    await retry
    assert hand.offered[1] == [0, 1, 2]
    assert hand.landed == [[0, 1, 2]]


async def test_a_flush_right_after_a_drain_finished_covers_the_new_events(
    clock: ManualClock,
) -> None:
    """Between the drain's end and its done-callbacks, other ready callbacks run: a flush
    there must not be handed the finished barrier for events it never wrote."""
    storage = Storage(gated=True)
    controller = WriteBehindController(storage.write, scheduler=clock)
    e0, e1 = events(2)
    controller.enqueue(e0)
    first = controller.flush()
    assert first is not None
    await settle()
    seen: list[asyncio.Future[None] | None] = []

    def probe() -> None:  # runs after the drain finished, before its callbacks
        controller.enqueue(e1)
        seen.append(controller.flush())

    storage.release(0)
    asyncio.get_running_loop().call_soon(probe)
    await first
    await settle()
    second = seen[0]
    assert second is not None
    assert second is not first
    storage.release(1)
    await second
    assert storage.batches == [[0], [1]]


@pytest.mark.parametrize("admitted", [False, True], ids=["alone", "with-events-admitted"])
async def test_a_hand_off_barrier_a_waiter_cancelled_does_not_wedge_the_controller(
    clock: ManualClock, admitted: bool
) -> None:
    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: errors.append(context))
    _, hand, controller = handing_off(clock)
    e0, e1 = events(2)
    controller.enqueue(e0)
    barrier = controller.flush()
    assert barrier is not None
    barrier.cancel()  # what awaiting it directly does when the waiter is cancelled
    await settle()
    if admitted:
        controller.enqueue(e1)
    hand.writes[0].set_result(None)  # the write lands all the same
    await settle()
    if not admitted:
        controller.enqueue(e1)
    again = controller.flush()
    assert again is not None
    assert not again.cancelled()
    hand.writes[-1].set_result(None)
    await again
    await settle()
    assert hand.landed == [[0], [1]]
    assert not controller.has_work
    assert errors == []


async def test_a_caller_that_stops_waiting_on_a_hand_off_leaves_the_others_waiting(
    clock: ManualClock,
) -> None:
    _, hand, controller = handing_off(clock)
    e0, e1 = events(2)
    controller.enqueue(e0)
    first = controller.flush()
    second = controller.flush()
    assert first is not None
    assert second is not None
    first.cancel()  # what a cancelled caller awaiting it directly does
    controller.enqueue(e1)  # admitted meanwhile: the barrier drains it for the second
    hand.writes[0].set_result(None)
    await settle()
    assert hand.offered == [[0], [1]]
    assert not second.done()
    hand.writes[1].set_exception(OSError("fsync failed"))
    with pytest.raises(OSError, match="fsync failed"):
        await second
    assert first.cancelled()
    assert [e.seq for e in controller.pending] == [1]


async def test_a_failed_hand_off_whose_barrier_was_cancelled_keeps_its_batch_and_says_so(
    clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    _, hand, controller = handing_off(clock, label='"s"')
    e0, e1 = events(2)
    controller.enqueue(e0)
    controller.enqueue(e1)
    barrier = controller.flush()
    assert barrier is not None
    barrier.cancel()
    with caplog.at_level(logging.WARNING, logger="session.persistence"):
        hand.writes[0].set_exception(OSError("fsync failed"))
        await settle()
    assert [e.seq for e in controller.pending] == [0, 1]
    assert 'session "s" failed (buffered events retained): fsync failed' in caplog.text
    retry = controller.flush()
    assert retry is not None
    hand.writes[1].set_result(None)
    await retry
    assert hand.landed == [[0, 1]]
