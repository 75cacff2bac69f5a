"""``EventLogSession``: the OpenAI Agents SDK's ``Session`` protocol over this library's event
log, on any store (a directory of JSONL logs, ``sqlite:///``, ``postgresql://``).

Guarantees:

- ``add_items`` returns only after every item it was given is durable (or was already
  recorded); a batch is checked whole before anything is appended (a ``function_call_output``
  answering no call is refused with nothing written: such an orphan makes every later request
  fail).
- ``add_items`` is idempotent against what :class:`DurableRunHooks` already wrote (the very
  items they recorded, not items that merely share a provider's ``id``: a test model gives
  every item the same one), and within the running turn against a ``function_call`` whose
  ``call_id`` is already there and a ``function_call_output`` for an answered call.
- A session :meth:`EventLogSession.open` made can be used from any thread and any event
  loop (its runtime runs on a private loop; calls are serialized).
- ``get_items`` gives back the items exactly as added, in order; a session written by
  something else (the reference loop, crash repair) projects to plain items. The first
  ``get_items(limit=N)`` of a session not yet opened here reads only the end of its log and
  takes nothing (its cost does not grow with the history); the session is opened, its whole
  log read and its writer lock taken, by the first write or whole read.
- ``pop_item`` and ``clear_session`` append: a surface replace (an empty assistant message
  takes the popped or cleared messages' place) and ``openai-agents/forgotten`` for kept
  items. The log keeps everything. Taking away a call the running turn still waits on (a run
  stopped for an approval) closes that turn first, so no later repair answers the call.
- A turn is one run: it opens with the run's first user message and closes when a run ends on
  an assistant message with every call answered. A turn a run left open (an exception, max
  turns) is closed by the next run's first user message with crash repair's closers, exactly
  as a restart would close it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self, TypeVar

from agent_session.integrations.headers import HeaderLog
from agent_session.integrations.home_loop import HomeLoop
from agent_session.integrations.openai_agents.approvals import decided_in_process, parked_calls
from agent_session.integrations.openai_agents.budget import guard_call, usage_of
from agent_session.integrations.openai_agents.history import HistoryIndex, history
from agent_session.integrations.openai_agents.items import item_kind, plain_item
from agent_session.integrations.openai_agents.recent import recent_items
from agent_session.integrations.openai_agents.writing import ItemWriter
from agent_session.integrations.turns import BracketCursor, next_step, record_call
from agent_session.session.events.interruption import Interruption
from agent_session.session.events.types import (
    FRAMEWORK_ITEM,
    FRAMEWORK_ITEMS_FORGOTTEN,
)
from agent_session.session.live.runtime import Runtime
from agent_session.session.live.session import Session

if TYPE_CHECKING:
    from agents.memory.session_settings import SessionSettings

__all__ = ["EventLogSession"]

T = TypeVar("T")

log = logging.getLogger("agent_session.integrations.openai_agents")

UNKNOWN_MODEL = "unknown"
"""The model an assistant message names when no hook said which model answered."""


class EventLogSession(ItemWriter):
    """An SDK ``Session`` whose history is this library's crash-safe event log. Build it as
    the SDK's own sessions are built, ``EventLogSession(id, store)`` (a directory,
    ``sqlite:///`` or ``postgresql://``; it owns its runtime, on a private loop, and can be
    used from any thread and any event loop, ``Runner.run_sync`` included), with ``await``
    :meth:`open` (the same, and the session opened at once), or ``EventLogSession(id,
    runtime=...)`` (a runtime you installed persistence into, bound to the event loop it is
    used on). Pass it to ``Runner.run`` with ``hooks=DurableRunHooks(session)`` so the log is
    durable before every model call and tool body, and close it with :meth:`aclose` (or
    ``async with``)."""

    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        store: str | os.PathLike[str] | None = None,
        *,
        runtime: Runtime | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        warn_without_hooks: bool = True,
        **store_options: Any,
    ) -> None:
        """Exactly one of ``store`` (with ``store_options`` for
        :func:`agent_session.open_store`; nothing is opened before the first call) and
        ``runtime``. ``warn_without_hooks=False`` says that adding a run's model items
        without :class:`DurableRunHooks` is meant (items are then durable only when the SDK
        adds them, after each tool body ran); by default the first such ``add_items`` logs a
        warning.

        Raises:
            TypeError: Neither or both of ``store`` and ``runtime``.
            ValueError: A store name this build cannot serve.
        """
        from agent_session.stores import parse_store

        if (store is None) == (runtime is None):
            raise TypeError(
                "EventLogSession needs a store (a directory, sqlite:///, postgresql://) or a "
                "runtime=, not both"
            )
        self._spec = None if store is None else parse_store(os.fspath(store))
        self._store_options = store_options
        self._home_lock = threading.Lock()
        self.session_id = session_id
        self.warn_without_hooks = warn_without_hooks
        """Whether model items added with no hooks seen log a warning (once)."""
        self._hooked = False
        if session_settings is not None and not hasattr(session_settings, "limit"):
            from agents.memory.session_settings import coerce_session_settings

            session_settings = coerce_session_settings(dict(session_settings))  # as the SDK's
        self.session_settings: SessionSettings | None = session_settings  # type: ignore[assignment]
        self.runtime = Runtime() if runtime is None else runtime
        """The runtime whose store holds the live session."""
        self.model = UNKNOWN_MODEL
        """The model named by assistant messages (the hooks set it from the agent)."""
        self._owned = store is not None
        self._home: HomeLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: Session | None = None
        self._lock = asyncio.Lock()
        self._pending: list[dict[str, Any]] = []
        self._brackets = BracketCursor()
        self._index = HistoryIndex()  # what the hooks wrote that add_items will repeat
        self._headers = HeaderLog()

    @classmethod
    async def open(
        cls,
        store: str | os.PathLike[str],
        session_id: str,
        *,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        warn_without_hooks: bool = True,
        **store_options: Any,
    ) -> Self:
        """``EventLogSession(session_id, store, ...)``, with session ``session_id`` opened at
        once (repairing a turn a crash interrupted) or created. Raises ``ValueError`` for a
        store this build cannot serve and the store's errors (a writer elsewhere holds the
        session: ``SessionCollisionError``)."""
        self = cls(
            session_id,
            store,
            session_settings=session_settings,
            warn_without_hooks=warn_without_hooks,
            **store_options,
        )
        try:
            await self.live()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def _call(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` where the runtime lives: on the private loop of a session that owns
        its store (callable from any thread and event loop, serialized), else on the loop the
        runtime was first used on: the caller's, or, while that one runs in another thread,
        that one (the call is carried over to it)."""
        if self._spec is not None:
            return await self._at_home().run(self._started(work))
        running = asyncio.get_running_loop()
        if self._loop is None or self._loop.is_closed():
            self._loop = running
        elif running is not self._loop:
            if self._loop.is_running():
                future = asyncio.run_coroutine_threadsafe(work, self._loop)
                return await asyncio.wrap_future(future)
            work.close()
            raise RuntimeError(
                f'EventLogSession "{self.session_id}" was first used on another event loop, '
                "which is open but not running: a runtime you pass is bound to its loop (build "
                "it as EventLogSession(id, store) for a session any loop or thread can use)"
            )
        return await work

    def _at_home(self) -> HomeLoop:
        """The private loop (started on first use, once, whichever thread asks first)."""
        with self._home_lock:
            if self._home is None:
                self._home = HomeLoop(f"agent-session {self.session_id[:40]}")
            return self._home

    async def _started(self, work: Coroutine[Any, Any, T]) -> T:
        """``work``, once the store is installed in the runtime (on the first call)."""
        if self._spec is not None and self.runtime.persistence is None:
            try:
                self.runtime.install(self._spec.open(**self._store_options))
            except BaseException:
                work.close()
                raise
        return await work

    @property
    def interrupted(self) -> Interruption | None:
        """How a crash interrupted the last turn (see :attr:`session.Session.interrupted`):
        after :meth:`open`, the turn repair closed and the calls it answered
        ``TOOL_OUTCOME_UNKNOWN`` or ``TOOL_NOT_STARTED``; ``None`` when the session is not
        open yet or its last turn was not interrupted. Read it between runs."""
        session = self._session
        return None if session is None else session.interrupted

    async def live(self) -> Session:
        """The live session (resumed or created on first use)."""
        return await self._call(self._live())

    async def _live(self) -> Session:
        if self._session is None or not self.runtime.sessions.is_live(self._session):
            sessions = self.runtime.sessions
            self._session = sessions.get(self.session_id) or await sessions.open_or_create(
                self.session_id
            )
        return self._session

    async def fork(
        self,
        *,
        at: int | None = None,
        turn: int | None = None,
        before_turn: int | None = None,
        new_id: str | None = None,
    ) -> EventLogSession:
        """A new session, forked from this one at a boundary (:func:`agent_session.fork_session`
        takes the same) and durable when this returns; this session is only read. The fork is
        built as this one was: on the same store (then opened on first use, as any), or on the
        same runtime. Raises ``SessionForkError`` with the reference's code."""
        from agent_session.lineage.fork import fork_live

        async def forking() -> str:
            async with self._lock:
                live = await self._live()
                forked = await fork_live(
                    self.runtime, live, at=at, turn=turn, before_turn=before_turn, new_id=new_id
                )
                if self._spec is not None:  # (the new object takes it when first used)
                    await self.runtime.sessions.dispose(forked)
                return forked.id

        child = await self._call(forking())
        if self._spec is None:
            return type(self)(
                child,
                runtime=self.runtime,
                session_settings=self.session_settings,
                warn_without_hooks=self.warn_without_hooks,
            )
        return type(self)(
            child,
            self._spec.url,
            session_settings=self.session_settings,
            warn_without_hooks=self.warn_without_hooks,
            **self._store_options,
        )

    async def aclose(self) -> None:
        """Make everything durable; close the runtime if this session made it."""
        if self._spec is not None and self._home is None:
            return  # (never used: nothing was opened)
        try:
            await self._call(self._aclose())
        finally:
            if self._home is not None:
                with self._home_lock:
                    home, self._home = self._home, None
                if home is not None:
                    await asyncio.to_thread(home.close)

    async def _aclose(self) -> None:
        if self._owned:
            await self.runtime.__aexit__(None, None, None)
        elif self._session is not None and self.runtime.sessions.is_live(self._session):
            await self.runtime.sessions.flush(self._session)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- the SDK's Session protocol ---------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The latest ``limit`` items (all when ``None`` and the settings set no limit), in
        order."""
        return await self._call(self._get_items(limit))

    async def _get_items(self, limit: int | None = None) -> list[Any]:
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        persistence = self.runtime.persistence
        opened = self._session is not None or self.runtime.sessions.get(self.session_id)
        if limit is not None and not opened and persistence is not None:  # (the log's end)
            items = await recent_items(persistence, self.session_id, limit)
            if items is not None:
                return items
        return self._index.latest(await self._live(), limit)

    async def add_items(self, items: Sequence[Any]) -> None:
        """Record ``items`` (see the module's guarantees) and make them durable."""
        return await self._call(self._add_items(items))

    async def _add_items(self, items: Sequence[Any]) -> None:
        batch = [plain_item(item) for item in items]
        unhooked = not self._hooked and self.warn_without_hooks
        if unhooked and any(item_kind(item) == "model" for item in batch):
            self.warn_without_hooks = False  # once
            log.warning(
                'session "%s" records a run without DurableRunHooks: its tool calls are '
                "durable only after their bodies ran, so a crash inside a tool loses the "
                "record that it was called. Pass hooks=DurableRunHooks(session) to "
                "Runner.run, or warn_without_hooks=False if that is meant.",
                self.session_id,
            )
        async with self._lock:
            session = await self._live()
            self._write(session, batch)
            await self.runtime.sessions.flush(session)

    async def pop_item(self) -> Any | None:
        """Take the latest item out of the history (appending its removal) and return it."""
        return await self._call(self._pop_item())

    async def _pop_item(self) -> Any | None:
        async with self._lock:
            session = await self._live()
            entries = self._index.last_event(session)
            if not entries:
                return None
            last = entries[-1]
            event = session.events[last.seq]
            self._close_for(session, [last.item])
            if event.type == FRAMEWORK_ITEM:
                session.append(FRAMEWORK_ITEMS_FORGOTTEN, {"seqs": [last.seq]})
            else:
                rest = [entry.item for entry in entries if entry.seq == last.seq][:-1]
                self._replace(session, last.seq, last.seq, [last.seq], rest)
            self._pending.clear()
            await self.runtime.sessions.flush(session)
            return last.item

    async def clear_session(self) -> None:
        """Take every item out of the history (appending the removal)."""
        return await self._call(self._clear_session())

    async def _clear_session(self) -> None:
        async with self._lock:
            session = await self._live()
            nodes = session.surface.nodes
            self._close_for(session, [entry.item for entry in history(session)])
            if nodes:
                self._replace(session, nodes[0], nodes[-1], list(nodes), [])
            kept = sorted({e.seq for e in history(session)} - set(session.surface.nodes))
            if kept:
                session.append(FRAMEWORK_ITEMS_FORGOTTEN, {"seqs": kept})
            self._pending.clear()
            await self.runtime.sessions.flush(session)

    # --- what DurableRunHooks call ----------------------------------------------------------

    async def before_model_call(
        self, input_items: Sequence[Any], header: Mapping[str, Any] | None = None
    ) -> None:
        """Record the run's input if no ``add_items`` did yet (a streamed run saves it after
        the first request started), open the step, log the request ``header`` if it is not
        the last one logged, and make the log durable."""
        return await self._call(self._before_model_call(input_items, header))

    async def _before_model_call(
        self, input_items: Sequence[Any], header: Mapping[str, Any] | None
    ) -> None:
        self._hooked = True
        async with self._lock:
            session = await self._live()
            self._run_input(session, [plain_item(i) for i in input_items])
            opened = next_step(session, self._turn(session), marks=self._brackets.marks(session))
            if header is not None:
                self._headers.log(session, header)
            stop = guard_call(self, session, opened.number, opened.last_step, header, self.model)
            await self.runtime.sessions.flush(session)
            if stop is not None:
                raise stop  # (durable: the model is not called, the turn stays parked)

    async def model_responded(self, items: Sequence[Any], usage: Any = None) -> None:
        """Record a model response's items as they will be added, with its ``usage`` (not
        yet flushed: the next tool body or model call flushes)."""
        return await self._call(self._model_responded(items, usage))

    async def _model_responded(self, items: Sequence[Any], usage: Any) -> None:
        async with self._lock:
            session = await self._live()
            self._usage = usage_of(usage)
            batch = [plain_item(item) for item in items]
            self._write(session, batch, from_hooks=True)
            self._pending.extend(batch)

    async def tool_starting(self, call_id: str | None) -> None:
        """Record the ``tool/call`` of the call ``call_id`` (asked for by the running turn's
        response; ``None`` for a local tool that has no call id) and make the log durable."""
        return await self._call(self._tool_starting(call_id))

    async def _tool_starting(self, call_id: str | None) -> None:
        async with self._lock:
            session = await self._live()
            turn = self._turn(session)
            if call_id is not None and turn is not None and call_id in turn.calls:
                parked = parked_calls(session.events[turn.start :])  # (the open turn only)
                if any(c.call_id == call_id for c in parked):
                    decided_in_process(session, turn, call_id, "allowed-once")
                record_call(session, turn, call_id)
            await self.runtime.sessions.flush(session)
