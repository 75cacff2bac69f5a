"""``python -m bench.retention`` (through ``scripts/with-postgres`` for the PostgreSQL rows):
what retention and erasure cost.

- **Sealing on the checkpoint.** A step of six events and a flush, 300 steps, on a store
  opened plain and on the same store opened with a keyring (each event's data sealed with
  AES-256-GCM as it is written), step for step in turn; the median wall time of the flush
  and of the whole step, and the ratios sealed / plain, per store kind.
- **A delete that leaves no trace (SQLite).** Deleting one session of 40 turns from a
  database of 20 such sessions: the store's delete (``secure_delete`` zeroes its rows, then
  the WAL is checkpointed and truncated) against SQLite's plain delete of the same rows in a
  copy of the same file.
- **Purge.** ``purge`` of 100 sessions of 3 turns (each with its two receipts), per store
  kind: the time per session.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from agent_session import (
    AgentRuntime,
    ScriptedModel,
    ScriptedStep,
    checkpoint_policy,
    open_store,
)
from agent_session.governance.retention import purge_store
from agent_session.sealing import Keyring
from bench.governance import paired_figures, print_paired, stores

__all__ = ["delete_figures", "main", "purge_figures", "sealing_figures"]


async def sealing_figures(base: Path, runs: int, steps: int) -> dict[str, dict[str, float]]:
    """Median checkpoint and step (µs), plain and sealed, and their ratios, per kind."""
    ring = Keyring(base / "ring", os.urandom(32))
    return await paired_figures(base, runs, steps, "Sealed", keyring=ring)


async def _fill(store: str, sessions: int, turns: int) -> None:
    async with AgentRuntime() as runtime:
        runtime.install(open_store(store))
        runtime.install(checkpoint_policy)
        steps = [ScriptedStep(text=["ok " * 40])] * (sessions * turns)
        runtime.models.register("demo", ScriptedModel(steps))
        for n in range(sessions):
            session = runtime.sessions.create(f"s{n}")
            agent = runtime.agent(session, model="demo/m")
            for turn in range(turns):
                await agent.run_turn(f"turn {turn} " + "x" * 300)
            await runtime.sessions.dispose(session)


async def delete_figures(base: Path, sessions: int, turns: int, runs: int) -> dict[str, float]:
    """Median ms of the store's delete of one session and of SQLite's plain one."""
    source = base / "delete" / "s.db"
    source.parent.mkdir(parents=True)
    await _fill(f"sqlite:///{source}", sessions, turns)
    ours, plain = [], []
    for run in range(runs):
        copy = base / "delete" / f"c{run}.db"
        shutil.copy(source, copy)
        backend = open_store(f"sqlite:///{copy}")
        began = time.perf_counter()
        await backend.delete(f"s{run}")
        ours.append(time.perf_counter() - began)
        await backend.aclose()
        shutil.copy(source, copy)
        db = sqlite3.connect(copy, isolation_level=None)
        db.execute("PRAGMA secure_delete = OFF")
        db.execute("PRAGMA synchronous = FULL")
        began = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")
        db.execute("DELETE FROM events WHERE session_id = ?", (f"s{run}",))
        db.execute("DELETE FROM sessions WHERE id = ?", (f"s{run}",))
        db.execute("COMMIT")
        plain.append(time.perf_counter() - began)
        db.close()
    o, p = statistics.median(ours) * 1e3, statistics.median(plain) * 1e3
    return {"secureMs": o, "plainMs": p, "ratio": o / p}


async def purge_figures(base: Path, sessions: int) -> dict[str, float]:
    """Milliseconds per purged session, per kind."""
    out = {}
    for kind, store in stores(base / "purge").items():
        await _fill(store, sessions, 3)
        began = time.perf_counter()
        done = await purge_store(store, older_than_ms=0)
        took = time.perf_counter() - began
        assert sum(item.action == "purged" for item in done) == sessions
        out[kind] = took / sessions * 1e3
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retention", description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        sealing = asyncio.run(sealing_figures(base, args.runs, args.steps))
        deleting = asyncio.run(delete_figures(base, 20, 40, args.runs))
        purging = asyncio.run(purge_figures(base, 100))
    print_paired(sealing, "Sealed", args.runs, args.steps)
    print(
        f"SQLite delete of one session of 40 turns (of 20): {deleting['secureMs']:.1f} ms "
        f"leaving no trace, {deleting['plainMs']:.1f} ms plain (ratio {deleting['ratio']:.2f})"
    )
    print("purge of 100 sessions of 3 turns, per session (with its two receipts):")
    for kind, ms in purging.items():
        print(f"  {kind:9} {ms:6.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
