"""Where the JSONL backend's checkpoint I/O runs: on the event-loop thread while one session is
live and appends are fast, in worker threads otherwise, and the same durability either way.

The seam records which thread made each ``fsync``; faults are injected through it too.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
import time
from pathlib import Path

import pytest

from agent_session.persistence_jsonl import FileOps, JsonlPersistence
from agent_session.session import Runtime, Session
from agent_session.testing.logs import closed_turn
from tests.test_jsonl_faults import SEAMS


class ThreadLog(FileOps):
    """Records the thread of every file ``fsync``; ``slow_ms`` makes them slow (a slow disk)."""

    def __init__(self) -> None:
        self.fsync_threads: list[int] = []
        self.slow_ms = 0.0

    def fsync(self, fd: int) -> None:
        self.fsync_threads.append(threading.get_ident())
        if self.slow_ms:
            time.sleep(self.slow_ms / 1000)  # models the disk's latency, not a synchronization
        super().fsync(fd)


GENEROUS_MS = 10_000.0
"""An inline budget no real fsync exceeds, for tests about the other conditions (a shared CI
disk's fsync does exceed the 2 ms default now and then)."""


def stack(
    root: Path, ops: FileOps, inline_fsync_budget_ms: float = GENEROUS_MS
) -> tuple[Runtime, JsonlPersistence]:
    runtime = Runtime()
    backend = JsonlPersistence(root, ops=ops, inline_fsync_budget_ms=inline_fsync_budget_ms)
    runtime.install(backend)
    return runtime, backend


async def checkpoints(runtime: Runtime, session: Session, turns: range) -> None:
    for turn in turns:
        closed_turn(session, turn)
        await runtime.sessions.flush(session)


def on_disk(backend: JsonlPersistence, session: Session) -> bytes:
    with open(backend.locate(session.header), "rb") as f:
        return f.read()


async def test_one_live_session_checkpoints_on_the_loop_thread(tmp_path: Path) -> None:
    ops = ThreadLog()
    runtime, backend = stack(tmp_path, ops)
    session = runtime.sessions.create("one")
    await checkpoints(runtime, session, range(1, 6))
    loop_thread = threading.get_ident()
    # The first write materializes off the loop and measures the disk; the rest run inline.
    assert ops.fsync_threads[0] != loop_thread
    assert ops.fsync_threads[1:] == [loop_thread] * 4
    await backend.aclose()
    reread = await JsonlPersistence(tmp_path).read_from("one", 0)
    assert [e.encode() for e in reread] == [e.encode() for e in session.events]


async def test_several_live_sessions_write_from_worker_threads(tmp_path: Path) -> None:
    ops = ThreadLog()
    runtime, backend = stack(tmp_path, ops)
    first, second = runtime.sessions.create("a"), runtime.sessions.create("b")
    for turn in range(1, 4):
        closed_turn(first, turn)
        closed_turn(second, turn)
        await runtime.sessions.flush(first)
        await runtime.sessions.flush(second)
    assert threading.get_ident() not in ops.fsync_threads  # their fsyncs may overlap
    await runtime.sessions.dispose(second)
    await backend.inspect("b")  # returns once b's retirement (its last flush) is done
    ops.fsync_threads.clear()
    await checkpoints(runtime, first, range(4, 6))  # alone again: inline again
    assert ops.fsync_threads == [threading.get_ident()] * 2
    await backend.aclose()


async def test_with_several_live_sessions_a_checkpoint_is_handed_to_the_storage_io_threads(
    tmp_path: Path,
) -> None:
    """The hand-off (``start_append``, no drain task) runs on the storage's own threads; the
    drain task's path would run on the loop's default executor."""
    ops = ThreadLog()
    runtime, backend = stack(tmp_path, ops)
    first, second = runtime.sessions.create("a"), runtime.sessions.create("b")
    await checkpoints(runtime, first, range(1, 2))  # both logs exist from here on
    await checkpoints(runtime, second, range(1, 2))
    closed_turn(first, 2)
    closed_turn(second, 2)
    await asyncio.gather(runtime.sessions.flush(first), runtime.sessions.flush(second))
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    checkpoint_threads = [names.get(t, "") for t in ops.fsync_threads[-2:]]
    assert all(name.startswith("session-jsonl") for name in checkpoint_threads)
    await backend.aclose()
    for session in (first, second):
        reread = await JsonlPersistence(tmp_path).read_from(session.id, 0)
        assert [e.encode() for e in reread] == [e.encode() for e in session.events]


async def test_a_zero_budget_keeps_all_io_off_the_loop(tmp_path: Path) -> None:
    ops = ThreadLog()
    runtime, backend = stack(tmp_path, ops, inline_fsync_budget_ms=0)
    session = runtime.sessions.create("one")
    await checkpoints(runtime, session, range(1, 5))
    assert len(ops.fsync_threads) >= 4
    assert threading.get_ident() not in ops.fsync_threads
    await backend.aclose()


async def test_a_slow_disk_moves_checkpoints_off_the_loop(tmp_path: Path) -> None:
    ops = ThreadLog()
    runtime, backend = stack(tmp_path, ops, inline_fsync_budget_ms=200)
    session = runtime.sessions.create("one")
    await checkpoints(runtime, session, range(1, 3))
    loop_thread = threading.get_ident()
    assert ops.fsync_threads[-1] == loop_thread
    ops.slow_ms = 300  # the disk turns slow: this inline checkpoint is the last one
    await checkpoints(runtime, session, range(3, 6))
    on_loop = [thread == loop_thread for thread in ops.fsync_threads]
    assert on_loop[-3:] == [True, False, False]  # any worker thread of the pool
    ops.slow_ms = 0  # and back once the disk is fast again
    await checkpoints(runtime, session, range(6, 8))
    on_loop = [thread == loop_thread for thread in ops.fsync_threads]
    assert on_loop[-2:] == [False, True]
    await backend.aclose()


@pytest.mark.parametrize("seam", sorted(SEAMS))
@pytest.mark.parametrize("inline", [True, False], ids=["inline", "worker"])
@pytest.mark.parametrize("mode", ["eio", "enospc", "short"])
async def test_a_failed_checkpoint_raises_keeps_its_events_and_the_retry_writes_them(
    tmp_path: Path, mode: str, inline: bool, seam: str
) -> None:
    """For every mutating call of a live session's later checkpoints: the failing flush
    raises, the file holds exactly the earlier checkpoints, and the next flush writes all."""
    budget = GENEROUS_MS if inline else 0.0
    faulty = SEAMS[seam]
    probe = faulty(10**9, once=True)
    runtime, backend = stack(tmp_path / "probe", probe, inline_fsync_budget_ms=budget)
    session = runtime.sessions.create("f")
    await checkpoints(runtime, session, range(1, 3))
    before = probe.calls
    await checkpoints(runtime, session, range(3, 4))
    per_checkpoint = probe.calls - before
    await backend.aclose()
    assert per_checkpoint >= (1 if seam == "dsync" else 2)  # a write and a sync, or the one
    for k in range(1, per_checkpoint + 1):
        root = tmp_path / f"{mode}-{k}"
        ops = faulty(10**9, once=True, mode=mode)
        runtime, backend = stack(root, ops, inline_fsync_budget_ms=budget)
        session = runtime.sessions.create("f")
        await checkpoints(runtime, session, range(1, 3))
        durable = on_disk(backend, session)
        ops.k = ops.calls + k
        closed_turn(session, 3)
        failure: OSError | None = None
        try:
            await runtime.sessions.flush(session)
        except OSError as error:
            failure = error
        if failure is None:
            assert mode == "short", f"k={k}: no failure"  # write_all finished a short write
        else:
            assert failure.errno in (errno.EIO, errno.ENOSPC)
            assert on_disk(backend, session) == durable, f"k={k}: a failed batch left bytes"
            await runtime.sessions.flush(session)  # the retry (the fault was once)
        assert on_disk(backend, session).startswith(durable)
        await backend.aclose()
        reread = await JsonlPersistence(root).read_from("f", 0)
        assert [e.encode() for e in reread] == [e.encode() for e in session.events], f"k={k}"
        assert os.path.exists(root / "_no-cwd" / "f" / "session.jsonl")
