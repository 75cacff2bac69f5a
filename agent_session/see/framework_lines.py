"""What ``agent-session show`` says of the events a framework integration keeps opaque (a
LangGraph checkpoint or its pending writes, a Claude Code transcript entry): ids, steps,
channels and sizes, read from the event's JSON. A stored value is never turned back into an
object (no unpickling, no msgpack decoding), so a hostile log cannot run anything here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_session.session import SessionEvent
from agent_session.session.events.types import (
    CLAUDE_ENTRY,
    LANGGRAPH_CHECKPOINT,
    LANGGRAPH_WRITES,
)

__all__ = ["framework_line"]

_WIDTH = 120


def _size(typed: Any) -> str:
    """``type, N bytes`` of a serialized ``[type, base64]`` value."""
    if not (isinstance(typed, list) and len(typed) == 2 and all(isinstance(p, str) for p in typed)):
        return "?"
    kind, text = typed
    return f"{kind}, {len(text) * 3 // 4 - text[-2:].count('=')} bytes"


def _ns(data: Mapping[str, Any]) -> str:
    ns = data.get("ns")
    return f" in namespace {ns!r}" if ns else ""


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _WIDTH else text[: _WIDTH - 1] + "…"


def _entry_text(entry: Mapping[str, Any]) -> str:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, str):
        return _short(content)
    parts = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            parts.append(f"→ {block.get('name')}({block.get('id')})")
        elif kind == "tool_result":
            parts.append(f"← result of {block.get('tool_use_id')}")
    return _short(" ".join(parts))


def _field(data: Mapping[str, Any], key: str, kind: type[Any]) -> Any:
    """``data[key]`` when it is a ``kind``, else an empty one."""
    value = data.get(key)
    return value if isinstance(value, kind) else kind()


def framework_line(event: SessionEvent) -> str | None:
    """The line for ``event``; ``None`` when it is not a framework's opaque event."""
    data: Mapping[str, Any] = event.data if isinstance(event.data, Mapping) else {}
    if event.type == LANGGRAPH_CHECKPOINT:
        metadata = _field(data, "metadata", dict)
        said = [f"checkpoint {data.get('id')}{_ns(data)}"]
        if "step" in metadata:
            said.append(f"step {metadata['step']}")
        if "source" in metadata:
            said.append(f"source {metadata['source']}")
        said.append(f"parent {data.get('parent') or '-'}")
        blobs = _field(data, "blobs", list)
        channels = [
            f"{b[0]} ({'no value' if b[2] is None else _size(b[2])})"
            for b in blobs
            if isinstance(b, list) and len(b) == 3
        ]
        line = "langgraph: " + ", ".join(said)
        return line + (f"\n    channels: {', '.join(channels)}" if channels else "")
    if event.type == LANGGRAPH_WRITES:
        writes = _field(data, "writes", list)
        shown = [f"{w[1]} ({_size(w[2])})" for w in writes if isinstance(w, list) and len(w) == 3]
        return (
            f"langgraph: writes of task {data.get('task')} to checkpoint "
            f"{data.get('checkpoint')}{_ns(data)}: {', '.join(shown) or 'none'}"
        )
    if event.type == CLAUDE_ENTRY:
        entry = _field(data, "entry", dict)
        text = _entry_text(entry)
        return f"claude-code {entry.get('type')}" + (f": {text}" if text else "")
    return None
