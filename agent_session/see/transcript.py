"""The human transcript of a session: who said what, tool calls with their arguments, tool
results, which results were written by crash repair, and where a compaction summarized the
history; when each turn started (UTC, and
since the session's first event), each step's model time, time to first token and usage, and
each call's time from its ``tool/call`` to its result."""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from typing import Any

from agent_session.recovery import is_repair_result
from agent_session.see.framework_lines import framework_line
from agent_session.see.governance_lines import governance_line
from agent_session.see.lineage import Child
from agent_session.session import SessionEvent
from agent_session.session.events.compaction import is_summary
from agent_session.session.events.outcomes import SETTLEMENT, TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN
from agent_session.session.events.types import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    CONTEXT_COMPACTED,
    STEP_START,
    SUBAGENT_SPAWNED,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)

__all__ = ["REPAIR_CODES", "render"]

REPAIR_CODES = frozenset({TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN})
"""Error codes of tool results written by crash repair."""


def _text(blocks: Sequence[Any]) -> str:
    return "".join(b.get("text", "") for b in blocks if b.get("type") == "text")


def _call(block: Mapping[str, Any]) -> str:
    """A tool-call block as ``name(arguments)  [id]``; a block of another shape as its JSON."""
    id, name, arguments = (block.get(key) for key in ("id", "name", "arguments"))
    if isinstance(id, str) and isinstance(name, str) and isinstance(arguments, str):
        return f"{name}({arguments})  [{id}]"
    return f"(a tool-call block of another shape) {json.dumps(block, ensure_ascii=False)}"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines() or [""])


def _when(ms: int, origin: int) -> str:
    """``2026-12-02 03:10:59.123 UTC, +1.234 s``: absolute, and since ``origin``."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return f"{moment:%Y-%m-%d %H:%M:%S}.{ms % 1000:03d} UTC, +{(ms - origin) / 1000:.3f} s"


def _step_line(data: Mapping[str, Any], time: int, step: tuple[int, int | None] | None) -> str:
    """``(model 47 ms, first token 12 ms, 100 in / 20 out tokens)`` for a step's answer."""
    parts = []
    if step is not None:
        start, first = step
        parts.append(f"model {max(0, time - start)} ms")
        if first is not None:
            parts.append(f"first token {max(0, first - start)} ms")
    usage = data.get("usage")
    if isinstance(usage, Mapping):
        parts.append(
            f"{usage.get('inputTokens', 0)} in / {usage.get('outputTokens', 0)} out tokens"
        )
    return f"  ({', '.join(parts)})" if parts else ""


def _subagent(data: Mapping[str, Any], nested: dict[str, Child]) -> list[str]:
    """A child agent's start, then its transcript, indented (once: a call run again after a
    crash continues the child shown already)."""
    id = str(data.get("session"))
    child = nested.pop(id, None)
    head = f"  ┆ subagent {id} (call {data.get('callId')}, depth {data.get('depth')})"
    if child is None:
        return [head + ": continued, shown above"]
    if child.events is None:
        return [head + (f": unreadable: {child.problem}" if child.problem else ": never stored")]
    inner = render(child.events, children=child.children)
    return [head + ":", *(f"  ┆ {line}" for line in inner.splitlines())]


def compacted_line(data: Mapping[str, Any]) -> str:
    """``── compacted (threshold): 12 messages replaced by the summary above ... ──``."""
    return (
        f"── compacted ({data.get('trigger')}): {data.get('shadowed')} message(s) replaced by "
        f"the summary above, about {data.get('estimatedTokensBefore')} → "
        f"{data.get('estimatedTokensAfter')} tokens; every event before it stays in the log ──"
    )


def render(
    events: Sequence[SessionEvent],
    *,
    pending_from: int | None = None,
    children: Sequence[Child] = (),
) -> str:
    """The transcript. Events from ``pending_from`` on are closers not yet on disk;
    ``children``: the child agents' sessions its calls ran, whose transcripts are shown,
    indented, where each was started."""
    lines: list[str] = []
    nested = {child.id: child for child in children}
    origin: int | None = None
    step: tuple[int, int | None] | None = None  # the open step's start and first token
    called: dict[Any, int] = {}
    for event in events:
        data = event.data
        origin = event.time if origin is None else origin
        pending = pending_from is not None and event.seq >= pending_from
        if event.type == STEP_START:
            step = (event.time, None)
        elif event.type == ASSISTANT_CHUNK:
            chunk = data.get("chunk")
            delta = isinstance(chunk, Mapping) and str(chunk.get("type", "")).endswith("-delta")
            if step is not None and step[1] is None and delta:
                step = (step[0], event.time)
        elif event.type == TOOL_CALL:
            called[data.get("callId")] = event.time
        elif event.type == TURN_START:
            lines.append(f"── turn {data['turn']} ── {_when(event.time, origin)}")
        elif is_summary(event):
            text = _text(data.get("content", ()))
            lines.append(f"summary (the model sees it in place of what came before): {text}")
        elif event.type == USER_MESSAGE:
            lines.append(f"user: {_text(data.get('content', ()))}")
        elif event.type == CONTEXT_COMPACTED:
            lines.append(compacted_line(data))
        elif event.type == SUBAGENT_SPAWNED:
            lines += _subagent(data, nested)
        elif event.type == ASSISTANT_MESSAGE:
            message = data["message"]
            if event.surface_op is not None and event.surface_op != "append":
                calls = [
                    _call(b) for b in message.get("content", ()) if b.get("type") == "tool-call"
                ]
                lines.append("(settling the calls a crash interrupted, asked again:)")
                lines += [f"assistant → {call}" for call in calls]
                continue
            timing = _step_line(data, event.time, step)
            if timing:
                lines.append(timing)
            step = None
            for block in message.get("content", ()):
                if block.get("type") == "reasoning":
                    lines.append(f"assistant (thinking): {block.get('text', '')}")
                elif block.get("type") == "text":
                    lines.append(f"assistant: {block.get('text', '')}")
                elif block.get("type") == "tool-call":
                    lines.append(f"assistant → {_call(block)}")
            if data.get("interrupted"):
                lines.append("    (interrupted by a cancellation)")
        elif event.type == TOOL_RESULT:
            block = data["message"]["content"][0]
            code = (data.get("error") or {}).get("code")
            meta = data.get("meta")
            how = meta.get(SETTLEMENT) if isinstance(meta, Mapping) else None
            sub = meta.get("subagent") if isinstance(meta, Mapping) else None
            flag = "REPAIRED, in memory only" if pending else "REPAIRED"
            if isinstance(how, str):
                mark = f"[SETTLED: {how}" + (f", {code}]" if code in REPAIR_CODES else "]")
            elif isinstance(sub, Mapping) and is_repair_result(event):
                mark = f"[{flag} from the subagent's log: {sub.get('state')}]"
            elif code in REPAIR_CODES:
                mark = f"[{flag}: {code}]"
            else:
                mark = "[error]" if block.get("isError") else "[ok]"
            started = called.pop(block["toolCallId"], None)
            took = f" ({max(0, event.time - started)} ms)" if started is not None else ""
            lines.append(f"tool {block['toolCallId']} {mark}{took}")
            lines.append(_indent(_text(block.get("content", ()))))
        elif (said := framework_line(event) or governance_line(event)) is not None:
            lines.append(said)
        elif event.type == TURN_END:
            reason = data["reason"]
            kind = reason.get("kind")
            note = " (closed by crash repair)" if kind == "interrupted" else ""
            lines.append(f"── end of turn {data['turn']}: {kind}{note} ──")
    return "\n".join(lines)
