"""Small builders for wire-shaped messages and events used across the tests."""

from __future__ import annotations

import asyncio
from typing import Any

from agent_session.testing.logs import assistant, user

__all__ = ["assistant", "user"]  # (shared with the contract suite)


def tool_result(call_id: str, text: str = "done", id: str = "r1", **extra: Any) -> dict[str, Any]:
    return {
        "source": {"kind": "tool", "callId": call_id},
        "content": [
            {
                "type": "tool-result",
                "toolCallId": call_id,
                "content": [{"type": "text", "text": text}],
                "isError": False,
            }
        ],
        "role": "user",
        "id": id,
        **extra,
    }


def event(type: str, seq: int, data: Any, **envelope: Any) -> dict[str, Any]:
    return {"type": type, "seq": seq, "time": 1000 + seq, "data": data, **envelope}


async def until(condition: Any, *, steps: int = 10_000) -> None:
    """Yield to the event loop until ``condition()`` holds; fail (never hang) after ``steps``
    turns of the loop."""
    for _ in range(steps):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"condition never held after {steps} event-loop turns")
