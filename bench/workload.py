"""The one workload every figure uses.

A session runs ``turn/start``, then S steps; each step appends ``step/start``, C
``assistant/chunk`` text deltas, one ``assistant/message`` and ``step/end``, then awaits
``flush(session)``: one checkpoint.
"""

from __future__ import annotations

import os
import time
from typing import Any

from agent_session.session import Runtime, Session

MESSAGE_SOURCE = {"kind": "model", "provider": "bench", "model": "bench-1"}


def chunk(turn: int, step: int, i: int) -> dict[str, Any]:
    return {
        "turn": turn,
        "step": step,
        "chunk": {"type": "text-delta", "index": 0, "text": f"token{i} "},
    }


def append_step(session: Session, step: int, chunks: int, turn: int = 1) -> None:
    """Append one step's events (no flush)."""
    append = session.append
    append("step/start", {"turn": turn, "step": step})
    delta = session.append_delta  # what the agent loop streams through
    for i in range(chunks):
        delta(turn, step, f"token{i} ")
    append(
        "assistant/message",
        {
            "turn": turn,
            "step": step,
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": f"step {step} done"}],
                "source": MESSAGE_SOURCE,
                "id": f"m-{turn}-{step}",
            },
        },
        surface_op="append",
        source_event_seqs=[],
    )
    append("step/end", {"turn": turn, "step": step})


async def run_steps(
    runtime: Runtime, session: Session, steps: int, chunks: int
) -> tuple[float, list[float]]:
    """Run the workload; return (total seconds, seconds of each step's flush)."""
    flush = runtime.sessions.flush
    session.append("turn/start", {"turn": 1})
    flushes: list[float] = []
    start = time.perf_counter()
    for step in range(1, steps + 1):
        append_step(session, step, chunks)
        before = time.perf_counter()
        await flush(session)
        flushes.append(time.perf_counter() - before)
    return time.perf_counter() - start, flushes


async def write_long_log(root: str | os.PathLike[str], id: str, events: int) -> None:
    """Write session ``id`` to the JSONL store ``root``: one open turn of streamed steps (20
    chunks each) until it holds at least ``events`` events, flushed once at the end."""
    from agent_session.persistence_jsonl import JsonlPersistence

    async with Runtime() as runtime:
        runtime.install(JsonlPersistence(root))
        session = runtime.sessions.create(id)
        session.append("turn/start", {"turn": 1})
        step = 0
        while len(session.events) < events:
            step += 1
            append_step(session, step, 20)
        await runtime.sessions.flush(session)
