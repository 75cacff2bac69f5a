"""The tool-call ids a model answer may use: each call of a session's history needs an id of
its own, since a provider pairs every result with its call by id and refuses a history in
which two calls share one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agent_session.agent_loop.models import LlmError
from agent_session.session.events.types import ASSISTANT_MESSAGE
from agent_session.session.live.session import Session

__all__ = ["DUPLICATE_CALL_ID", "INVALID_CALL", "call_seq", "refuse_bad_calls"]

DUPLICATE_CALL_ID: Final = "DUPLICATE_TOOL_CALL_ID"
"""The failure code of a model answer that asks for a call under an id the history already
holds (every provider refuses such a request)."""
INVALID_CALL: Final = "INVALID_TOOL_CALL"
"""The failure code of a model answer that asks for a call without an id or a name (no result
could ever answer it)."""


def refuse_bad_calls(
    session: Session, history: Sequence[Mapping[str, Any]], content: Sequence[Mapping[str, Any]]
) -> None:
    """Raise :class:`LlmError` (nothing of the answer is recorded as a message, none of its
    calls runs) when ``content`` asks for a tool call without a non-empty string id and name,
    or under an id one of ``history``'s messages (the request the answer replies to) already
    used, or twice itself."""
    calls = [b for b in content if b.get("type") == "tool-call"]
    if not calls:
        return
    for block in calls:
        id, name = block.get("id"), block.get("name")
        if not (isinstance(id, str) and id and isinstance(name, str) and name):
            raise LlmError(
                {
                    "message": f"the model asked for a tool call without an id or a name "
                    f"(id {id!r}, name {name!r}); nothing of its answer was recorded",
                    "code": INVALID_CALL,
                }
            )
    ids = [b.get("id") for b in calls]
    used = {
        block.get("id")
        for message in history
        if message.get("role") == "assistant"
        for block in message.get("content", ())
        if block.get("type") == "tool-call"
    }
    seen: set[Any] = set()
    for id in ids:
        if id in used or id in seen:
            where = call_seq(session, id)
            earlier = f"the call at seq {where}" if where is not None else "an earlier call"
            raise LlmError(
                {
                    "message": f'the model asked for tool call "{id}" at seq {session.seq + 1} '
                    f"under the id of {earlier}; a history with two calls of one id is one no "
                    "provider accepts, so neither this answer nor its calls were recorded",
                    "code": DUPLICATE_CALL_ID,
                }
            )
        seen.add(id)


def call_seq(session: Session, call_id: Any) -> int | None:
    """The seq of the visible ``assistant/message`` that asked for ``call_id`` (or ``None``)."""
    events = session.events
    for seq in session.surface.nodes:
        event = events[seq]
        if event.type == ASSISTANT_MESSAGE and any(
            block.get("type") == "tool-call" and block.get("id") == call_id
            for block in event.data["message"].get("content", ())
        ):
            return seq
    return None
