"""The writer's side of the chain: a store opened with ``integrity=True`` anchors each live
session's stored lines at checkpoints.

Guarantees:

- Each event's line is encoded once and digested then: at commit (a streamed delta, at the
  next flush), and what a JSONL or PostgreSQL store writes is that encoding (a SQLite row
  is made from the event's columns, and digested as the row renders). At
  every flush (the checkpoints are flushes), before its batch is written, every line not
  folded yet is folded into the session's chain. The flush that follows a turn's end, or
  that finds :data:`EVERY_LINES` lines waiting, appends the ``audit/anchor``
  (:mod:`.chain`) that covers them; it goes to disk in that same batch, so anchoring costs
  no write of its own. So a session that ends its turns has every line anchored when its
  turn ends; a crash leaves at most the lines since the last anchor uncovered, until the
  next writer anchors them.
- A fork's chain takes in its seed's anchors: the lines its parent anchored are anchored.
- A resumed session's chain is rebuilt from its stored lines as read back (``read_raw``),
  never from events encoded again, so the first anchor after a resume agrees with what a
  verifier reads.
- A store with a chain keeps one stored line per event (streamed deltas are not packed),
  so each seq has its own digest.
- A crash loses at most the lines after the last anchor that reached the disk: the next
  writer anchors them with the rest. Nothing here can raise into an append.
"""

from __future__ import annotations

import logging
from typing import Final

from agent_session.session.chain.chain import Chain, header_digest
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.header import header_line
from agent_session.session.events.types import AUDIT_ANCHOR, TURN_END
from agent_session.session.live.session import Session
from agent_session.session.persistence.batches import keep_run_lines
from agent_session.session.persistence.live import LiveWriter
from agent_session.session.persistence.storage import Storage

__all__ = ["Anchoring"]

log = logging.getLogger("agent_session.audit")

EVERY_LINES: Final = 64
"""A flush anchors once this many lines wait for an anchor, even mid-turn."""
_CLOSING: Final = frozenset({TURN_END})
"""Events after which the next flush anchors: a turn's end."""


class Anchoring:
    """The chains of one backend's live sessions (installed by the backend: see
    ``SessionPersistence.install``)."""

    def __init__(self, storage: Storage, writer: LiveWriter) -> None:
        self.storage = storage
        storage.pack = False  # one stored line per event: every seq has its own digest
        if storage.reuses_line:  # (each line encoded once, at commit, and shared)
            storage.writes_lines = True
            writer.encodes = True
        self._writer = writer
        """Whose pending lines a fold reads (so no line is encoded twice), and keeps the
        lines a fold encoded for the write to take (a streamed delta's)."""
        self._keeps = type(storage).stored_line is Storage.stored_line
        """Whether the medium stores the JSONL line itself (what the write can take)."""
        self._chains: dict[str, tuple[Chain, str]] = {}

    def on_created(self, session: Session) -> None:
        """``session/created``: a new session's chain starts at the genesis."""
        if session.id not in self._chains:
            self._chains[session.id] = (Chain(), header_digest(header_line(session.header)))

    async def adopt(self, session: Session) -> None:
        """Rebuild a resumed session's chain from its stored lines (call before its first
        flush). A log that cannot be read back starts no chain: its flushes anchor nothing,
        and a warning says so."""
        from agent_session.session.chain.integrity import stored_units

        try:
            raw = await self.storage.read_raw(session.id)
        except Exception as e:  # (the load just read it: this is a race with a deletion)
            log.warning('session "%s": its chain cannot be rebuilt: %s', session.id, e)
            self._chains.pop(session.id, None)
            return
        chain = Chain()
        header = header_digest(header_line(session.header))
        if raw is not None:
            head, units = stored_units(raw.content)
            header = header_digest(head)
            for unit in units:
                if unit.torn or unit.seq is None or unit.line is None:
                    break  # (a torn tail: the load that resumed it cut it)
                chain.add(unit.seq, unit.count, unit.line, unit.anchor)
        self._chains[session.id] = (chain, header)

    def on_line(self, session: Session, event: SessionEvent, line: bytes | None) -> None:
        """An event as it was committed (with its JSONL line, when the medium reuses it):
        folded now when it is the next line of the chain (a line after an unfolded run of
        deltas waits for the flush), so a checkpoint finds its lines digested already."""
        found = self._chains.get(session.id)
        if found is None or event.seq != found[0].through + 1:
            return
        self._fold(found[0], session.id, event, line)

    def _fold(self, chain: Chain, id: str, event: SessionEvent, known: bytes | None) -> None:
        kind = event.type
        line = self.storage.stored_line(id, event, known)
        chain.add(event.seq, 1, line, event.data if kind == AUDIT_ANCHOR else None)
        if kind in _CLOSING:
            chain.closed = True

    def on_flush(self, session: Session) -> None:
        """``session/flush`` (registered before the writer's): fold in the new events' lines
        and append the anchors that cover them, so this flush writes them."""
        found = self._chains.get(session.id)
        if found is None:
            return
        chain, header = found
        lines, items = self._writer.pending(session)
        deltas: dict[int, bytes] = {}
        for seq in range(chain.through + 1, session.seq):  # (deltas, and what follows them)
            event = session.event_at(seq)
            known = lines.get(seq)
            if known is None and self.storage.reuses_line:  # (a delta's: encoded once, here,
                known = deltas[seq] = event.encode()  # for the chain and the write)
            self._fold(chain, session.id, event, known)
        if deltas and self._keeps:
            keep_run_lines(items, deltas, lines)
        if chain.closed or len(chain.pending) >= EVERY_LINES:
            while chain.unanchored:
                session.append(AUDIT_ANCHOR, chain.take_anchor(header))
            chain.closed = False

    def on_disposed(self, session: Session) -> None:
        """``session/disposed``: forget its chain."""
        self._chains.pop(session.id, None)
