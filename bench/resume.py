"""``resume_ms_100k``: a new process's first step after a crash. A session of 100,000 events
whose turn was left open (a tool call recorded, no result) is resumed cold: load, validate,
repair durably, publish live. Against one ``orjson`` parse of every line of the log."""

from __future__ import annotations

import time
from typing import Any

import orjson

from bench.stacks import stack
from bench.workload import append_step

__all__ = ["resume_100k"]


async def resume_100k(root: str, events: int = 100_000) -> tuple[float, float]:
    """(resume ms, resume / orjson parse of the log's lines)."""
    runtime, backend = stack(root)
    session = runtime.sessions.create("crashed")
    session.append("turn/start", {"turn": 1})
    append_step(session, 1, events - 7)
    session.append("step/start", {"turn": 1, "step": 2})
    block = {"type": "tool-call", "id": "c1", "name": "send", "arguments": "{}"}
    message: dict[str, Any] = {
        "role": "assistant",
        "content": [block],
        "source": {"kind": "model", "provider": "bench", "model": "bench-1"},
        "id": "m-last",
    }
    session.append(
        "assistant/message",
        {"turn": 1, "step": 2, "message": message},
        surface_op="append",
        source_event_seqs=[],
    )
    session.append(
        "tool/call", {"turn": 1, "step": 2, "callId": "c1", "name": "send", "arguments": "{}"}
    )
    await runtime.sessions.flush(session)
    assert session.seq == events
    await backend.aclose()

    fresh, backend = stack(root)
    start = time.perf_counter()
    resumed = await fresh.sessions.resume("crashed")
    seconds = time.perf_counter() - start
    assert resumed.events[events].type == "tool/result"  # the repair answered the call
    path = backend.locate(resumed.header)
    assert path is not None
    with open(path, "rb") as file:
        lines = file.read().splitlines()
    await backend.aclose()
    start = time.perf_counter()
    for line in lines:
        orjson.loads(line)
    parse = time.perf_counter() - start
    return seconds * 1000, seconds / parse
