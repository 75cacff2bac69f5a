"""The logs an integration writes for a framework whose storage interface names a key per call
(a LangGraph thread, a Claude Agent SDK transcript): each key is one session of the store,
taken by its first write in this process and held for the next ones. Every method runs on
the integration's private event loop, one at a time, so a log's appends are one ordered
queue.

Guarantees:

- A log is taken (the store's writer lock, then its live session) by its first write here
  and held until :meth:`HeldLogs.let_go`, :meth:`HeldLogs.close` or ``max_open`` other logs
  were written after it. While it is held, another process's write of it is refused with
  :class:`SessionCollisionError` naming this one, and this one's write of a log another
  process holds is refused the same way: nothing is ever spliced into a log two writers
  share.
- :meth:`HeldLogs.append` returns once its events, and every event appended before them,
  are durable (a flush writes the session's whole pending prefix). An append that fails
  leaves nothing of itself behind: the log is let go (the next write reads it again).
- Reads take nothing: a log held here is read from memory, any other from the store.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from agent_session.session.errors import SessionCollisionError, SessionNotFoundError
from agent_session.session.events.event import SessionEvent
from agent_session.session.live.runtime import Runtime
from agent_session.session.live.session import Session
from agent_session.session.live.store import fork_prefix
from agent_session.session.persistence.service import SessionPersistence
from agent_session.stores import StoreSpec

__all__ = ["HeldLogs"]

S = TypeVar("S")


class HeldLogs:
    """The logs of one store that this process writes (see the module docstring);
    ``name(id)`` says in errors what a log is to the framework."""

    def __init__(
        self,
        spec: StoreSpec,
        options: dict[str, Any],
        max_open: int,
        name: Callable[[str], str],
        *,
        keep_open: bool = False,
    ) -> None:
        """``keep_open``: a log taken keeps a turn a crash left open (its driver goes on
        with it: :meth:`SessionPersistence.resume`); by default a load closes it."""
        if type(max_open) is not int or max_open < 1:
            raise ValueError(f"max_open must be a positive integer, got {max_open!r}")
        self._spec = spec
        self._options = options
        self.max_open = max_open
        self._name = name
        self._keep_open = keep_open
        self._runtime: Runtime | None = None
        self._held: OrderedDict[str, Session] = OrderedDict()
        self._kept: dict[str, Any] = {}
        self._taking: dict[str, asyncio.Future[Session]] = {}

    @property
    def runtime(self) -> Runtime:
        """The runtime the store is installed in (started by the first use)."""
        if self._runtime is None:
            runtime = Runtime()
            runtime.install(self._spec.open(**self._options))
            self._runtime = runtime
        return self._runtime

    @property
    def store(self) -> SessionPersistence:
        """The open store."""
        persistence = self.runtime.persistence
        assert persistence is not None
        return persistence

    def held(self, id: str) -> Session | None:
        """The live session of ``id`` when this process holds it."""
        return self._held.get(id)

    async def take(self, id: str) -> Session:
        """The live session of ``id``, taken for writing (created when nothing is stored);
        calls that overlap share one taking."""
        session = self._held.pop(id, None)
        if session is None:
            taking = self._taking.get(id)
            if taking is None:
                taking = self._taking[id] = asyncio.ensure_future(self._open(id))
            session = await asyncio.shield(taking)
            self._held.pop(id, None)
        self._held[id] = session  # (the most recently written last)
        while len(self._held) > self.max_open:
            await self.let_go(next(iter(self._held)))
        return session

    async def _open(self, id: str) -> Session:
        """Take ``id``: held here from the moment its session is live (before any caller of
        :meth:`take` resumes, so none can open it a second time)."""
        try:
            storage = self.store.storage
            try:
                await storage.acquire(id)
            except SessionCollisionError as e:
                raise type(e)(f"{self._name(id)} is written by another process: {e}") from None
            try:
                session = await self._resumed(id)
            except BaseException:
                await storage.release(id)
                raise
            self._held[id] = session
            return session
        finally:
            self._taking.pop(id, None)

    async def _resumed(self, id: str) -> Session:
        if not self._keep_open:
            return await self.runtime.sessions.open_or_create(id)
        try:
            return await self.store.resume(id, keep_open=True)
        except SessionNotFoundError:
            return self.runtime.sessions.create(id)

    def kept(self, id: str, make: Callable[[], S]) -> S:
        """What the integration keeps of the log ``id`` (``make()`` the first time) while this
        process holds it: dropped when it is let go, so it never outlives the live session
        it was folded from."""
        if id not in self._held:
            raise KeyError(f"{self._name(id)} is not held here")
        if id not in self._kept:
            self._kept[id] = make()
        return cast(S, self._kept[id])

    async def let_go(self, id: str) -> None:
        """Stop writing ``id`` here, so that another process may (its writes are durable)."""
        self._kept.pop(id, None)
        session = self._held.pop(id, None)
        if session is not None:
            await self.runtime.sessions.dispose(session)
            await self.store.storage.release(id)

    async def append(self, id: str, events: Sequence[tuple[str, Any]]) -> Session:
        """Append ``(type, data)`` events to the log of ``id`` and return its live session
        once they are durable."""
        session = await self.take(id)
        try:
            for type, data in events:
                session.append(type, data)
            await self.runtime.sessions.flush(session)
        except BaseException:
            # nothing of this call may reach the log later: forget the live session
            await self.let_go(id)
            raise
        return session

    async def events(self, id: str) -> Sequence[SessionEvent] | None:
        """The log of ``id`` as it is now (``None``: nothing is stored)."""
        session = self._held.get(id)
        if session is not None:
            return session.events
        try:
            return (await self.store.inspect(id)).events
        except SessionNotFoundError:
            return None

    async def ids(self, prefix: str) -> list[str]:
        """The ids starting with ``prefix`` that the store holds a log of, sorted."""
        ids = {header.id for header in await self.store.list_headers()}
        ids.update(id for id, s in self._held.items() if s.events)  # (not yet listed)
        return sorted(id for id in ids if id.startswith(prefix))

    async def delete(self, id: str) -> bool:
        """Remove the log of ``id``; ``False`` when there was none. Raises
        :class:`SessionCollisionError` when another process holds it."""
        await self.let_go(id)
        try:
            await self.store.delete(id)
        except SessionNotFoundError:
            return False
        return True

    async def copy(self, source: str, target: str) -> bool:
        """Write ``target`` as a fork of the whole log of ``source`` (its header names the
        source as its parent); ``False`` when the source has no log. Raises
        :class:`SessionCollisionError` when the target has a log already."""
        held = self._held.get(source)
        events: Sequence[SessionEvent]
        if held is not None:
            header, events = held.header, held.events
        else:
            try:
                stored = await self.store.inspect(source)
            except SessionNotFoundError:
                return False
            header, events = stored.header, stored.events
        if await self.store.storage.revision(target) is not None or target in self._held:
            raise SessionCollisionError(f"cannot copy into {self._name(target)}: it has a log")
        prefix = fork_prefix(source, events, len(events) - 1) if events else []
        forked = self.runtime.sessions.create(
            target, seed=prefix, cwd=header.cwd, parent_session=source, seed_length=len(prefix)
        )
        try:
            await self.runtime.sessions.flush(forked)
        finally:
            await self.runtime.sessions.dispose(forked)
            await self.store.storage.release(target)
        return True

    async def close(self) -> None:
        """Let every log go and close the store (a later use starts it again)."""
        try:
            for id in list(self._held):
                await self.let_go(id)
        finally:
            runtime, self._runtime = self._runtime, None
            if runtime is not None:
                await runtime.__aexit__(None, None, None)
