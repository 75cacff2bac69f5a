"""A compaction as a trace of its own: one ``agent_session.compaction`` span from its
``compaction/start`` to its ``context/compacted``, saying what triggered it, how many
messages the summary replaced and the estimated sizes before and after, and, when the
agent's model wrote the summary, that model and its usage (the spend of the summary request).

Guarantees: its ids are derived from the log alone (session id, incarnation, the seq of its
``compaction/start``), as a turn's are, so exporting it again gives the same ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_session.otel.ids import span_id, trace_id
from agent_session.session.events.compaction import Boundary

__all__ = ["compaction_span_parts"]

_FACTS = {
    "trigger": "agent_session.compaction.trigger",
    "shadowed": "agent_session.compaction.messages_replaced",
    "estimatedTokensBefore": "agent_session.compaction.estimated_tokens_before",
    "estimatedTokensAfter": "agent_session.compaction.estimated_tokens_after",
}


def compaction_span_parts(
    session_id: str, incarnation: int, events: Sequence[Any], boundary: Boundary
) -> dict[str, Any]:
    """The fields of the compaction's span (a ``SpanRecord``'s keyword arguments)."""
    start, facts = events[boundary.start], events[boundary.seq]
    data: Mapping[str, Any] = facts.data if isinstance(facts.data, Mapping) else {}
    attributes: dict[str, Any] = {
        "gen_ai.conversation.id": session_id,
        "agent_session.seq.first": start.seq,
        "agent_session.seq.last": facts.seq,
    }
    for key, name in _FACTS.items():
        if isinstance(data.get(key), str | int):
            attributes[name] = data[key]
    who = data.get("summarizer")
    if isinstance(who, Mapping):
        for key, name in (("provider", "gen_ai.provider.name"), ("model", "gen_ai.request.model")):
            if isinstance(who.get(key), str):
                attributes[name] = who[key]
        usage: Mapping[str, Any] = who["usage"] if isinstance(who.get("usage"), Mapping) else {}
        for key, name in (
            ("inputTokens", "gen_ai.usage.input_tokens"),
            ("outputTokens", "gen_ai.usage.output_tokens"),
        ):
            if type(usage.get(key)) is int:
                attributes[name] = usage[key]
    return {
        "trace_id": trace_id(session_id, incarnation, start.seq),
        "span_id": span_id(session_id, incarnation, "compaction", start.seq),
        "parent_id": None,
        "name": "agent_session.compaction",
        "kind": "INTERNAL",
        "start_ns": int(start.time) * 1_000_000,
        "end_ns": max(int(start.time), int(facts.time)) * 1_000_000,
        "attributes": attributes,
    }
