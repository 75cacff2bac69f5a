"""The live writer: how the events of live sessions reach storage.

One :class:`WriteBehindController` per live session buffers its events; a batching window or a
``flush`` barrier writes them through the :class:`Ledger`. Binding a session to its id (on
creation or resume) adopts what storage already holds for it, refuses an id collision, and
writes what storage lacks. A disposed session is flushed, then its id released.

Where the I/O runs is the storage's business (``Storage.append_inline``,
``Storage.start_append``); this module decides only whether a checkpoint *may* skip the task
of a drain: when the session is bound, its log exists, nothing else holds its id; and it tells
the storage whether it is the only live session (``sole_writer``).

Internal to ``session.persistence``: its names may change between releases.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from agent_session.session.errors import SessionCollisionError, SessionError
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.livelog import OpenRun
from agent_session.session.events.types import ASSISTANT_CHUNK
from agent_session.session.live.hooks import takes_runs
from agent_session.session.live.session import Session
from agent_session.session.persistence.adopting import check_cwd, same_prefix
from agent_session.session.persistence.batches import batch_of, events_in, follows, unwritten
from agent_session.session.persistence.futures import on_landing
from agent_session.session.persistence.ledger import Ledger, State
from agent_session.session.persistence.storage import Storage
from agent_session.session.persistence.write_behind import Scheduler, WriteBehindController

__all__ = ["LiveWriter"]

log = logging.getLogger("session.persistence")


@dataclass(slots=True)
class _Live:
    """A live session's write path."""

    controller: WriteBehindController
    id: str
    init: asyncio.Future[None] | None = None
    """The binding of the session to its id (:meth:`LiveWriter._bind`)."""
    bound: bool = False
    """The binding :attr:`init` has completed successfully (set by its done callback, so a
    checkpoint reads one attribute)."""
    retired: bool = False
    unstored: bool = False
    """Created here while storage said at once that nothing is stored under its id: binding
    neither takes nor reads a stored log (the first write creates the log, and refuses one
    another writer made meanwhile)."""
    lines: dict[int, bytes] = field(default_factory=dict)
    """The line of each buffered event but a delta, by seq, encoded as it was committed when
    the storage writes lines (a batch takes its own, so a checkpoint does not wait for them)."""

    def binding(self, init: asyncio.Future[None]) -> None:
        """Make ``init`` the session's binding: :attr:`bound` once it succeeds."""
        self.init = init
        self.bound = False
        init.add_done_callback(self._binding_ended)

    def _binding_ended(self, init: asyncio.Future[None]) -> None:
        failed = init.cancelled() or init.exception() is not None  # (its error retrieved)
        if self.init is init:
            self.bound = not failed


def _count(pending: int) -> str:
    return f"{pending} event(s)" if pending else "a write that never finished"


