"""The tree of child agents under a session, for the views that roll it up (``show``,
``stats``, ``view``): the child sessions its tool calls ran, read from the store, and theirs.

Guarantees: read-only (each child is inspected: closers in memory, never written); a child
named in the log but not stored (it never started, or was deleted) is reported as missing,
never an error; at most 1,000 child sessions are read under one session, and a child seen
twice (a call run again after a crash) is read once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_session.session import SessionError, SessionNotFoundError
from agent_session.session.events.subagents import spawned
from agent_session.session.persistence.service import SessionPersistence

__all__ = ["Child", "children_of"]

_LIMIT = 1000
"""The most child sessions a view reads under one session."""


@dataclass(slots=True)
class Child:
    """One child agent's session under a parent."""

    id: str
    call_id: Any
    events: Sequence[Any] | None
    """Its log with its repair in memory; ``None`` when it is not stored."""
    children: list[Child] = field(default_factory=list)
    problem: str | None = None
    """Why its log could not be read, if it could not."""


async def children_of(
    store: SessionPersistence, events: Sequence[Any], seen: set[str] | None = None
) -> list[Child]:
    """The child sessions ``events``' calls ran, in the order they were spawned, each with
    its own children."""
    seen = set() if seen is None else seen
    out: list[Child] = []
    for call_id, id in spawned(events).items():
        if id in seen or len(seen) >= _LIMIT:
            continue
        seen.add(id)
        try:
            log = (await store.inspect(id)).events
        except SessionNotFoundError:
            out.append(Child(id, call_id, None))
            continue
        except SessionError as e:
            out.append(Child(id, call_id, None, problem=str(e)))
            continue
        out.append(Child(id, call_id, log, await children_of(store, log, seen)))
    return out
