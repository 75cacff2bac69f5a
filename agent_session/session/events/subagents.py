"""Subagents in a log: which tool calls of a session run a child agent, and where the child
stands, read from the two logs alone.

A tool call that runs a child agent (``agent_session.agent_loop.subagents``) records
``subagent/spawned {callId, session, depth}`` in the parent, durable before the child's first
model request; the child's header names the parent (``parentSession``, ``origin:
"subagent"``, ``delegationDepth``). Crash repair of the parent answers such a call with the
child's state instead of a bare unknown (:func:`child_answer`): ``finished`` (its answer, a
success), ``interrupted`` (incomplete, not a success; settled by running the call again, which
continues the child) or ``not-started`` (nothing of it ran).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent_session.session.events.eventlog import is_run, iter_parts, walk_back
from agent_session.session.events.turns import brackets
from agent_session.session.events.types import (
    ASSISTANT_MESSAGE,
    SUBAGENT_SPAWNED,
    TOOL_RESULT,
    TURN_END,
)

__all__ = ["ChildAnswer", "child_answer", "child_id", "spawned", "unanswered_children"]

ChildState = Literal["finished", "interrupted", "not-started"]


def child_id(parent: str, call_id: str) -> str:
    """The id of the child session the call ``call_id`` of session ``parent`` runs: a
    function of the two, so a call run again finds its child."""
    return f"{parent}>{call_id}"


@dataclass(frozen=True, slots=True)
class ChildAnswer:
    """What the parent's call is answered with when a crash cut it."""

    session: str
    state: ChildState
    text: str
    """The child's answer (``finished``), or what happened to it."""

    def meta(self) -> dict[str, Any]:
        """The ``meta`` of a parent's result that says where the child stands."""
        return {"subagent": {"session": self.session, "state": self.state}}


def spawned(events: Sequence[Any], start: int = 0) -> dict[Any, str]:
    """``callId`` → child session of every ``subagent/spawned`` of ``events`` from index
    ``start`` on."""
    found: dict[Any, str] = {}
    for event in iter_parts(events[start:] if start else events):
        if is_run(event) or event.type != SUBAGENT_SPAWNED:
            continue
        data = event.data if isinstance(event.data, Mapping) else {}
        if isinstance(data.get("session"), str):
            found[data.get("callId")] = data["session"]
    return found


def unanswered_children(events: Sequence[Any]) -> dict[Any, str]:
    """The calls of the open last turn that run a child agent and have no result yet
    (``callId`` → child session); empty when every turn is closed."""
    start = brackets(events).open_start
    if start is None:
        return {}
    children = spawned(events, start)
    if not children:
        return {}
    for event in iter_parts(events[start:]):
        if not is_run(event) and event.type == TOOL_RESULT:
            source = event.data.get("message", {}).get("source", {})
            children.pop(source.get("callId"), None)
    return children


def child_answer(session: str, tail: Sequence[Any] | None, start: int = 0) -> ChildAnswer:
    """The state of child ``session`` from the last events of its log, seq ``start`` first
    (``None``: not stored): finished when its last turn completed (its last answer's text),
    not started when it has no turn, interrupted otherwise."""
    last = brackets(tail) if tail else None
    if last is None or (last.last is None and start == 0):
        text = f"the subagent (session {session}) never started: nothing of it ran"
        return ChildAnswer(session, "not-started", text)
    ended = next((e.data for _, e in walk_back(tail or ()) if e.type == TURN_END), None)
    reason = ended.get("reason") if isinstance(ended, Mapping) else None
    if last.last == "end" and isinstance(reason, Mapping) and reason.get("kind") == "completed":
        return ChildAnswer(session, "finished", _last_answer(tail or ()))
    return ChildAnswer(
        session,
        "interrupted",
        f"the subagent (session {session}) was interrupted before it finished: its work is "
        "incomplete, not a success; resuming this session continues it",
    )


def _last_answer(events: Sequence[Any]) -> str:
    for _, event in walk_back(events):
        if event.type == ASSISTANT_MESSAGE:
            content = event.data.get("message", {}).get("content", ())
            return "".join(b.get("text", "") for b in content if b.get("type") == "text")
    return ""
