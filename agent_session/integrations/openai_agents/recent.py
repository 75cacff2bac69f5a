"""The latest items of a session's history read from the end of its log, for a
``get_items(limit=N)`` of a session this process has not opened yet: the cost of that read
does not grow with the history (the whole log is read when the session is written).

Guarantees: the items are exactly the last ``limit`` items :func:`history` gives for the
whole log; where the end of the log cannot give them alone (a surface replace or a forget
among the events read, which may move or take away earlier items; a torn end, or an open
last turn whose repair answers calls), nothing is returned and the caller reads it whole.
"""

from __future__ import annotations

from typing import Any

from agent_session.integrations.log_end import tails_from_end
from agent_session.integrations.openai_agents.history import added_keys, item_at
from agent_session.session.persistence.service import SessionPersistence

__all__ = ["recent_items"]

_MARGIN = 32
"""Log events read beyond two per item asked for (turn brackets, steps)."""


async def recent_items(
    persistence: SessionPersistence, id: str, limit: int
) -> list[dict[str, Any]] | None:
    """The last ``limit`` items of the session's history, read from its log's end; ``None``
    when the log is not stored or its end cannot stand for it (see the module)."""
    async for tail in tails_from_end(persistence, id, 2 * limit + _MARGIN):
        keys = added_keys(tail.events)
        if keys is None:
            return None  # (a replace or a forget may move or take away earlier items)
        if len(keys) >= limit or tail.start == 0:
            chosen = keys[-limit:] if limit > 0 else []
            return [item_at(tail.events[seq - tail.start], index) for seq, index in chosen]
    return None
