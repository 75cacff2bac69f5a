"""``SessionStore``: the live sessions of one runtime, their lifecycle hooks, ``fork`` and the
``flush`` durability barrier."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from agent_session.session.errors import (
    SessionBackendStateError,
    SessionCollisionError,
    SessionForkError,
    SessionNotFoundError,
    SessionNotLiveError,
)
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.header import now_ms
from agent_session.session.events.turns import brackets
from agent_session.session.json.lossless import is_safe_int
from agent_session.session.live.hooks import (
    SESSION_CREATED,
    SESSION_DISPOSED,
    SESSION_EVENT,
    SESSION_FLUSH,
    SESSION_VALIDATE,
    HookBus,
)
from agent_session.session.live.session import Clock, Hooks, Session

Loader = Callable[[str], Awaitable[Session]]
"""Loads a stored session and publishes it live (an installed persistence backend's
``resume``)."""

__all__ = ["SessionStore", "fork_prefix"]


def fork_prefix(
    source_id: str, events: Sequence[SessionEvent], boundary: int | None
) -> Sequence[SessionEvent]:
    """The events ``0..boundary`` of ``events`` (session ``source_id``'s log; all of them
    when ``boundary`` is ``None``) that a fork is seeded with. Raises
    :class:`SessionForkError` (``INVALID_BOUNDARY``: not a seq of the log; ``OPEN_TURN``: the
    prefix ends inside an open turn) with the reference's texts."""
    if boundary is None:
        prefix: Sequence[SessionEvent] = events
    else:
        if not is_safe_int(boundary) or boundary < 0:
            raise SessionForkError(
                f'fork boundary for session "{source_id}" must be a non-negative safe '
                f"integer, got {boundary!r}",
                "INVALID_BOUNDARY",
            )
        if boundary >= len(events):
            last = str(len(events) - 1) if events else "none"
            raise SessionForkError(
                f'fork boundary {boundary} does not exist in session "{source_id}" '
                f"(last seq: {last})",
                "INVALID_BOUNDARY",
            )
        if events[boundary].seq != boundary:
            raise SessionForkError(
                f'fork boundary {boundary} in session "{source_id}" does not match a '
                "contiguous event seq",
                "INVALID_BOUNDARY",
            )
        prefix = events[: boundary + 1]
    open_turn = brackets(prefix).open_turn
    if open_turn is not None:
        shown = len(prefix) - 1 if boundary is None else boundary
        raise SessionForkError(
            f'fork boundary {shown} in session "{source_id}" ends inside open turn {open_turn}',
            "OPEN_TURN",
        )
    return prefix


