"""How an ADK event becomes events of a live session's log (the writing half of
:class:`agent_session.integrations.google_adk.service.EventLogSessionService`; the mapping
is :mod:`agent_session.integrations.google_adk.mapping`'s).

Turns: a user's message opens a turn (closing the one before: ``completed`` when every call
of it was answered, else with crash repair's closers, exactly as a restart would close it);
a model response opens a step, and its ``tool/call`` events are appended with it, so they are
durable before ADK runs the tools; a model response without calls (a final answer) closes
the turn.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from agent_session.integrations.google_adk.mapping import (
    assistant_data,
    encode,
    kind_of,
    responses_of,
    tool_result_data,
    user_data,
)
from agent_session.integrations.headers import HeaderLog
from agent_session.integrations.turns import (
    BracketCursor,
    end_turn,
    next_step,
    open_turn,
    record_call,
    start_turn,
)
from agent_session.session.events.types import (
    ADK_EVENT,
    ASSISTANT_MESSAGE,
    TOOL_RESULT,
    USER_MESSAGE,
)
from agent_session.session.live.session import Session

__all__ = ["write_event"]


def write_event(
    session: Session,
    brackets: BracketCursor,
    event: Mapping[str, Any],
    header: Mapping[str, Any] | None = None,
    headers: HeaderLog | None = None,
) -> bool:
    """Append the events of one ADK event (its JSON) to ``session``; nothing is flushed.
    A model response is preceded, in its step, by the header of the request it answers
    (``header``) when ``headers`` says the log does not hold it last. Returns whether the
    event was a model response (so ``header`` was its request's, and is used up)."""
    kind = kind_of(event)
    kept = encode(event)  # (refused before anything is appended)
    turn = open_turn(session.events, brackets.marks(session))
    if kind == "results":
        ids = [str(r.get("id")) for r in responses_of(event)]
        askable = turn is not None and all(i in turn.calls and i not in turn.answered for i in ids)
        if not askable or len(set(ids)) != len(ids):
            kind = "other"  # (an answer to no call of the open turn would be an orphan)
    if kind == "user":
        if turn is not None and not turn.unanswered:
            end_turn(session, turn)
            turn = None
        start_turn(session, turn, brackets.marks(session))
        session.append(USER_MESSAGE, user_data(event, kept, str(uuid.uuid4())), surface_op="append")
    elif kind == "model":
        turn = next_step(session, turn, marks=brackets.marks(session))
        if header is not None and headers is not None:
            headers.log(session, header)
        data = assistant_data(event, kept, turn.number, turn.last_step)
        session.append(ASSISTANT_MESSAGE, data, surface_op="append", source_event_seqs=[])
        turn.step_answered = turn.answered_any = True
        asked = [block for block in data["message"]["content"] if block["type"] == "tool-call"]
        for block in asked:
            turn.calls[block["id"]] = (turn.last_step, block["name"], block["arguments"], None)
            record_call(session, turn, block["id"])
        if not asked:
            end_turn(session, turn)
    elif kind == "results":
        assert turn is not None
        for index, response in enumerate(responses_of(event)):
            call_id = str(response.get("id"))
            call_seq = record_call(session, turn, call_id)
            first = kept if index == 0 else None
            data = tool_result_data(first, response, turn.number, turn.calls[call_id][0])
            session.append(TOOL_RESULT, data, surface_op="append", source_event_seqs=[call_seq])
            turn.answered.add(call_id)
    else:
        session.append(ADK_EVENT, {"event": kept})
    return kind == "model"