class LiveWriter:
    """Writes the live sessions of one runtime through ``ledger`` (see the module
    docstring)."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        delay_ms: int,
        scheduler: Scheduler | None,
    ) -> None:
        self._ledger = ledger
        self._storage: Storage = ledger.storage
        self.encodes = self._storage.writes_lines
        """Whether events are encoded as they are committed (the storage writes lines)."""
        self._delay_ms = delay_ms
        self._scheduler = scheduler
        self._live: dict[Session, _Live] = {}
        self._retirements: dict[str, asyncio.Future[None]] = {}
        self._closed_by: str | None = None
        """The name of the closed backend, once :meth:`close` ran: nothing is written after."""
        self.before_flush: Callable[[Session], None] | None = None
        """Called as a flush starts, before its batch is taken (``session.chain``)."""
        self.on_line: Callable[[Session, SessionEvent, bytes | None], None] | None = None
        """Called with each event as it is committed, and its line when it is encoded then
        (``session.chain``)."""

    # --- queries ----------------------------------------------------------------------------

    def session(self, id: str) -> Session | None:
        """The live (not retiring) session of ``id``, or ``None``."""
        for session, live in self._live.items():
            if session.id == id and not live.retired:
                return session
        return None

    async def wait_retirement(self, id: str) -> None:
        """Wait until a disposed session of ``id`` has been flushed and released."""
        retirement = self._retirements.get(id)
        if retirement is not None:
            await asyncio.wait([retirement])

    def warn_unflushed(self, name: str) -> None:
        """Log a warning naming every live session with appended events that are not durable
        (buffered, or a write that never finished): called when the runtime of the backend
        ``name`` is garbage-collected or the process exits."""
        lost = [
            f'"{live.id}" ({_count(events_in(live.controller.pending))})'
            for live in self._live.values()
            if live.controller.has_work
        ]
        if lost:
            log.warning(
                "%s: appended events of session(s) %s were not durable when their runtime was "
                "garbage-collected or the process exited, and are lost unless the backend is "
                "still flushed or closed (use `async with runtime`, or `await "
                "backend.aclose()` before the end)",
                name,
                ", ".join(lost),
            )

    # --- store hooks ------------------------------------------------------------------------

    def on_created(self, session: Session) -> None:
        """``session/created``: start writing ``session`` (binding starts now if a loop runs,
        else at its first flush). Vetoes the creation of a session without events whose id
        already has a stored log (it could only collide at its first flush), when this
        backend stored or read that log itself, or storage can tell at once: raises
        :class:`SessionCollisionError`."""
        if session in self._live:
            return
        known = self._ledger.state(session.id)
        stored: bool | None = None
        if not session.events:
            stored = (known is not None and known.materialized) or self._storage.stored_now(
                session.id
            )
            if stored:
                raise SessionCollisionError(
                    f'session "{session.id}" already has a stored log: resume it '
                    "(sessions.resume, or sessions.open_or_create) instead of creating it"
                )
        self.start(session, unstored=stored is False and known is None)

    def start(self, session: Session, *, unstored: bool = False) -> None:
        """Start writing the live ``session`` (nothing when it already is); ``unstored``: see
        :attr:`_Live.unstored`."""
        if session in self._live:
            return
        live = _Live(
            WriteBehindController(
                partial(self._write, session),
                write_now=partial(self._write_now, session),
                max_delay_ms=self._delay_ms,
                scheduler=self._scheduler,
                label=f'"{session.id}"',
            ),
            session.id,
            unstored=unstored,
        )
        self._live[session] = live
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # no running loop: bind at the first flush
        live.binding(asyncio.ensure_future(self._bind(session)))

    @takes_runs
    def on_event(self, session: Session, event: SessionEvent | OpenRun) -> None:
        """``session/event``: buffer the committed event, or the run of deltas it starts
        (the run's later deltas need no call: the batch that takes the run takes them)."""
        live = self._live.get(session)
        if live is not None:
            live.controller.enqueue(event)
            on_line = self.on_line
            if not (self.encodes or on_line) or type(event) is not SessionEvent:
                return
            if event.type != ASSISTANT_CHUNK:  # (deltas: packed, or encoded, at the flush)
                line = event.encode() if self.encodes else None
                if line is not None:
                    live.lines[event.seq] = line
                if on_line is not None:
                    on_line(session, event, line)

    def pending(self, session: Session) -> tuple[dict[int, bytes], tuple[Any, ...]]:
        """The JSONL lines of ``session``'s buffered events encoded so far, by seq (what its
        next batch takes: a caller may add a delta's), and its buffered items."""
        live = self._live.get(session)
        return (live.lines, live.controller.pending) if live is not None else ({}, ())

    def on_flush(self, session: Session) -> asyncio.Future[None] | None:
        """``session/flush``: the barrier; ``None`` when there is nothing to do. After
        :meth:`close`, a flush with events to write fails (the backend is closed)."""
        live = self._live.get(session)
        if live is None:
            return None
        if self.before_flush is not None and self._closed_by is None:
            self.before_flush(session)
        if self._closed_by is not None:
            if live.bound and not live.controller.has_work:
                return None  # everything acknowledged is durable: nothing to refuse
            refused = asyncio.get_running_loop().create_future()
            refused.set_exception(self._refusal())
            return refused
        if live.bound:
            return live.controller.flush()
        return asyncio.ensure_future(self._flush(session, live))

    def on_disposed(self, session: Session) -> None:
        """``session/disposed``: flush the session, then release its id."""
        live = self._live.get(session)
        if live is None:
            return
        live.retired = True
        try:
            retirement = asyncio.ensure_future(self._retire(session, live))
        except RuntimeError:
            self._live.pop(session, None)
            return
        self._retirements[session.id] = retirement
        retirement.add_done_callback(lambda done: self._retired(session.id, done))

    async def flush_all(self) -> list[Exception]:
        """Flush every live session that is not retiring, then wait for every retirement;
        return the flush failures."""
        errors: list[Exception] = []
        for session, live in list(self._live.items()):
            if live.retired:
                continue  # its retirement flushes it
            try:
                await self._flush(session, live)
            except Exception as e:
                errors.append(e)
        for retirement in list(self._retirements.values()):
            with contextlib.suppress(Exception):
                await asyncio.shield(retirement)
        return errors

    def close(self, name: str) -> None:
        """Stop writing: later flushes with events to write fail naming the closed backend
        ``name``, and no batching window writes in the background any more."""
        self._closed_by = name
        for live in self._live.values():
            live.controller.cancel_wait()

    def _refusal(self) -> SessionError:
        return SessionError(
            f"{self._closed_by} is closed; events appended after it closed were not written"
        )

    # --- the write path ---------------------------------------------------------------------

    async def claimed(self, session: Session) -> None:
        """Wait until the live ``session`` is bound to its id: this backend holds its writer
        lock and knows the stored log it continues. Nothing is written. Any other failure of
        the binding (an I/O error, a full disk) is left to the first flush, which binds again
        and raises it then.

        Raises:
            SessionCollisionError: Another writer holds the session.
        """
        live = self._live.get(session)
        if live is not None:
            with contextlib.suppress(OSError):
                await self._binding(session, live)

    async def _binding(self, session: Session, live: _Live) -> None:
        init = live.init
        if init is None or (init.done() and (init.cancelled() or init.exception() is not None)):
            # Not started (no loop at creation) or failed: (re)try; a failure is not sticky.
            init = asyncio.ensure_future(self._bind(session))
            live.binding(init)
        await init

    async def _flush(self, session: Session, live: _Live) -> None:
        live.controller.cancel_wait()
        await self._binding(session, live)
        barrier = live.controller.flush()
        if barrier is not None:
            await barrier

    async def _bind(self, session: Session) -> None:
        """Make ``session`` the owner of its id and write what storage lacks.

        Three cases: the id is unknown here (adopt a stored log whose events the session
        starts with, after cutting a torn tail but never adding closers, since the turn may go
        on; or start a new lazy log); the id was loaded or created here without an owner
        (the session must start with the stored events); or another live session owns it (a
        collision, unless that one never wrote and has nothing pending, in which case this
        session replaces it).
        """
        id = session.id
        ledger = self._ledger
        async with ledger.locks.hold(id):
            state = ledger.state(id)
            if state is not None and state.owner is session:
                return
            live = self._live.get(session)
            unstored = state is None and live is not None and live.unstored
            if not unstored:  # (a new session's log is locked and checked as it is created)
                await ledger.claim(id)
                state = ledger.state(id)
            if state is not None and state.owner is not None:
                owner = state.owner
                other = self._live.get(owner) if isinstance(owner, Session) else None
                if state.materialized or (other is not None and other.controller.has_work):
                    raise SessionCollisionError(
                        f'session "{id}" is already bound to a different live session in this '
                        "backend (id collision)"
                    )
                ledger.forget(id)
                state = None
            if state is None:
                state = await self._adopt(session, unstored)
            else:
                check_cwd(id, state.header, session)
                if state.cursor:
                    inspection = await ledger.inspect(id, window=True)
                    if not same_prefix(session.events, inspection.stored[: state.cursor]):
                        raise SessionCollisionError(
                            f'session "{id}" is already persisted with {state.cursor} event(s) '
                            "that do not match this live session (id collision)"
                        )
            suffix = session.events[state.cursor :]
            if suffix:  # e.g. a resumed session's end-seed: written before the session owns
                await ledger.append(id, suffix)  # the id, so a failed write is retried whole
            state.owner = session

    async def _adopt(self, session: Session, unstored: bool) -> State:
        """The state of an id unknown to the ledger: its stored log, checked against
        ``session``, or a new lazy log (at once when the session is ``unstored``)."""
        id, ledger = session.id, self._ledger
        stored = None if unstored else await self._storage.load(id)
        if stored is None:
            return ledger.record(State(session.header, 0, False))
        events = ledger.check(id, stored).events
        check_cwd(id, stored.header, session)
        if not same_prefix(session.events, events):
            raise SessionCollisionError(
                f'session "{id}" already has a persisted log on disk that this live session '
                "does not continue: another writer changed it, or another session has its id "
                "(id collision)"
            )
        if stored.cut_at is not None:  # never closers: the turn may go on
            await self._storage.commit_repair(stored.header, stored.cut_at, ())
        return ledger.record(State(stored.header, len(events), True))

    async def _write(self, session: Session, items: list[Any]) -> None:
        """The controller's writer: append what storage lacks of the batch."""
        live = self._live.get(session)
        batch = batch_of(items, live.lines if live is not None else {})
        if self._closed_by is not None:
            raise self._refusal()
        if live is not None and live.init is not None:
            await live.init
        async with self._ledger.locks.hold(session.id):
            state = self._ledger.state(session.id)
            fresh = unwritten(batch, state.cursor if state is not None else 0)
            if fresh:
                await self._ledger.append(session.id, fresh)

    def _write_now(self, session: Session, items: list[Any]) -> bool | asyncio.Future[None]:
        """The barrier's path without a task: if the session is bound and materialized and
        nothing else holds its id, let storage write ``batch`` now (``True``) or hand it to its
        I/O (a future; the id is held until it lands); otherwise decline (``False``) and let
        :meth:`_write` do it."""
        live = self._live.get(session)
        if live is None or not live.bound or self._closed_by is not None:
            return False
        id = session.id
        state = self._ledger.state(id)
        if (
            state is None
            or state.owner is not session
            or not state.materialized
            or self._ledger.locks.held(id)
        ):
            return False
        fresh = unwritten(batch_of(items, live.lines), state.cursor)
        if not fresh:
            return True
        if not follows(fresh, state.cursor):
            return False  # not contiguous: the async path reports it
        if self._storage.append_inline(state.header, fresh, sole_writer=len(self._live) == 1):
            self._ledger.appended(id, state, len(fresh))
            return True
        locks = self._ledger.locks
        if not locks.take(id):  # held until the write lands
            return False
        try:
            started = self._storage.start_append(state.header, fresh)
        except BaseException:
            locks.give(id)
            raise
        if started is None:
            locks.give(id)
            return False

        def landed(error: BaseException | None) -> None:
            if error is None:
                self._ledger.appended(id, state, len(fresh))
            locks.give(id)

        on_landing(started, landed)  # before the controller's: the ledger is current
        return started

    # --- retirement -------------------------------------------------------------------------

    async def _retire(self, session: Session, live: _Live) -> None:
        try:
            refused = live.init is not None and live.init.done() and not live.bound
            if not refused or live.controller.has_work:  # (a refused binding wrote nothing)
                await self._flush(session, live)
        finally:
            self._live.pop(session, None)
            async with self._ledger.locks.hold(session.id):
                state = self._ledger.state(session.id)
                if state is not None and state.owner is session:
                    if state.materialized:
                        state.owner = None
                    else:
                        self._ledger.forget(session.id)
                await self._storage.release(session.id)

    def _retired(self, id: str, done: asyncio.Future[None]) -> None:
        if self._retirements.get(id) is done:
            del self._retirements[id]
        if not done.cancelled() and done.exception() is not None:
            log.warning(
                '%s: session "%s" retirement failed: %s', self._storage.name, id, done.exception()
            )
