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

from agent_session.integrations.openai_agents.items import items_of
from agent_session.integrations.turns import repair_answers
from agent_session.session.errors import SessionNotFoundError
from agent_session.session.events.surface import SurfaceReplace
from agent_session.session.events.types import (
    FRAMEWORK_ITEM,
    FRAMEWORK_ITEMS_FORGOTTEN,
)
from agent_session.session.json.lossless import thaw
from agent_session.session.persistence.service import SessionPersistence

__all__ = ["recent_items"]

_MARGIN = 32
"""Log events read beyond two per item asked for (turn brackets, steps)."""


async def recent_items(
    persistence: SessionPersistence, id: str, limit: int
) -> list[dict[str, Any]] | None:
    """The last ``limit`` items of the session's history, read from its log's end; ``None``
    when the log is not stored or its end cannot stand for it (see the module)."""
    window = 2 * limit + _MARGIN
    while True:
        try:
            tail = await persistence.read_tail(id, window)
        except SessionNotFoundError:
            return None
        if tail.torn or repair_answers(tail.events):
            return None  # (a load repairs it: its closers are items)
        items: list[dict[str, Any]] = []
        for event in tail.events:
            if (
                isinstance(event.surface_op, SurfaceReplace)
                or event.type == FRAMEWORK_ITEMS_FORGOTTEN
            ):
                return None
            if event.surface_op is not None:
                items.extend(items_of(event))
            elif event.type == FRAMEWORK_ITEM:
                items.append(thaw(event.data["item"]))
        if len(items) >= limit or tail.start == 0:
            return items[-limit:] if limit > 0 else []
        window *= 4
