"""Reading a session as the SDK sees it: its item history (a pure function of a live
session's events and surface)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agent_session.integrations.openai_agents.items import items_of
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.eventlog import is_run, iter_parts
from agent_session.session.events.surface import SurfaceReplace
from agent_session.session.events.types import FRAMEWORK_ITEM, FRAMEWORK_ITEMS_FORGOTTEN
from agent_session.session.json.lossless import thaw
from agent_session.session.live.session import Session

__all__ = ["Entry", "HistoryIndex", "added_keys", "history", "item_at"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One item of the history and the event it comes from."""

    item: dict[str, Any]
    seq: int
    index: int = 0
    """Its place among the items of that event."""


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
        if is_run(event):
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
    return [Entry(item, seq, index) for _, seq, index, item in ordered]


class HistoryIndex:
    """:func:`history` of one live session, kept as its log grows: the order of its items
    (event seq and index) is extended by the events appended since the last call, and read
    again whole only after a surface replace or a forget (``pop_item``, ``clear_session``);
    the items themselves are built only for the entries asked for. So the latest items of a
    long history cost what they hold, not what the history holds."""

    def __init__(self) -> None:
        self._session: Session | None = None
        self._done = 0
        self._keys: list[tuple[int, int]] = []
        self._disorder = -1
        """The last position whose seq is above the next one's (a replacement placed where
        what it replaced was); from the next position on, seqs only grow."""
        self._disorder_max = -1
        """The highest seq at or before :attr:`_disorder`."""

    def last_event(self, session: Session) -> list[Entry]:
        """The entries of the event that holds the last item (``[]`` for no history)."""
        keys = self._update(session)
        if not keys:
            return []
        at = len(keys) - 1
        while at > 0 and keys[at - 1][0] == keys[-1][0]:
            at -= 1
        chosen = keys[at:]
        items = self._items(session, chosen)
        return [Entry(item, seq, index) for (seq, index), item in zip(chosen, items, strict=True)]

    def since(self, session: Session, after: int) -> list[Entry]:
        """:func:`history` ``(session, after)``: the entries of events after seq ``after``,
        found from the end (the whole index is read only when a replacement made after
        ``after`` sits among older entries)."""
        keys = self._update(session)
        if self._disorder_max > after:
            chosen = [key for key in keys if key[0] > after]
        else:
            at = len(keys)
            while at > self._disorder + 1 and keys[at - 1][0] > after:
                at -= 1
            chosen = keys[at:]
        return [
            Entry(item, seq, index)
            for (seq, index), item in zip(chosen, self._items(session, chosen), strict=True)
        ]

    def latest(self, session: Session, limit: int | None) -> list[dict[str, Any]]:
        """The last ``limit`` items (all when ``None``), in order, as :func:`history` gives
        them."""
        keys = self._update(session)
        if limit is not None:
            keys = keys[-limit:] if limit > 0 else []
        return self._items(session, keys)

    @staticmethod
    def _items(session: Session, keys: list[tuple[int, int]]) -> list[dict[str, Any]]:
        events = session.events
        return [item_at(events[seq], index) for seq, index in keys]

    def _update(self, session: Session) -> list[tuple[int, int]]:
        events = session.events
        if session is not self._session or len(events) < self._done:
            self._session, self._done, self._keys = session, 0, []
            self._disorder = self._disorder_max = -1
        if self._done == len(events):
            return self._keys
        added = added_keys(iter_parts(events[self._done :]))
        if added is None:  # (a replace or a forget: the order is read again whole)
            keys = self._keys = [(entry.seq, entry.index) for entry in history(session)]
            self._disorder = max(
                (at for at in range(len(keys) - 1) if keys[at][0] > keys[at + 1][0]),
                default=-1,
            )
            self._disorder_max = max((k[0] for k in keys[: self._disorder + 1]), default=-1)
            self._done = len(events)
            return keys
        self._keys.extend(added)
        self._done = len(events)
        return self._keys


def added_keys(events: Iterable[Any]) -> list[tuple[int, int]] | None:
    """The ``(seq, index)`` keys of the items ``events`` add to the history, in order (packed
    delta runs hold none); ``None`` when one of them replaces or forgets earlier items, which
    may reorder or take away what came before."""
    added: list[tuple[int, int]] = []
    for event in events:
        if is_run(event):
            continue  # packed chunk deltas: never an item
        op = event.surface_op
        if isinstance(op, SurfaceReplace) or event.type == FRAMEWORK_ITEMS_FORGOTTEN:
            return None
        if op is not None:
            added.extend((event.seq, index) for index in range(len(items_of(event))))
        elif event.type == FRAMEWORK_ITEM:
            added.append((event.seq, 0))
    return added


def item_at(event: SessionEvent, index: int) -> dict[str, Any]:
    """The ``index``-th SDK item of ``event`` (a kept ``openai-agents/item`` holds one)."""
    if event.type == FRAMEWORK_ITEM:
        kept: dict[str, Any] = thaw(event.data["item"])
        return kept
    return items_of(event)[index]
