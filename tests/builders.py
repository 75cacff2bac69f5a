"""Small builders for wire-shaped messages and events used across the tests."""

from __future__ import annotations

import asyncio
from typing import Any


def user(text: str = "hi", id: str = "u1") -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
        "role": "user",
        "id": id,
    }


def assistant(
    *, text: str | None = "ok", calls: tuple[str, ...] = (), id: str = "a1"
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    content += [
        {"type": "tool-call", "id": c, "name": "read_file", "arguments": "{}"} for c in calls
    ]
    return {
        "role": "assistant",
        "content": content,
        "source": {"kind": "model", "provider": "p", "model": "m"},
        "id": id,
    }


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
