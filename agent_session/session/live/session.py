"""``Session``: one append-only event log with its surface and derived model history."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from time import time_ns as _time_ns
from typing import Any, Protocol

from agent_session.session.errors import (
    JsonValueError,
    SessionDataError,
    SessionEventError,
    SessionReentrancyError,
)
from agent_session.session.events.compaction import refuse_bad_boundary
from agent_session.session.events.event import SessionEvent, build_event
from agent_session.session.events.eventlog import EventLog, last_type
from agent_session.session.events.header import SessionHeader, now_ms
from agent_session.session.events.interruption import Interruption, interruption
from agent_session.session.events.livelog import DELTA_KINDS, LiveLog, delta_data
from agent_session.session.events.rules import (
    RULED_TYPES,
    CheckedLog,
    check_loadable,
    legacy_problem,
    validate_log,
)
from agent_session.session.events.surface import (
    Surface,
    SurfaceOp,
    SurfaceReplace,
    SurfaceView,
    parse_surface_metadata,
    projected_message,
)
from agent_session.session.events.types import (
    ASSISTANT_CHUNK,
    CONTEXT_COMPACTED,
    END_SEED,
)
from agent_session.session.events.types import MARKED_IGNORABLE as MARKED
from agent_session.session.events.wire import WireModel
from agent_session.session.json.lossless import JsonValue, is_safe_int, is_text, snapshot

__all__ = ["Clock", "Publisher", "Session"]

log = logging.getLogger("session")

Clock = Callable[[], int]
"""Returns the current time in epoch milliseconds."""

Hooks = tuple[tuple[Callable[..., Any], ...], tuple[Callable[..., Any], ...], bool]
"""The validators and the observers of an append, and whether every observer takes runs
(``session.live.hooks.takes_runs``)."""

_NO_HOOKS: Hooks = ((), (), True)


class Publisher(Protocol):
    """What an attached session asks of the store that published it (``SessionStore``)."""

    def append_hooks(self) -> Hooks:
        """The ``session/validate`` validators and ``session/event`` observers to run, and
        whether every observer takes runs."""
        ...

    @property
    def detach_pending(self) -> AbstractSet[int]:
        """``id(session)`` of sessions whose detach waits for their append to unwind; an
        append calls :meth:`appended` only while this is not empty (one read per event)."""
        ...

    def appended(self, session: Session) -> None:
        """Called after a published append while :attr:`detach_pending` is not empty."""


class Session:
    """An append-only log of :class:`SessionEvent`.

    Guarantees: ``events[i].seq == i``; an appended event is immutable and never changes; a
    rejected append changes nothing; observers of an attached session see every committed event
    in order, after the commit; the surface and ``derive_messages()`` always reflect the log.
    """

    __slots__ = (
        "_background",
        "_clock",
        "_derived",
        "_derived_generation",
        "_derived_nodes",
        "_events",
        "_events_view",
        "_first_live_seq",
        "_header",
        "_publisher",
        "_publishing",
        "_run_hooks",
        "_surface",
    )

    def __init__(self, header: SessionHeader, *, clock: Clock | None = None) -> None:
        """An empty, detached session. Prefer :meth:`create` or ``SessionStore.create``."""
        self._header = header
        self._clock: Clock = clock or now_ms
        self._events = LiveLog()
        self._events_view: EventLog[SessionEvent] | None = None
        self._surface = Surface()
        self._first_live_seq = 0
        self._derived: list[Any] = []
        self._derived_nodes = 0
        self._derived_generation = 0
        self._publishing = False
        self._publisher: Publisher | None = None
        self._run_hooks: Hooks | None = None
        """The hooks the open run of deltas was checked against (it continues while they
        are the store's)."""
        self._background: set[asyncio.Future[Any]] = set()

    @classmethod
    def create(
        cls,
        id: str,
        *,
        seed: Iterable[SessionEvent | Mapping[str, Any]] | None = None,
        header: SessionHeader | Mapping[str, Any] | None = None,
        clock: Clock | None = None,
    ) -> Session:
        """A detached session, validated from an optional header and seed.

        Without a header: ``{version: 0, id, createdAt: now}``. A given seed (even empty) is
        validated event by event with the rules of a stored log and, unless it already ends
        with ``session/end-seed``, followed by one; ``first_live_seq`` is the seed's length.
        """
        clock = clock or now_ms
        if header is None:
            checked = SessionHeader(id=id, created_at=clock())
        else:
            checked = SessionHeader.validated(header, id)
        session = cls(checked, clock=clock)
        if seed is not None:
            session._seed(validate_log(seed))
        return session

    @classmethod
    def restore(
        cls, header: SessionHeader, log: CheckedLog, *, clock: Clock | None = None
    ) -> Session:
        """A detached session seeded with a log that was already validated (a cold load's
        :class:`CheckedLog`), without checking it again; followed by ``session/end-seed``
        unless it already ends with one, as :meth:`create`. The header is checked as there."""
        session = cls(SessionHeader.validated(header, header.id), clock=clock)
        session._seed(CheckedLog(log.events, log.surface.copy()))  # the caller keeps its log
        return session

    def _seed(self, log: CheckedLog) -> None:
        """Take ``log`` (and its surface, which this session then changes) as the seed."""
        events = self._events = LiveLog(log.events)  # runs stay unbuilt until read
        self._events_view = None
        self._surface = log.surface
        self._first_live_seq = len(events)
        if not events or last_type(log.events) != END_SEED:
            self.append(END_SEED, {})

    # --- read side --------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The session id (``header.id``)."""
        return self._header.id

    @property
    def header(self) -> SessionHeader:
        """The immutable header."""
        return self._header

    @property
    def seq(self) -> int:
        """The log length, which is also the next event's seq."""
        return len(self._events)

    @property
    def first_live_seq(self) -> int:
        """How many events the session was seeded with (0 without a seed); not persisted."""
        return self._first_live_seq

    @property
    def events(self) -> EventLog[SessionEvent]:
        """An immutable snapshot of the log; the same object until the next append. Runs of
        packed deltas a load handed over stay unbuilt until one of their events is read."""
        view = self._events_view
        if view is None:
            view = self._events_view = self._events.view()
        return view

    def event_at(self, seq: int) -> SessionEvent:
        """The event ``seq`` (``0 <= seq < self.seq``), without taking a snapshot of the log:
        for a reader that follows a long live log event by event.

        Raises:
            IndexError: No such event yet.
        """
        return self._events[seq]

    @property
    def interrupted(self) -> Interruption | None:
        """How a crash interrupted the last turn (closed ``interrupted`` by crash repair on
        load, or by an integration closing a turn a run left open): its number and the calls
        answered ``TOOL_OUTCOME_UNKNOWN`` or ``TOOL_NOT_STARTED``; ``None`` when the last turn
        ended any other way (a cancel or a teardown from outside ends it ``aborted``), is
        running, or there is none. Reads the last turn only."""
        return interruption(self.events)

    @property
    def surface(self) -> SurfaceView:
        """The surface: node seqs in model order and the replace generation."""
        return self._surface.view()

    def derive_messages(self) -> list[Any]:
        """The model history: a new list of the stored, frozen message objects, in surface
        order.

        ``user/message`` projects its data, ``assistant/message`` and ``tool/result`` their
        ``data.message``; an assistant message with empty content projects nothing. Computed
        incrementally; rebuilt when a replace rewrote the surface.
        """
        surface = self._surface
        if surface.replace_generation != self._derived_generation:
            self._derived = []
            self._derived_nodes = 0
            self._derived_generation = surface.replace_generation
        nodes = surface.nodes
        if self._derived_nodes < len(nodes):
            for seq in nodes[self._derived_nodes :]:
                message = self.derive_event_message(self._events[seq])
                if message is not None:
                    self._derived.append(message)
            self._derived_nodes = len(nodes)
        return list(self._derived)

    @staticmethod
    def derive_event_message(event: SessionEvent) -> Any:
        """The message a surface event projects, or ``None`` (:func:`projected_message`)."""
        return projected_message(event)

    # --- write side -------------------------------------------------------------------------

    def append(
        self,
        type: str,
        data: JsonValue | WireModel,
        *,
        surface_op: SurfaceOp | Mapping[str, Any] | None = None,
        source_event_seqs: Sequence[int] | None = None,
    ) -> SessionEvent:
        """Validate, commit and publish one event; return the frozen logged event.

        Order: snapshot ``data`` (a :class:`SessionDataError`, a ``TypeError``, names the
        path of a non-JSON value), refuse retired vocabulary, snapshot the surface metadata,
        refuse reentrant appends from an observer, check the surface rules, run pre-commit
        validators, commit, then notify ``session/event`` observers one by one, logging (never
        raising) their failures. Any failure before the commit leaves the session unchanged.
        """
        if data.__class__ is not dict and isinstance(data, WireModel):  # skips an ABC check
            data = data.to_json()
        try:
            frozen = snapshot(data, "data")
        except JsonValueError as e:
            raise SessionDataError(
                f'session event "{type}" carries non-JSON-serializable data: {e}'
            ) from e
        plain = surface_op is None and source_event_seqs is None and type not in RULED_TYPES
        if not plain:  # the surface and legacy rules; plain log events have none to break
            legacy = legacy_problem(type, frozen)
            if legacy is not None:
                raise SessionEventError(f'session event "{type}" {legacy}')
            raw_op: Any = (
                surface_op.to_json() if isinstance(surface_op, SurfaceReplace) else surface_op
            )
            try:
                if not (raw_op == "append" and raw_op.__class__ is str):  # (the usual op)
                    raw_op = snapshot(raw_op, "surfaceOp")
                raw_sources = (
                    ()  # (the usual sources of a model's message)
                    if source_event_seqs.__class__ is list and not source_event_seqs
                    else snapshot(
                        list(source_event_seqs) if source_event_seqs is not None else None,
                        "sourceEventSeqs",
                    )
                )
            except (JsonValueError, TypeError) as e:
                raise SessionDataError(
                    f'session event "{type}" carries non-JSON-serializable surface metadata: {e}'
                ) from e
        store = self._publisher
        if store is not None and self._publishing:
            raise SessionReentrancyError(
                "session append cannot reenter while another append is being published"
            )
        events = self._events
        seq = len(events)
        if plain:
            op = None
            check_loadable(type, frozen)
            if type == CONTEXT_COMPACTED:
                refuse_bad_boundary(seq, frozen, self._surface.nodes)
            event = build_event(
                type, seq, self._clock(), frozen, ignorable=True if type in MARKED else None
            )
        else:
            op, sources = parse_surface_metadata(type, seq, raw_op, raw_sources)
            self._surface.check(type, op, sources, frozen, events)
            check_loadable(type, frozen)
            event = build_event(type, seq, self._clock(), frozen, op, sources)
        validators, observers, _ = _NO_HOOKS if store is None else store.append_hooks()
        self._publishing = store is not None
        try:
            for validate in validators:
                validate(self, event)
            events.append(event)  # the commit
            self._events_view = None
            if op is not None:
                self._surface.apply(seq, op)
            self._notify(observers, event)
        finally:
            self._publishing = False
        if store is not None and store.detach_pending:
            store.appended(self)
        return event

    def append_delta(
        self, turn: int, step: int, text: str, *, index: int = 0, kind: str = "text-delta"
    ) -> int:
        """Append a streamed delta: the event ``append("assistant/chunk", {turn, step,
        chunk: {type: kind, index, text}})`` makes, with its checks and bytes; return its seq.

        Consecutive deltas of one kind, turn, step and index are kept as a run of columns
        whose events are built when first read (:mod:`session.events.livelog`): a delta costs
        a few checks and two list appends; observers that take runs hear of a run when it
        starts. With a validator or an observer that takes events installed, or other than
        ``int`` turn, step and index, ``str`` text and a text or reasoning kind, it is that
        ``append``."""
        events, store = self._events, self._publisher
        run = events.run
        if (  # continuing the open run under the hooks it was checked against: the hot path
            run is not None
            and not run.closed
            and type(text) is str
            and int is type(turn) is type(step) is type(index)  # (equal to the run's:
            and turn == run.turn  # safe ints, so these are too)
            and step == run.step
            and index == run.index
            and kind == run.kind
            and (text.isascii() or is_text(text))
            and not self._publishing
            and self._run_hooks is (_NO_HOOKS if store is None else store.append_hooks())
        ):
            self._events_view = None
            clock = self._clock  # (LiveLog.extend inlined, with the default clock's call)
            run.times.append(_time_ns() // 1_000_000 if clock is now_ms else clock())
            run.texts.append(text)
            events.size += 1
            return events.size - 1
        if not (
            is_safe_int(turn)
            and is_safe_int(step)
            and is_safe_int(index)
            and type(text) is str
            and kind in DELTA_KINDS
            and is_text(text)
        ):
            return self._delta_event(turn, step, text, index, kind)
        hooks = _NO_HOOKS if store is None else store.append_hooks()
        validators, observers, runs = hooks
        if validators or not runs:
            return self._delta_event(turn, step, text, index, kind)
        if store is not None and self._publishing:
            raise SessionReentrancyError(
                "session append cannot reenter while another append is being published"
            )
        started = events.append_delta(kind, turn, step, index, self._clock(), text)
        self._events_view = None
        self._run_hooks = hooks
        if started is not None and observers:
            self._publishing = True
            try:
                self._notify(observers, started)
            finally:
                self._publishing = False
        if store is not None and store.detach_pending:
            store.appended(self)
        return events.size - 1

    def _delta_event(self, turn: Any, step: Any, text: Any, index: Any, kind: Any) -> int:
        return self.append(ASSISTANT_CHUNK, delta_data(turn, step, text, index, kind)).seq

    def _notify(self, observers: tuple[Callable[..., Any], ...], item: Any) -> None:
        """Call each ``session/event`` observer with ``item``, logging (never raising) a
        failure and tracking an awaitable result."""
        for observe in observers:
            try:
                result = observe(self, item)
            except Exception as e:
                log.warning('session "%s": session/event listener threw: %s', self.id, e)
                continue
            if result is not None:
                self._settle_later(result)

    # --- publication (used by the store that publishes the session) -----------------------

    @property
    def publisher(self) -> Publisher | None:
        """The store this session is published in, or ``None`` while detached."""
        return self._publisher

    @property
    def publishing(self) -> bool:
        """Whether an append is running its validators and observers right now."""
        return self._publishing

    def bind_publisher(self, publisher: Publisher | None) -> None:
        """Attach to (or, with ``None``, detach from) the store that publishes this session;
        ``SessionStore.attach`` and ``detach`` call it."""
        self._publisher = publisher

    def _settle_later(self, result: Any) -> None:
        """Track an observer's awaitable result, logging (never raising) its failure."""
        if inspect.isawaitable(result):
            try:
                future = asyncio.ensure_future(result)
            except RuntimeError as e:  # no running loop
                if inspect.iscoroutine(result):
                    result.close()
                log.warning('session "%s": session/event listener rejected: %s', self.id, e)
                return
            self._background.add(future)
            future.add_done_callback(self._settled)

    def _settled(self, future: asyncio.Future[Any]) -> None:
        self._background.discard(future)
        if not future.cancelled() and future.exception() is not None:
            log.warning(
                'session "%s": session/event listener rejected: %s', self.id, future.exception()
            )

    def __repr__(self) -> str:
        return f"<Session {self.id!r} seq={self.seq}>"
