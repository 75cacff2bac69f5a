"""The I/O threads backends hand their blocking calls to."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agent_session.session.persistence.io_threads import IOThreads


async def test_a_call_runs_on_a_named_thread_and_its_result_settles_the_future() -> None:
    threads = IOThreads(2, "test-io")
    result = await threads.submit(lambda a, b: (a + b, threading.current_thread().name), 2, 3)
    assert result[0] == 5
    assert result[1].startswith("test-io-")
    assert result[1] != threading.current_thread().name
    threads.shutdown()


async def test_a_call_that_raises_raises_from_its_future() -> None:
    threads = IOThreads(1, "test-io")

    def fail() -> None:
        raise OSError(5, "injected")

    with pytest.raises(OSError, match="injected"):
        await threads.submit(fail)
    assert await threads.submit(lambda: "next") == "next"  # the thread survived it
    threads.shutdown()


async def test_busy_threads_start_more_up_to_the_size_and_no_further() -> None:
    threads = IOThreads(3, "test-io")
    release = threading.Event()
    running = threading.Semaphore(0)
    names: list[str] = []

    def block() -> None:
        names.append(threading.current_thread().name)
        running.release()
        release.wait()

    futures = [threads.submit(block) for _ in range(5)]
    try:
        for _ in range(3):  # three run at once: one thread per call while none is idle
            assert await asyncio.to_thread(running.acquire, True, 10)
    finally:
        release.set()
    assert len(set(names[:3])) == 3
    await asyncio.gather(*futures)
    assert len(set(names)) == 3  # the last two reused them
    threads.shutdown()


async def test_calls_made_one_after_another_reuse_one_thread() -> None:
    threads = IOThreads(8, "test-io")
    names = [await threads.submit(lambda: threading.current_thread().name) for _ in range(50)]
    assert set(names) == {"test-io-0"}  # each call ended leaving its thread free
    threads.shutdown()


async def test_calls_on_one_thread_run_in_submission_order() -> None:
    threads = IOThreads(1, "test-io")
    order: list[int] = []
    await asyncio.gather(*(threads.submit(order.append, i) for i in range(50)))
    assert order == list(range(50))
    threads.shutdown()


async def test_a_cancelled_future_does_not_stop_its_call() -> None:
    threads = IOThreads(1, "test-io")
    release, finished = threading.Event(), threading.Event()

    def slow() -> None:
        release.wait()
        finished.set()

    future = threads.submit(slow)
    future.cancel()
    release.set()
    await threads.submit(lambda: None)  # queued behind it: it ran to its end first
    assert finished.is_set()
    threads.shutdown()


def test_shutdown_ends_the_threads_after_the_calls_submitted_before_it() -> None:
    threads = IOThreads(2, "test-io-shutdown")
    done: list[int] = []

    async def run() -> list[threading.Thread]:
        await asyncio.gather(threads.submit(done.append, 1), threads.submit(done.append, 2))
        started = [t for t in threading.enumerate() if t.name.startswith("test-io-shutdown-")]
        threads.shutdown()
        return started

    started = asyncio.run(run())
    for thread in started:
        thread.join(10)
        assert not thread.is_alive()
    assert sorted(done) == [1, 2]


def test_a_call_that_ends_after_its_loop_closed_does_not_kill_the_thread() -> None:
    threads = IOThreads(1, "test-io")
    release = threading.Event()

    async def abandon() -> None:
        threads.submit(release.wait)  # the loop ends while it blocks

    asyncio.run(abandon())
    release.set()

    async def again() -> str:
        return await threads.submit(lambda: "alive")

    assert asyncio.run(again()) == "alive"
    threads.shutdown()


def test_a_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        IOThreads(0, "test-io")


async def test_a_call_after_shutdown_is_refused() -> None:
    threads = IOThreads(1, "test-io")
    await threads.submit(lambda: None)
    threads.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        threads.submit(lambda: None)
