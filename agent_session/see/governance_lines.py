"""What ``agent-session show`` says of the governance events of a log: a budget set or
raised, a request a budget stopped, labels, legal holds and their releases, anchors of the
chain (a request's reservation is left out: every request under a budget has one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_session.session import SessionEvent
from agent_session.session.events.types import (
    AUDIT_ANCHOR,
    BUDGET_EXCEEDED,
    BUDGET_SET,
    HOLD_RELEASED,
    HOLD_SET,
    LABEL_SET,
)

__all__ = ["governance_line"]


def _pairs(value: Any) -> str:
    if not isinstance(value, Mapping) or not value:
        return "none"
    return ", ".join(f"{key} {amount}" for key, amount in value.items())


def governance_line(event: SessionEvent) -> str | None:
    """The line for ``event``; ``None`` when it is not a governance event shown."""
    data: Mapping[str, Any] = event.data if isinstance(event.data, Mapping) else {}
    if event.type == BUDGET_SET:
        why = [str(data[k]) for k in ("reason", "by") if isinstance(data.get(k), str)]
        return f"budget: {_pairs(data.get('limits'))}" + (f" ({', '.join(why)})" if why else "")
    if event.type == BUDGET_EXCEEDED:
        over = data.get("over")
        named = ", ".join(map(str, over)) if isinstance(over, list) else "?"
        spent = data.get("spent")
        used = _pairs(
            {k: spent[k] for k in ("inputTokens", "outputTokens") if k in spent}
            if isinstance(spent, Mapping)
            else None
        )
        return (
            f"budget: the step {data.get('step')} request was not made: over {named} "
            f"(spent {used}; it may take {_pairs(data.get('bound'))}); the turn waits for a raise"
        )
    if event.type == LABEL_SET:
        labels = data.get("labels")
        shown = (
            " ".join(f"{k}={'(removed)' if v is None else v}" for k, v in labels.items())
            if isinstance(labels, Mapping)
            else "?"
        )
        return f"labels: {shown}"
    if event.type == AUDIT_ANCHOR:
        return f"audit: anchor of seqs {data.get('from')}..{data.get('through')}"
    if event.type in (HOLD_SET, HOLD_RELEASED):
        by = f" by {data['by']}" if isinstance(data.get("by"), str) else ""
        if event.type == HOLD_SET:
            return f"legal hold{by} (seq {event.seq}): {data.get('reason')}"
        held = data.get("holds")
        seqs = ", ".join(map(str, held)) if isinstance(held, list) else "?"
        return f"legal hold released{by} (seq {seqs}): {data.get('reason')}"
    return None
