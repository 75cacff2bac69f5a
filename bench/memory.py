"""Peak memory of a cold load: a child process loads a log of about 100 MB of JSONL."""

from __future__ import annotations

import subprocess
import sys

from bench.stacks import stack
from bench.workload import append_step

__all__ = ["load_peak_rss"]

PEAK_CHILD = """
import asyncio, sys
from agent_session.persistence_jsonl import JsonlPersistence
async def main():
    backend = JsonlPersistence(sys.argv[1])
    stored = await backend.inspect("heavy")
    # This process's own peak (kB): ru_maxrss would include the parent's, inherited across
    # exec.
    with open("/proc/self/status") as status:
        peak = next(line for line in status if line.startswith("VmHWM:"))
    print(len(stored.events), peak.split()[1])
asyncio.run(main())
"""


async def load_peak_rss(
    root: str, target_mb: int = 100, compression: str = "none"
) -> tuple[float, float]:
    """(peak RSS MB of a child loading a log of ~100 MB of JSONL, plain or compressed; the
    JSONL's size in MB)."""
    runtime, backend = stack(root, compression)
    session = runtime.sessions.create("heavy")
    text = "lorem ipsum dolor sit amet " * 150  # a ~4 KB tool output per result
    session.append("turn/start", {"turn": 1})
    step = 0
    path = None
    plain = counted = 0
    while True:
        step += 1
        append_step(session, step, 20)
        await runtime.sessions.flush(session)
        path = path or backend.locate(session.header)
        for i in range(20):
            session.append(
                "user/message",
                {
                    "content": [{"type": "text", "text": text}],
                    "source": {"kind": "user"},
                    "role": "user",
                    "id": f"u{step}-{i}",
                },
                surface_op="append",
            )
        await runtime.sessions.flush(session)
        plain += sum(len(e.encode()) + 1 for e in session.events[counted:])
        counted = len(session.events)
        if plain >= target_mb * 1024 * 1024:
            break
    await backend.aclose()
    size_mb = plain / 1e6  # unpacked lines: a little more than the plain file holds
    out = subprocess.run(
        [sys.executable, "-c", PEAK_CHILD, root], capture_output=True, text=True, check=True
    )
    _events, rss_kb = out.stdout.split()
    return int(rss_kb) / 1024, size_mb
