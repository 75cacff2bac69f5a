"""A session's most recent ADK events read from the end of its log, for a ``get_session``
that asks for ``num_recent_events`` of a session this process has not read yet: the cost of
that read does not grow with the session (the whole log is read when it is written).

Guarantees: the view holds exactly the events and the state a whole read would give (the
last ``count`` projected events, the session state folded from the catalog's record over
every state delta since); where the end of the log cannot give that alone (a torn tail, or
an open last turn whose repair answers calls), nothing is returned and the caller reads it whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_session.integrations.google_adk.catalog import Row
from agent_session.integrations.google_adk.state import View
from agent_session.integrations.log_end import tails_from_end
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.types import TURN_END, TURN_START
from agent_session.session.persistence.service import SessionPersistence

__all__ = ["recent_view"]

_MARGIN = 32
"""Log events read beyond four per ADK event asked for (turn brackets, steps, calls)."""


async def recent_view(
    persistence: SessionPersistence, log_id: str, row: Row, count: int
) -> View | None:
    """The view of the session's last ``count`` ADK events and its state, read from its
    log's end; ``None`` when the log is not stored or its end needs a repair."""
    async for tail in tails_from_end(persistence, log_id, 4 * count + _MARGIN):
        whole = tail.start == 0
        begin = 0 if whole else _outside_turns(tail.events)
        if begin is not None and (whole or tail.start + begin <= row.folded):
            view = View(row, None, state=dict(row.state))
            view.extend(tail.events[begin:])
            if whole or len(view.events) >= count:
                return view
    return None


def _outside_turns(events: Sequence[SessionEvent]) -> int | None:
    """The index of the first event that is not inside a turn begun before ``events``
    (after the first ``turn/end``, or at the first ``turn/start``); ``None``: none is."""
    for index, event in enumerate(events):
        if event.type == TURN_START:
            return index
        if event.type == TURN_END:
            return index + 1
    return None