class SessionStore:
    """The live sessions of a runtime, keyed by id.

    Guarantees: at most one live session per id; ``session/created`` fires once per published
    session and ``session/disposed`` once when it leaves; ``flush`` returns only after every
    ``session/flush`` listener settled, and raises the first failure in registration order.
    """

    def __init__(self, hooks: HookBus, *, clock: Clock | None = None) -> None:
        self._hooks = hooks
        self._clock = clock
        self._live: dict[str, Session] = {}
        self._announcing: Session | None = None
        self.detach_pending: set[int] = set()
        """``id(session)`` of each session whose detach was asked for while it was publishing
        an append or being announced; the detach runs when that call unwinds."""
        self._loader: Loader | None = None
        self._hooks_version = -1
        self._hooks_pair: Hooks = ((), (), True)

    @property
    def clock(self) -> Clock | None:
        """The clock sessions of this store are created with (``None``: the wall clock)."""
        return self._clock

    def bind_loader(self, loader: Loader) -> Callable[[], None]:
        """Serve :meth:`resume` with ``loader`` (a persistence backend does this when it is
        installed); returns the function that unbinds it again."""
        self._loader = loader

        def unbind() -> None:
            if self._loader is loader:
                self._loader = None

        return unbind

    # --- lifecycle --------------------------------------------------------------------------

    def create(
        self,
        id: str | None = None,
        *,
        seed: Iterable[SessionEvent | Mapping[str, Any]] | None = None,
        cwd: str | None = None,
        parent_session: str | None = None,
        seed_length: int | None = None,
        delegation_depth: int = 0,
        origin: str | None = None,
        agent_preset: str | None = None,
        created_at: int | None = None,
    ) -> Session:
        """Create, publish and announce a session; a fresh UUID id when ``id`` is ``None``.

        Raises :class:`SessionCollisionError` (``session "<id>" already exists``) for a live id,
        ``SessionHeaderError`` for bad metadata and ``SessionEventError`` for a bad seed. A
        ``session/created`` observer that raises vetoes the creation: the session is removed,
        ``session/disposed`` still fires, and the error propagates.
        """
        if id is None:
            id = str(uuid.uuid4())
        elif not isinstance(id, str):
            raise TypeError(f"session id must be a str, got {type(id).__name__}")
        if id in self._live:
            raise SessionCollisionError(f'session "{id}" already exists')
        header: dict[str, Any] = {
            "version": 0,
            "id": id,
            "createdAt": created_at if created_at is not None else self._now(),
        }
        optional = {
            "cwd": cwd,
            "parentSession": parent_session,
            "seedLength": seed_length,
            "origin": origin,
        }
        header.update({k: v for k, v in optional.items() if v is not None})
        header["delegationDepth"] = delegation_depth
        if agent_preset is not None:
            header["agentPreset"] = agent_preset
        session = Session.create(id, seed=seed, header=header, clock=self._clock)
        self.attach(session)
        return session

    def attach(self, session: Session) -> None:
        """Publish a detached session (for example one restored from storage) and announce it.

        Raises :class:`SessionCollisionError` if its id is live or it is attached elsewhere.
        """
        if session.publisher is not None:
            raise SessionCollisionError(f'session "{session.id}" is already attached to a store')
        if session.id in self._live:
            raise SessionCollisionError(f'session "{session.id}" already exists')
        self._live[session.id] = session
        session.bind_publisher(self)
        self._announcing = session
        try:
            for observer in self._hooks.observers(SESSION_CREATED):
                observer(session)
        except BaseException:
            self._announcing = None
            self.detach_pending.discard(id(session))
            self._detach(session)
            raise
        self._announcing = None
        if id(session) in self.detach_pending:
            self.detach_pending.discard(id(session))
            self._detach(session)

    async def dispose(self, session: Session) -> None:
        """Remove a live session from the store and fire ``session/disposed`` (see
        :meth:`detach`); awaitable so that backends can later drain on disposal."""
        self.detach(session)

    def detach(self, session: Session) -> None:
        """Remove a live session from the store and fire ``session/disposed``, synchronously.

        Harmless for a session that is not live (or a stale object with a live id). A detach
        requested during an append or announcement of that session runs when that call unwinds.
        """
        if self._live.get(session.id) is not session:
            return
        if session.publishing or self._announcing is session:
            self.detach_pending.add(id(session))
            return
        self._detach(session)

    def _detach(self, session: Session) -> None:
        if self._live.get(session.id) is session:
            del self._live[session.id]
        session.bind_publisher(None)
        self._hooks.emit(SESSION_DISPOSED, session)

    async def resume(self, id: str) -> Session:
        """Load a stored session through the installed persistence backend (repairing it
        durably if it was interrupted) and publish it live, continuing at the next seq.

        Raises ``SessionError`` when no backend is installed, :class:`SessionCollisionError`
        while the id is live, ``SessionNotFoundError`` when nothing is stored.
        """
        if self._loader is None:
            raise SessionBackendStateError("no persistence backend is installed: cannot resume")
        return await self._loader(id)

    async def open_or_create(self, id: str, *, cwd: str | None = None) -> Session:
        """Resume the stored session ``id``, or create it when nothing is stored (with
        ``cwd``; a resumed session keeps its stored header). Raises as :meth:`resume` for
        anything but absence."""
        try:
            return await self.resume(id)
        except SessionNotFoundError:
            return self.create(id, cwd=cwd)

    # --- the Publisher contract (used by Session.append) ------------------------------------

    def append_hooks(self) -> Hooks:
        """The validators and observers of an append, and whether every observer takes runs
        (cached until a registration changes)."""
        hooks = self._hooks
        if self._hooks_version != hooks.version:
            observers = hooks.observers(SESSION_EVENT)
            self._hooks_pair = (
                hooks.observers(SESSION_VALIDATE),
                observers,
                all(getattr(fn, "takes_runs", False) for fn in observers),
            )
            self._hooks_version = hooks.version
        return self._hooks_pair

    def appended(self, session: Session) -> None:
        """Run a detach of ``session`` requested while it was publishing."""
        if id(session) in self.detach_pending and self._announcing is not session:
            self.detach_pending.discard(id(session))
            self._detach(session)

    # --- queries ----------------------------------------------------------------------------

    def get(self, id: str) -> Session | None:
        """The live session with that id, or ``None``."""
        return self._live.get(id)

    def list(self) -> list[Session]:
        """The live sessions in the order they entered, as a new list."""
        return list(self._live.values())

    def is_live(self, session: Session) -> bool:
        """Whether ``session`` is the live instance of its id here."""
        return self._live.get(session.id) is session

    # --- durability -------------------------------------------------------------------------

    async def flush(self, session: Session) -> bool:
        """The durability barrier: run every ``session/flush`` listener concurrently (all are
        started before any is awaited), wait for all to settle, then raise the failure of the
        first failing listener in registration order. Returns whether any listener ran.

        Raises :class:`SessionNotLiveError` for a session that is not live here.
        """
        if self._live.get(session.id) is not session:
            raise SessionNotLiveError(f'session "{session.id}" is not live in this store')
        return await self._hooks.gather(SESSION_FLUSH, session)

    # --- fork -------------------------------------------------------------------------------

    def fork(
        self,
        source: Session | str,
        boundary: int | None = None,
        child_id: str | None = None,
    ) -> Session:
        """Create a child session seeded with ``source``'s events ``0..boundary``.

        The boundary defaults to the last seq and must not end inside an open turn. The child's
        header records ``parentSession``, ``seedLength`` and the source's ``cwd``; its log is
        the prefix followed by ``session/end-seed``. Raises :class:`SessionForkError` with the
        reference's code and text.
        """
        if child_id is not None and child_id in self._live:
            raise SessionForkError(f'session "{child_id}" already exists', "SESSION_ALREADY_EXISTS")
        source_id = source if isinstance(source, str) else source.id
        live = self._live.get(source_id)
        if live is None:
            raise SessionForkError(f'session "{source_id}" not found', "SESSION_NOT_FOUND")
        if isinstance(source, Session) and live is not source:
            raise SessionForkError(
                f'session "{source_id}" is not the live store instance', "SESSION_NOT_LIVE"
            )
        prefix = fork_prefix(source_id, live.events, boundary)
        return self.create(
            child_id,
            seed=prefix,
            cwd=live.header.cwd,
            parent_session=source_id,
            seed_length=len(prefix),
        )

    def _now(self) -> int:
        return self._clock() if self._clock is not None else now_ms()
