"""``agent-session demo``: one turn recorded through the in-process session store.

The full demo (JSONL backend, checkpoint policy, a real crash and recovery) arrives with the
backend and runtime issues; this one shows the event log and the derived history.
"""

from __future__ import annotations

import uuid
from typing import Any, TextIO

from session import Runtime, SessionEvent

__all__ = ["run_demo"]


def _user(text: str) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
        "role": "user",
        "id": str(uuid.uuid4()),
    }


def record_turn(runtime: Runtime) -> list[SessionEvent]:
    """Record one complete tool-using turn the way the reference loop records it."""
    session = runtime.sessions.create("demo")
    append = session.append
    append("turn/start", {"turn": 1})
    append("step/start", {"turn": 1, "step": 1})
    append("user/message", _user("What is in notes.txt?"), surface_op="append")
    call = {
        "type": "tool-call",
        "id": "call-1",
        "name": "read_file",
        "arguments": '{"path":"notes.txt"}',
    }
    chunk = append(
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "block-end", "index": 0, "block": call}},
    )
    append(
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "message": {
                "role": "assistant",
                "content": [call],
                "source": {"kind": "model", "provider": "scripted", "model": "demo-1"},
                "id": str(uuid.uuid4()),
            },
        },
        surface_op="append",
        source_event_seqs=[chunk.seq],
    )
    tool_call = append(
        "tool/call",
        {
            "turn": 1,
            "step": 1,
            "callId": "call-1",
            "name": "read_file",
            "arguments": call["arguments"],
        },
    )
    append(
        "tool/result",
        {
            "turn": 1,
            "step": 1,
            "message": {
                "source": {"kind": "tool", "callId": "call-1"},
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "call-1",
                        "content": [{"type": "text", "text": "buy milk"}],
                        "isError": False,
                    }
                ],
                "role": "user",
                "id": str(uuid.uuid4()),
            },
        },
        surface_op="append",
        source_event_seqs=[tool_call.seq],
    )
    append("step/end", {"turn": 1, "step": 1})
    append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return list(session.events)


def run_demo(out: TextIO) -> int:
    """Print the log and the derived model history of one recorded turn."""
    runtime = Runtime()
    events = record_turn(runtime)
    out.write(f"Recorded {len(events)} events in session 'demo':\n")
    for event in events:
        out.write(event.encode().decode("utf-8") + "\n")
    session = runtime.sessions.get("demo")
    assert session is not None
    roles = [m["role"] for m in session.derive_messages()]
    out.write(f"\nThe model's history is derived from the surface: roles {roles}\n")
    return 0
