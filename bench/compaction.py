"""``python -m bench.compaction`` (through ``scripts/with-postgres`` for the PostgreSQL rows):
what a resume costs after a compaction.

A session of ``--before`` events (turns of a user message, streamed deltas and an answer),
compacted every ``--every`` turns as a policy would (and, in a second round, only once at its
end: the summary then cites every answer of the history), then ``--after`` more events of the
same turns; a second session holds only ``--after`` events of those turns, with no
compaction. Each is resumed cold (open the store,
``resume``, close) in turn, ``--runs`` times, and the medians and the ratio compacted /
small are printed per store kind. The bar: the history before the boundary does not count,
so the ratio stays near 1.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_session import AgentRuntime, open_store, user_message
from agent_session.agent_loop.compaction import CompactionPolicy
from bench.governance import stores
from bench.workload import append_step

__all__ = ["main", "resume_after_boundary"]

CHUNKS = 20
"""Deltas per answer: a turn is 26 events."""


async def _summary(messages: Sequence[Any]) -> str:
    return f"a summary of {len(messages)} messages"


async def _write(store: str, id: str, events: int, *, every: int = 0) -> None:
    """Write turns of ``id`` until ``events`` events, compacted every ``every`` turns and at
    the end (with ``every`` 0: not at all; -1: only at the end)."""
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        session = await runtime.sessions.open_or_create(id)
        policy = CompactionPolicy(summarize=_summary)
        agent = runtime.agent(session, model="bench/none", compaction=policy)
        turn = 0
        while session.seq < events:
            turn += 1
            session.append("turn/start", {"turn": turn})
            session.append("user/message", user_message(f"question {turn}"), surface_op="append")
            append_step(session, 1, CHUNKS, turn)
            session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
            if every > 0 and turn % every == 0:
                await agent.compact()
            if turn % 200 == 0:
                await runtime.sessions.flush(session)
        await runtime.sessions.flush(session)
        if every < 0 or (every > 0 and turn % every):  # (a last one: none was just made)
            assert await agent.compact() is not None


async def _resume(store: str, id: str) -> float:
    start = time.perf_counter()
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        await runtime.sessions.resume(id)
    return time.perf_counter() - start


async def resume_after_boundary(
    store: str, before: int, after: int, runs: int, every: int
) -> dict[str, float]:
    """Median resume ms of the compacted session and of the small one, and their ratio
    (``every``: the turns between compactions of the history, -1 for one at its end)."""
    await _write(store, "long", before, every=every)
    await _write(store, "long", before + after)
    await _write(store, "small", after)
    if store.startswith("postgresql"):  # (statistics, as autovacuum keeps a live table's)
        import psycopg

        with psycopg.connect(store, autocommit=True) as db:
            db.execute("ANALYZE")
    long: list[float] = []
    small: list[float] = []
    for _ in range(runs):
        long.append(await _resume(store, "long"))
        small.append(await _resume(store, "small"))
    long_ms, small_ms = statistics.median(long) * 1e3, statistics.median(small) * 1e3
    return {"compactedMs": long_ms, "smallMs": small_ms, "ratio": long_ms / small_ms}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compaction", description=__doc__)
    parser.add_argument("--before", type=int, default=100_000)
    parser.add_argument("--after", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--every", type=int, default=100, help="turns between compactions")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as base:
        print(
            f"resume of a session of {args.before} events with {args.after} after its last "
            f"compaction, against a {args.after}-event session (medians of {args.runs}, ms)"
        )
        for every, how in ((args.every, f"every {args.every} turns"), (-1, "once, at the end")):
            print(f" the history compacted {how}:")
            for kind, store in stores(Path(base) / str(every)).items():
                f = asyncio.run(
                    resume_after_boundary(store, args.before, args.after, args.runs, every)
                )
                print(
                    f"  {kind:9} compacted {f['compactedMs']:7.2f}  small {f['smallMs']:7.2f}  "
                    f"ratio {f['ratio']:.3f}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
