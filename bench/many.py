"""Many sessions on one event loop: each runs the workload's steps concurrently with the
others, awaiting its own flush after every step."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from agent_session.session import Runtime
from agent_session.session.persistence.service import SessionPersistence
from bench.workload import run_steps

__all__ = ["Many", "many_sessions"]


@dataclass(frozen=True, slots=True)
class Many:
    """What one many-session run measured."""

    per_second: float
    """Checkpoints (steps, each ended by its flush) per second, over all sessions."""
    p50_ms: float
    p99_ms: float
    """Latency of one ``await flush(session)``."""
    p99_later_ms: float
    """The p99 of every flush but each session's first (which creates its log)."""
    busy: float
    """The event loop thread's CPU time over the wall time (1.0: never idle)."""


async def many_sessions(
    open_stack: Callable[[], tuple[Runtime, SessionPersistence]],
    sessions: int = 16,
    steps: int = 50,
    chunks: int = 20,
) -> Many:
    runtime, backend = open_stack()
    live = [runtime.sessions.create(f"c{i}") for i in range(sessions)]
    cpu, start = time.thread_time(), time.perf_counter()
    runs = await asyncio.gather(*(run_steps(runtime, s, steps, chunks) for s in live))
    elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu
    await backend.aclose()
    flushes = sorted(f for _, each in runs for f in each)
    later = sorted(f for _, each in runs for f in each[1:]) or flushes
    return Many(
        sessions * steps / elapsed,
        statistics.median(flushes) * 1000,
        _p99(flushes) * 1000,
        _p99(later) * 1000,
        cpu / elapsed,
    )


def _p99(ordered: list[float]) -> float:
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
