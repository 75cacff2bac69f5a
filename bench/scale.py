"""``python -m bench --scale``: how the figures grow. Many sessions on one event loop (1 to
256: checkpoints per second, flush latency p50/p99, the loop thread's busy share, memory per
idle live session), and one session's log from 1,000 to 1,000,000 events (cold load time,
and the cost of an append once the log is that long)."""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from agent_session.persistence_jsonl import JsonlPersistence
from bench.many import Many, many_sessions
from bench.stacks import stack
from bench.workload import append_step, chunk

__all__ = ["SESSIONS", "SIZES", "scale"]

SESSIONS = (1, 4, 16, 64, 256)
SIZES = (1_000, 10_000, 100_000, 1_000_000)
STEP_CHUNKS = 20
"""Chunks per step of the logs that grow: a step is 23 events."""


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


IDLE_CHILD = """
import asyncio, sys
from bench.scale import idle_sessions
print(asyncio.run(idle_sessions(sys.argv[1], int(sys.argv[2]))))
"""


async def idle_rss_per_session(root: str, count: int = 1000) -> float:
    """Bytes of RSS per live session that ran one short turn and is idle, measured in a
    fresh process (this one's freed memory would be reused)."""
    done = subprocess.run(
        [sys.executable, "-c", IDLE_CHILD, root, str(count)],
        capture_output=True,
        text=True,
        check=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    return float(done.stdout.strip())


async def idle_sessions(root: str, count: int) -> float:
    """In this process: RSS growth per session over ``count`` idle live sessions."""
    runtime, backend = stack(root)
    warm = runtime.sessions.create("warm-up")
    warm.append("turn/start", {"turn": 1})
    await runtime.sessions.flush(warm)
    before = _rss_bytes()
    for index in range(count):
        session = runtime.sessions.create(f"idle{index}")
        session.append("turn/start", {"turn": 1})
        append_step(session, 1, 3)
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        await runtime.sessions.flush(session)
    grown = _rss_bytes() - before
    await backend.aclose()
    return grown / count


async def grown_log(root: str, events: int) -> tuple[float, float]:
    """(cold load ms, µs per appended chunk, appends and their flush, after the log reached
    ``events``) for a session of whole steps."""
    runtime, backend = stack(root)
    session = runtime.sessions.create("long")
    session.append("turn/start", {"turn": 1})
    step = 0
    while session.seq + STEP_CHUNKS + 3 <= events:
        step += 1
        append_step(session, step, STEP_CHUNKS)
        if step % 200 == 0:
            await runtime.sessions.flush(session)
    await runtime.sessions.flush(session)
    written = session.seq
    await backend.aclose()
    del session, runtime

    cold = JsonlPersistence(root)
    start = time.perf_counter()
    inspected = await cold.inspect("long")
    load = time.perf_counter() - start
    assert len(inspected.events) >= written
    await cold.aclose()

    runtime, backend = stack(root)
    live = await runtime.sessions.resume("long")
    await runtime.sessions.flush(live)  # the resume's own write (its end-seed), done first
    appends = 10_000
    live.append("turn/start", {"turn": 2})
    live.append("step/start", {"turn": 2, "step": 1})
    start = time.perf_counter()
    for i in range(appends):
        live.append("assistant/chunk", chunk(2, 1, i))
    await runtime.sessions.flush(live)
    append = time.perf_counter() - start
    await backend.aclose()
    return load * 1000, append / appends * 1e6


async def _many(root: str, *, sessions: int, steps: int) -> Many:
    return await many_sessions(lambda: stack(root), sessions, steps, STEP_CHUNKS)


async def _fresh(measure: Callable[[str], Awaitable[Any]]) -> Any:
    root = tempfile.mkdtemp(prefix="bench-scale-")
    try:
        return await measure(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def scale() -> list[str]:
    """The two tables, as Markdown lines."""
    lines = [
        "| sessions | checkpoints/s | flush p50 ms | flush p99 ms | loop busy |",
        "|---|---|---|---|---|",
    ]
    for count in SESSIONS:
        steps = max(8, 1600 // count)
        many = await _fresh(functools.partial(_many, sessions=count, steps=steps))
        lines.append(
            f"| {count} | {many.per_second:,.0f} | {many.p50_ms:.2f} | {many.p99_ms:.2f} "
            f"| {many.busy:.0%} |"
        )
    idle = await _fresh(idle_rss_per_session)
    lines += ["", f"RSS per idle live session (1,000 sessions): {idle / 1024:.1f} KiB", ""]
    lines += ["| events in the log | cold load ms | µs per append after it |", "|---|---|---|"]
    loads = []
    await _fresh(functools.partial(grown_log, events=SIZES[0]))  # warm-up: imports, caches
    for size in SIZES:
        load, append = await _fresh(functools.partial(grown_log, events=size))
        loads.append((size, load))
        lines.append(f"| {size:,} | {load:.1f} | {append:.2f} |")
    (small, small_ms), (big, big_ms) = loads[0], loads[-1]
    slope = (big_ms - small_ms) / (big - small) * 1000
    lines.append(f"\nload slope: {slope:.3f} ms per 1,000 events")
    return lines


def main() -> None:
    for line in asyncio.run(scale()):
        print(line)
