"""Reading a session as the SDK sees it: its item history (a pure function of a live
session's events and surface)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_session.integrations.openai_agents.items import items_of
from session.events.event import SessionEvent
from session.events.eventlog import LazyRun, iter_parts
from session.events.surface import SurfaceReplace
from session.events.types import FRAMEWORK_ITEM, FRAMEWORK_ITEMS_FORGOTTEN
from session.json.lossless import thaw
from session.live.session import Session

__all__ = ["Entry", "history"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One item of the history and the event it comes from."""

    item: dict[str, Any]
    seq: int


def history(session: Session, since: int | None = None) -> list[Entry]:
    """The SDK items of ``session`` in order: the items of each surface event in surface
    order, and the kept ``openai-agents/item`` events not forgotten since, each where it was
    added. A surface event that replaced others takes the place of the first one it replaced
    (so ``pop_item``'s replacement stays where the popped message was). With ``since``, only
    the items of events after that seq (the scan starts there)."""
    events = session.events
    after = -1 if since is None else since
    anchor: dict[int, int] = {}
    kept: list[SessionEvent] = []
    forgotten: set[int] = set()
    for event in iter_parts(events[after + 1 :] if after >= 0 else events):
        if type(event) is LazyRun:
            continue  # packed chunk deltas: never an item
        op = event.surface_op
        if op is not None:
            start = op.start if isinstance(op, SurfaceReplace) else event.seq
            anchor[event.seq] = anchor.get(start, start)
        elif event.type == FRAMEWORK_ITEM:
            kept.append(event)
        elif event.type == FRAMEWORK_ITEMS_FORGOTTEN:
            forgotten.update(event.data.get("seqs") or ())
    ordered: list[tuple[int, int, int, dict[str, Any]]] = []
    for seq in session.surface.nodes:
        if seq <= after:
            continue
        for index, item in enumerate(items_of(events[seq])):
            ordered.append((anchor[seq], seq, index, item))
    for event in kept:
        if event.seq not in forgotten:
            ordered.append((event.seq, event.seq, 0, thaw(event.data["item"])))
    ordered.sort(key=lambda entry: entry[:3])
    return [Entry(item, seq) for _, seq, _, item in ordered]
