"""A subagent's spans in its parent's trace: each trace of a child agent's session joins the
trace of the parent's turn whose tool call ran it, its ``invoke_agent`` span under that
call's ``execute_tool`` span, so a receiver shows the delegation as one tree.

Guarantees: the ids are still derived from the logs alone (the parent's turn and call seqs,
the child's own seqs), so exporting either session again gives the same ids; a child whose
parent's log does not name it keeps traces of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from agent_session.otel.ids import span_id, trace_id
from agent_session.otel.spans import TurnTrace
from agent_session.session.events.types import SUBAGENT_SPAWNED, TOOL_CALL, TURN_START

__all__ = ["Adoption", "adopted", "adoptions"]

Adoption = tuple[int, int, int]
"""When a parent's call started a child (Unix ms), and that turn's trace id and the call's
``execute_tool`` span id."""


def adoptions(parent: str, incarnation: int, events: Sequence[Any], child: str) -> list[Adoption]:
    """Where the parent's log ran ``child``: per ``subagent/spawned`` naming it, in order."""
    found: list[Adoption] = []
    turn: int | None = None
    calls: dict[Any, int] = {}
    for event in events:
        data: Mapping[str, Any] = event.data if isinstance(event.data, Mapping) else {}
        if event.type == TURN_START:
            turn, calls = event.seq, {}
        elif event.type == TOOL_CALL:
            calls[data.get("callId")] = event.seq
        elif event.type == SUBAGENT_SPAWNED and data.get("session") == child:
            call = calls.get(data.get("callId"))
            if turn is not None and call is not None:
                tool = span_id(parent, incarnation, "tool", call)
                found.append((event.time, trace_id(parent, incarnation, turn), tool))
    return found


def adopted(traces: list[TurnTrace], found: Sequence[Adoption]) -> list[TurnTrace]:
    """``traces`` of a child session, each moved into the trace of the last call that ran
    the child before it started (the first call for one that started earlier)."""
    if not found:
        return traces
    out = []
    for trace in traces:
        start_ms = trace.spans[0].start_ns // 1_000_000
        earlier = [a for a in found if a[0] <= start_ms] or [found[0]]
        _, into, under = earlier[-1]
        spans = [
            dataclasses.replace(
                span, trace_id=into, parent_id=under if span.parent_id is None else span.parent_id
            )
            for span in trace.spans
        ]
        out.append(TurnTrace(trace.turn, trace.end_seq, spans))
    return out
