"""The per-id FIFO locks the service serializes writes with."""

from __future__ import annotations

import asyncio

import pytest

from agent_session.session.persistence.keyed_locks import KeyedLocks


async def test_holders_get_the_lock_in_the_order_they_asked() -> None:
    locks = KeyedLocks()
    order: list[int] = []
    gate = asyncio.Event()

    async def holder(n: int) -> None:
        async with locks.hold("a"):
            order.append(n)
            if n == 0:
                await gate.wait()

    tasks = [asyncio.create_task(holder(n)) for n in range(5)]
    for _ in range(3):
        await asyncio.sleep(0)
    assert order == [0]
    assert locks.held("a")
    assert not locks.held("b")
    gate.set()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]
    assert not locks.busy


async def test_take_succeeds_only_on_an_idle_id_and_waiters_queue_behind_it() -> None:
    locks = KeyedLocks()
    assert locks.take("a")
    assert not locks.take("a")
    assert locks.take("b")
    entered = asyncio.Event()

    async def waiter() -> None:
        async with locks.hold("a"):
            entered.set()

    task = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    assert not entered.is_set()
    locks.give("a")
    await task
    assert entered.is_set()
    assert not locks.held("a")
    assert locks.held("b")
    locks.give("b")
    assert not locks.busy


async def test_a_failing_holder_does_not_poison_the_lock() -> None:
    locks = KeyedLocks()
    with pytest.raises(RuntimeError):
        async with locks.hold("a"):
            raise RuntimeError("boom")
    assert not locks.busy
    async with locks.hold("a"):
        assert locks.held("a")


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    locks = KeyedLocks()
    assert locks.take("a")
    cancelled = asyncio.create_task(locks.acquire("a"))
    after: list[str] = []

    async def next_in_line() -> None:
        async with locks.hold("a"):
            after.append("in")

    task = asyncio.create_task(next_in_line())
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    locks.give("a")
    await task
    assert after == ["in"]
    assert not locks.busy


async def test_a_waiter_cancelled_after_the_handover_passes_the_lock_on() -> None:
    locks = KeyedLocks()
    assert locks.take("a")
    first = asyncio.create_task(locks.acquire("a"))
    second = asyncio.create_task(locks.acquire("a"))
    await asyncio.sleep(0)
    locks.give("a")  # hands it to ``first``, which is cancelled before it runs
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await second  # got it from ``first``
    assert locks.held("a")
    locks.give("a")
    assert not locks.busy


async def test_drain_waits_for_every_id() -> None:
    locks = KeyedLocks()
    assert locks.take("a")
    assert locks.take("b")
    drained = asyncio.create_task(locks.drain())
    await asyncio.sleep(0)
    assert not drained.done()
    locks.give("a")
    await asyncio.sleep(0)
    assert not drained.done()
    locks.give("b")
    await drained
    assert not locks.busy
