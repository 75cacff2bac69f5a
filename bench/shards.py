"""Sessions sharded over worker processes: each process runs its own runtime and JSONL backend
on one store root, with its share of the sessions (the per-session writer lock keeps the
processes apart). One event loop is one core; processes are how a machine's other cores help.

``python -m bench.shards worker ROOT INDEX SESSIONS STEPS`` is one worker: it opens its
sessions, prints ``ready``, waits for a line on stdin, runs the workload and prints one JSON
line ``{"checkpoints", "start", "end"}`` (``time.time()``)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

from bench.stacks import stack
from bench.workload import run_steps

__all__ = ["sharded_checkpoints"]

CHUNKS = 20


def sharded_checkpoints(root: str, processes: int, sessions: int = 16, steps: int = 50) -> float:
    """Checkpoints per second of ``sessions`` sessions split evenly over ``processes`` worker
    processes, started together: all their checkpoints over the time from the first start to
    the last end."""
    share = sessions // processes
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.shards", "worker", root, str(i), str(share), str(steps)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )
        for i in range(processes)
    ]
    for worker in workers:  # every worker has its sessions open before any starts
        assert worker.stdout is not None
        if worker.stdout.readline().strip() != "ready":
            raise RuntimeError("a shard worker failed to start")
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    results = []
    for worker in workers:
        out, _ = worker.communicate(timeout=600)
        if worker.returncode != 0:
            raise RuntimeError(f"a shard worker failed (exit {worker.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    elapsed = max(r["end"] for r in results) - min(r["start"] for r in results)
    return float(sum(r["checkpoints"] for r in results) / elapsed)


async def _worker(root: str, index: int, sessions: int, steps: int) -> None:
    runtime, backend = stack(root, "none")
    live = [runtime.sessions.create(f"shard{index}-{i}") for i in range(sessions)]
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    start = time.time()
    await asyncio.gather(*(run_steps(runtime, s, steps, CHUNKS) for s in live))
    end = time.time()
    await backend.aclose()
    print(json.dumps({"checkpoints": sessions * steps, "start": start, "end": end}), flush=True)


if __name__ == "__main__":
    _, command, root, index, sessions, steps = sys.argv
    assert command == "worker"
    asyncio.run(_worker(root, int(index), int(sessions), int(steps)))
