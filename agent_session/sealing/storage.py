"""A store's storage with sealed sessions (:class:`SealedStorage`): every event it writes of
a sealed session is sealed before the medium sees it, and opened again when read, so the
live session, the agent and every reader through this backend see plaintext while the
bytes on disk (and every copy of them) hold ciphertext.

Guarantees: a session this storage creates is sealed with a new key (made durable before
its first line), or with its source's key when it is a copy or a fork of a sealed one
(:meth:`SealedStorage.use_key`); a session stored in clear before sealing was turned on stays in
clear (never half sealed); a sealed session that holds a line of a sealed type in clear
fails closed on read; the raw bytes (``read_raw``) and the chain's lines are the sealed
ones, so ``verify --integrity`` checks them with no key, and still does once the session's
key is erased. A sealed store keeps one line per event (no packed runs of deltas).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from agent_session.sealing.keyring import Keyring
from agent_session.sealing.seal import key_of_value, open_event, seal_event, sealed_value
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.eventlog import is_run, iter_parts
from agent_session.session.events.header import SessionHeader
from agent_session.session.persistence.api import (
    RawArtifact,
    SessionSnapshot,
    StoredLog,
    StoredTail,
)
from agent_session.session.persistence.storage import Storage

if TYPE_CHECKING:
    from agent_session.session.persistence.service import SessionPersistence

__all__ = ["SealedStorage", "keyring_of", "seal_like"]

_PLAIN = ""
"""The key id recorded for a session kept in clear."""


class SealedStorage(Storage):
    """``inner`` with its sessions sealed by ``keyring``'s keys."""

    writes_lines = False
    reuses_line = False  # (it stores the sealed event's line, never the plaintext one)

    def __init__(self, inner: Storage, keyring: Keyring) -> None:
        self.inner = inner
        self.keyring = keyring
        self.name = inner.name
        inner.pack = False  # (one line per event, each sealed)
        self._kids: dict[str, str] = {}
        self._digested: dict[tuple[str, int], tuple[SessionEvent, SessionEvent]] = {}
        """Events a chain had sealed at commit (``stored_line``), with their sealed form,
        until the flush that writes them takes it: each event is sealed once."""
        self._last: tuple[Sequence[SessionEvent], list[SessionEvent]] | None = None
        """The last batch sealed, and its sealed form: a medium that declines an inline
        append is handed the same batch again (``start_append``, ``append``)."""

    def __getattr__(self, name: str) -> Any:  # the medium's own attributes (ops, run_read)
        return getattr(self.inner, name)

    # --- keys -------------------------------------------------------------------------------

    def _kid(self, id: str) -> str:
        kid = self._kids.get(id)
        if kid is None:  # a session created here (a stored one was read first)
            kid = self._kids[id] = self.keyring.new_key(id)
        return kid

    def key_of(self, id: str) -> str | None:
        """The key id ``id`` is sealed with, once read or written here (``None``: in clear,
        or not known yet)."""
        return self._kids.get(id) or None

    def use_key(self, id: str, kid: str) -> None:
        """Seal the new session ``id`` with the existing key ``kid`` (a copy of a sealed
        session keeps its key: erasing it then covers the copy too)."""
        self.keyring.keys(kid, id)  # (fails closed when this keyring lacks it)
        self._kids[id] = kid

    def _sealed(self, events: Sequence[Any]) -> str | None:
        """The key id of the first sealed event of ``events``."""
        for item in iter_parts(events):
            if is_run(item):
                continue
            value = sealed_value(item.get("data") if isinstance(item, Mapping) else item.data)
            if value is not None:
                return key_of_value(value)
        return None

    def _seal(self, id: str, events: Sequence[SessionEvent]) -> list[SessionEvent]:
        last = self._last
        if last is not None and last[0] is events:
            return last[1]
        kid = self._kid(id)
        if kid == _PLAIN:
            return list(events)
        out = []
        for event in events:
            known = self._digested.pop((id, event.seq), None)
            same = known is not None and (known[0] is event or known[0] == event)
            sealed = known[1] if same and known is not None else None
            out.append(sealed or seal_event(self.keyring, kid, id, event))
        self._last = (events, out)
        return out

    def _open(self, id: str, events: Sequence[Any], *, whole: bool) -> Sequence[Any]:
        """``events`` opened; ``whole``: the whole log (how it is stored is learnt)."""
        kid = self._sealed(events)
        if whole:
            self._kids[id] = kid or (_PLAIN if events else self._kids.get(id, _PLAIN))
        known = self._kids.get(id)
        if kid is None and known in (None, _PLAIN):
            return events
        out: list[Any] = []
        for item in events:
            if isinstance(item, Mapping):
                item = SessionEvent.from_json(item)
            out.append(open_event(self.keyring, id, item, sealed_session=True))
        return out

    # --- the medium, sealed -----------------------------------------------------------------

    def stored_line(self, id: str, event: SessionEvent, line: bytes | None = None) -> bytes:
        (sealed,) = self._seal(id, [event])
        self._digested[id, event.seq] = (event, sealed)  # (the flush writes this one)
        return self.inner.stored_line(id, sealed)

    def check_id(self, id: str) -> None:
        self.inner.check_id(id)

    async def load(self, id: str) -> StoredLog | None:
        stored = await self.inner.load(id)
        if stored is None:
            return None
        events = await asyncio.to_thread(self._open, id, stored.events, whole=True)
        return StoredLog(stored.header, events, stored.revision, stored.cut_at, stored.size)

    async def revision(self, id: str) -> str | None:
        return await self.inner.revision(id)

    def stored_now(self, id: str) -> bool | None:
        return self.inner.stored_now(id)

    async def append(
        self, header: SessionHeader, events: Sequence[SessionEvent], *, materialized: bool
    ) -> None:
        if materialized and header.id not in self._kids:
            await self.load(header.id)  # (how it is stored: sealed or in clear)
        await self.inner.append(header, self._seal(header.id, events), materialized=materialized)

    async def append_batches(
        self, header: SessionHeader, batches: Sequence[Sequence[SessionEvent]]
    ) -> None:
        sealed = [self._seal(header.id, batch) for batch in batches]
        await self.inner.append_batches(header, sealed)

    def append_inline(
        self, header: SessionHeader, events: Sequence[SessionEvent], *, sole_writer: bool
    ) -> bool:
        if header.id not in self._kids:
            return False  # (append learns how it is stored first)
        sealed = self._seal(header.id, events)
        return self.inner.append_inline(header, sealed, sole_writer=sole_writer)

    def start_append(
        self, header: SessionHeader, events: Sequence[SessionEvent]
    ) -> asyncio.Future[None] | None:
        if header.id not in self._kids:
            return None
        return self.inner.start_append(header, self._seal(header.id, events))

    async def commit_repair(
        self, header: SessionHeader, cut_at: object | None, closers: Sequence[SessionEvent]
    ) -> None:
        await self.inner.commit_repair(header, cut_at, self._seal(header.id, closers))

    def as_stored(self, events: Sequence[SessionEvent]) -> Sequence[SessionEvent]:
        return self.inner.as_stored(events)

    async def list_snapshots(self) -> list[SessionSnapshot]:
        return await self.inner.list_snapshots()

    async def acquire(self, id: str) -> bool:
        return await self.inner.acquire(id)

    async def writer_elsewhere(self, id: str) -> bool:
        return await self.inner.writer_elsewhere(id)

    async def release(self, id: str) -> None:
        self._forget(id)
        await self.inner.release(id)

    def _forget(self, id: str) -> None:
        for key in [key for key in self._digested if key[0] == id]:
            del self._digested[key]

    def locate(self, header: SessionHeader) -> str | None:
        return self.inner.locate(header)

    async def read_raw(self, id: str) -> RawArtifact | None:
        return await self.inner.read_raw(id)

    @property
    def reads_from_last(self) -> bool:  # type: ignore[override]  # (the inner medium's)
        return self.inner.reads_from_last

    async def read_from_last(self, id: str, type: str) -> StoredTail | None:
        # (types are stored in clear: the inner medium finds the event)
        return await self._opened(id, await self.inner.read_from_last(id, type))

    async def read_tail(self, id: str, count: int) -> StoredTail | None:
        return await self._opened(id, await self.inner.read_tail(id, count))

    async def _opened(self, id: str, tail: StoredTail | None) -> StoredTail | None:
        if tail is None:
            return None
        opened = await asyncio.to_thread(self._open, id, tail.events, whole=False)
        return StoredTail(tail.header, tail.start, opened, tail.torn)

    async def delete(self, id: str) -> bool:
        self._kids.pop(id, None)
        self._forget(id)
        return await self.inner.delete(id)

    async def close(self) -> None:
        await self.inner.close()


def keyring_of(storage: Storage) -> Keyring | None:
    """The keyring ``storage`` seals with (``None``: it seals nothing)."""
    return storage.keyring if isinstance(storage, SealedStorage) else None


def seal_like(store: SessionPersistence, like: Storage, id: str | None = None) -> None:
    """Seal ``store`` (a staging store that writes for ``like``) as ``like`` is sealed, with
    ``id``'s key when ``like`` knows it: what it stages is sealed, never in clear."""
    if isinstance(like, SealedStorage):
        keyring, kid = like.keyring, like.key_of(id) if id is not None else None
        store.wrap_storage(lambda storage: SealedStorage(storage, keyring))
        if kid is not None and id is not None:
            cast(SealedStorage, store.storage).use_key(id, kid)
