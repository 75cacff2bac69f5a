"""The tool-call ids a model answer may use: each call of a session's history needs an id of
its own, since a provider pairs every result with its call by id and refuses a history in
which two calls share one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agent_loop.models import LlmError
from session.events.types import ASSISTANT_MESSAGE
from session.live.session import Session

__all__ = ["DUPLICATE_CALL_ID", "call_seq", "refuse_reused_ids"]

DUPLICATE_CALL_ID: Final = "DUPLICATE_TOOL_CALL_ID"
"""The failure code of a model answer that asks for a call under an id the history already
holds (every provider refuses such a request)."""


def refuse_reused_ids(
    session: Session, history: Sequence[Mapping[str, Any]], content: Sequence[Mapping[str, Any]]
) -> None:
    """Raise :class:`LlmError` (nothing of the answer is recorded as a message, none of its
    calls runs) when ``content`` asks for a tool call under an id one of ``history``'s
    messages (the request the answer replies to) already used, or twice itself."""
    ids = [b.get("id") for b in content if b.get("type") == "tool-call"]
    if not ids:
        return
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
