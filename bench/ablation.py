"""``python -m bench.ablation [--dir DIR] [--runs N]``: where the event loop's CPU per
checkpoint goes with 16 sessions on one loop, by taking parts away.

Three variants of the workload's steps (``bench.workload``), each after every session's first
checkpoint, on the loop thread's ``time.thread_time``:

- ``appends``: the sessions have no backend; each step's appends, then a task switch;
- ``observed``: the same with the JSONL backend installed (its observer buffers each event or
  run), and no flush;
- ``handed``: the floor of a checkpoint, each step ended by handing the session's buffered
  items straight to the JSONL storage's I/O threads and awaiting that one future (no flush
  listener, barrier, ledger or lock: not a product path, only what handing off costs);
- ``checkpointed``: the workload itself, each step ended by ``await flush(session)``.

The differences are what the backend's observer, the hand-off to the I/O threads and the rest
of the checkpoint cost the loop. The variants alternate within each run; every figure is the
median over the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time

from agent_session.session import Runtime, Session
from agent_session.session.persistence.batches import batch_of
from agent_session.session.persistence.service import SessionPersistence
from bench.stacks import stack
from bench.workload import append_step

__all__ = ["VARIANTS", "loop_us_per_step"]

VARIANTS = ("appends", "observed", "handed", "checkpointed")


async def loop_us_per_step(variant: str, base: str, sessions: int = 16, steps: int = 100) -> float:
    """The loop thread's CPU per step (µs) of ``variant`` (see the module docstring)."""
    root = tempfile.mkdtemp(dir=base)
    backend = None
    if variant == "appends":
        runtime = Runtime()
    else:
        runtime, backend = stack(root)
    flush = runtime.sessions.flush
    live = [runtime.sessions.create(f"a{i}") for i in range(sessions)]

    async def run(session: Session, first: int) -> None:
        for step in range(first, first + steps):
            append_step(session, step, 20)
            if variant == "checkpointed":
                await flush(session)
            elif variant == "handed":
                assert backend is not None
                await _hand_off(backend, session)
            else:
                await asyncio.sleep(0)

    for session in live:
        session.append("turn/start", {"turn": 1})
    if backend is not None:  # each log created before the measurement
        await asyncio.gather(*(flush(session) for session in live))
    await asyncio.gather(*(run(session, 1) for session in live))  # warm-up
    cpu = time.thread_time()
    await asyncio.gather(*(run(session, 1 + steps) for session in live))
    cpu = time.thread_time() - cpu
    if backend is not None:
        await backend.aclose()
    shutil.rmtree(root)
    return cpu / (sessions * steps) * 1e6


async def _hand_off(backend: SessionPersistence, session: Session) -> None:
    """Write the session's buffered items as one batch on an I/O thread, as a checkpoint's
    hand-off does, and wait for it (the bench's own reach into the writer's state)."""
    live = backend.writer._live[session]
    items, live.controller._pending = live.controller._pending, []
    state = backend.ledger.state(session.id)
    assert state is not None
    batch = batch_of(items, live.lines)
    started = backend.storage.start_append(state.header, batch)
    assert started is not None  # (the JSONL storage always hands off)
    await started
    backend.ledger.appended(session.id, state, len(batch))


async def _collect(base: str, runs: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    for _ in range(runs):
        for variant in VARIANTS:
            figures[variant].append(await loop_us_per_step(variant, base))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ablation", description=__doc__)
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the logs go")
    parser.add_argument("--runs", type=int, default=5, help="runs of each variant (5)")
    args = parser.parse_args(argv)
    figures = asyncio.run(_collect(args.dir, args.runs))
    medians = {variant: statistics.median(values) for variant, values in figures.items()}
    print(f"loop CPU per checkpoint, 16 sessions, logs in {args.dir} (µs, median of {args.runs})")
    previous = 0.0
    for variant in VARIANTS:
        values = figures[variant]
        print(
            f"  {variant:13} {medians[variant]:7.1f}  (+{medians[variant] - previous:6.1f})"
            f"  min {min(values):7.1f}  max {max(values):7.1f}"
        )
        previous = medians[variant]
    return 0


if __name__ == "__main__":
    sys.exit(main())
