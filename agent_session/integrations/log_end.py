"""Reading a session's log from its end, for an integration's first partial read of a
session this process has not opened (ADK's ``get_session(num_recent_events=N)``, the SDK's
``get_items(limit=N)``): the cost of that read does not grow with the log.

Guarantees: :func:`tails_from_end` gives ever longer tails of the stored log, the last one
the whole log, and none at all where the end cannot stand for the log without the repair a
whole read makes (a torn end, or an open last turn whose repair answers calls): the caller
then reads the session whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from agent_session.session.errors import SessionNotFoundError
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.types import ASSISTANT_MESSAGE, TURN_END, TURN_START
from agent_session.session.persistence.api import SessionTail
from agent_session.session.persistence.service import SessionPersistence

__all__ = ["repair_answers", "tails_from_end"]


async def tails_from_end(
    persistence: SessionPersistence, id: str, first: int
) -> AsyncIterator[SessionTail]:
    """The last ``first`` events of the log, then four times as many each time, until a
    tail starts at seq 0; nothing when the log is not stored or its end needs a repair that
    answers calls."""
    window = first
    while True:
        try:
            tail = await persistence.read_tail(id, window)
        except SessionNotFoundError:
            return
        if tail.torn or repair_answers(tail.events):
            return  # (a whole read repairs it: its closers are part of what it gives)
        yield tail
        if tail.start == 0:
            return
        window *= 4


def repair_answers(events: Sequence[SessionEvent]) -> bool | None:
    """Whether a log ending in ``events`` ends in an open turn that crash repair would answer
    calls in (an assistant message since its ``turn/start``; a turn of user input only gets
    no visible closer); ``None`` when ``events`` hold no turn bracket to tell by."""
    asked = False
    for event in reversed(events):
        if event.type == TURN_END:
            return False
        asked = asked or event.type == ASSISTANT_MESSAGE
        if event.type == TURN_START:
            return asked
    return None
