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
  something else (the reference loop, crash repair) projects to plain items.
- ``pop_item`` and ``clear_session`` append: a surface replace (an empty assistant message
  takes the popped or cleared messages' place) and ``openai-agents/forgotten`` for kept
  items. The log keeps everything.
- A turn is one run: it opens with the run's first user message and closes when a run ends on
  an assistant message with every call answered. A turn a run left open (an exception, max
  turns) is closed by the next run's first user message with crash repair's closers, exactly
  as a restart would close it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self, TypeVar

from agent_session.integrations.home_loop import HomeLoop
from agent_session.integrations.openai_agents.history import history
from agent_session.integrations.openai_agents.items import (
    assistant_data,
    item_kind,
    tool_result_data,
    user_data,
)
from agent_session.integrations.turns import (
    end_turn,
    next_step,
    open_turn,
    record_call,
    start_turn,
)
from session.errors import JsonValueError, SessionDataError, SessionEventError
from session.events.surface import SurfaceReplace
from session.events.turns import brackets, next_turn_number
from session.events.types import (
    ASSISTANT_MESSAGE,
    FRAMEWORK_ITEM,
    FRAMEWORK_ITEMS_FORGOTTEN,
    TOOL_RESULT,
    USER_MESSAGE,
)
from session.json.lossless import snapshot
from session.live.runtime import Runtime
from session.live.session import Session

if TYPE_CHECKING:
    from agents.memory.session_settings import SessionSettings

__all__ = ["EventLogSession"]

T = TypeVar("T")

UNKNOWN_MODEL = "unknown"
"""The model an assistant message names when no hook said which model answered."""


def _plain(item: Any) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):  # an SDK output object handed over as is
        return dict(dump(exclude_unset=True))
    raise TypeError(f"an SDK item must be a mapping, got {type(item).__name__}")


class EventLogSession:
    """An SDK ``Session`` whose history is this library's crash-safe event log. Build it with
    :meth:`open` (a store and an id; owns its runtime) or ``EventLogSession(id,
    runtime=...)`` (a runtime you installed persistence into); pass it to ``Runner.run`` with
    ``hooks=DurableRunHooks(session)`` so the log is durable before every model call and tool
    body, and close it with :meth:`aclose` (or ``async with``)."""

    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        *,
        runtime: Runtime,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        if session_settings is not None and not hasattr(session_settings, "limit"):
            from agents.memory.session_settings import coerce_session_settings

            session_settings = coerce_session_settings(dict(session_settings))  # as the SDK's
        self.session_settings: SessionSettings | None = session_settings  # type: ignore[assignment]
        self.runtime = runtime
        """The runtime whose store holds the live session."""
        self.model = UNKNOWN_MODEL
        """The model named by assistant messages (the hooks set it from the agent)."""
        self._owned = False
        self._home: HomeLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: Session | None = None
        self._lock = asyncio.Lock()
        self._pending: list[dict[str, Any]] = []  # what the hooks wrote that add_items will repeat

    @classmethod
    async def open(
        cls,
        store: str | os.PathLike[str],
        session_id: str,
        *,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
    ) -> Self:
        """Open session ``session_id`` in ``store`` (repairing a turn a crash interrupted) or
        create it, in a runtime of its own with the checkpoint policy installed. Raises
        ``ValueError`` for a store this build cannot serve and the store's errors (a writer
        elsewhere holds the session: ``SessionCollisionError``)."""
        from agent_session.exits import UserError
        from agent_session.stores import parse_store
        from checkpoint_policy import checkpoint_policy

        try:
            spec = parse_store(os.fspath(store))
        except UserError as e:
            raise ValueError(str(e)) from None
        home = HomeLoop(f"agent-session {session_id[:40]}")

        async def start() -> Self:
            try:
                backend = spec.open()
            except UserError as e:
                raise ValueError(str(e)) from None
            runtime = Runtime()
            runtime.install(backend)
            runtime.install(checkpoint_policy)
            self = cls(session_id, runtime=runtime, session_settings=session_settings)
            self._owned, self._home = True, home
            try:
                await self._live()
            except BaseException:
                await runtime.__aexit__(None, None, None)
                raise
            return self

        try:
            return await home.run(start())
        except BaseException:
            home.close()
            raise

    async def _call(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` where the runtime lives: on the private loop of a session
        :meth:`open` made (callable from any thread and event loop, serialized), else on the
        caller's loop, which must be the one the runtime was first used on while that one
        is open."""
        if self._home is not None:
            return await self._home.run(work)
        running = asyncio.get_running_loop()
        if self._loop is None or self._loop.is_closed():
            self._loop = running
        elif running is not self._loop:
            work.close()
            raise RuntimeError(
                f'EventLogSession "{self.session_id}" was first used on another event loop, '
                "which is still open: a runtime you pass is bound to its loop (use "
                "EventLogSession.open(store, id) for a session any loop or thread can use)"
            )
        return await work

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

    async def aclose(self) -> None:
        """Make everything durable; close the runtime if :meth:`open` made it."""
        try:
            await self._call(self._aclose())
        finally:
            if self._home is not None:
                home, self._home = self._home, None
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
        items = [entry.item for entry in history(await self._live())]
        if limit is None:
            return items
        return items[-limit:] if limit > 0 else []

    async def add_items(self, items: Sequence[Any]) -> None:
        """Record ``items`` (see the module's guarantees) and make them durable."""
        return await self._call(self._add_items(items))

    async def _add_items(self, items: Sequence[Any]) -> None:
        batch = [_plain(item) for item in items]
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
            entries = history(session)
            if not entries:
                return None
            last = entries[-1]
            event = session.events[last.seq]
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
            if nodes:
                self._replace(session, nodes[0], nodes[-1], list(nodes), [])
            kept = sorted({e.seq for e in history(session)} - set(session.surface.nodes))
            if kept:
                session.append(FRAMEWORK_ITEMS_FORGOTTEN, {"seqs": kept})
            self._pending.clear()
            await self.runtime.sessions.flush(session)

    # --- what DurableRunHooks call ----------------------------------------------------------

    async def before_model_call(self, input_items: Sequence[Any]) -> None:
        """Record the run's input if no ``add_items`` did yet (a streamed run saves it after
        the first request started), open the step, and make the log durable."""
        return await self._call(self._before_model_call(input_items))

    async def _before_model_call(self, input_items: Sequence[Any]) -> None:
        async with self._lock:
            session = await self._live()
            tail: list[dict[str, Any]] = []
            for item in reversed([_plain(i) for i in input_items]):
                if item_kind(item) != "user":
                    break
                tail.insert(0, item)
            if tail:
                # a tail of user items can only repeat items of the last turn (an earlier one
                # ended on a model item); runs at once interleave theirs, so each item of the
                # tail is missing only as often as the turn has fewer copies of it
                since = brackets(session.events).start_index
                recorded = [entry.item for entry in history(session, since)]
                for item in tail:
                    if item in recorded:
                        recorded.remove(item)
                        continue
                    self._user(session, item)
                    self._pending.append(item)
            next_step(session, open_turn(session.events))
            await self.runtime.sessions.flush(session)

    async def model_responded(self, items: Sequence[Any]) -> None:
        """Record a model response's items as they will be added (not yet flushed: the next
        tool body or model call flushes)."""
        return await self._call(self._model_responded(items))

    async def _model_responded(self, items: Sequence[Any]) -> None:
        async with self._lock:
            session = await self._live()
            batch = [_plain(item) for item in items]
            self._write(session, batch, from_hooks=True)
            self._pending.extend(batch)

    async def tool_starting(self, call_id: str | None) -> None:
        """Record the ``tool/call`` of the call ``call_id`` (asked for by the running turn's
        response; ``None`` for a local tool that has no call id) and make the log durable."""
        return await self._call(self._tool_starting(call_id))

    async def _tool_starting(self, call_id: str | None) -> None:
        async with self._lock:
            session = await self._live()
            turn = open_turn(session.events)
            if call_id is not None and turn is not None and call_id in turn.calls:
                record_call(session, turn, call_id)
            await self.runtime.sessions.flush(session)

    # --- writing ----------------------------------------------------------------------------

    def _write(
        self, session: Session, batch: list[dict[str, Any]], *, from_hooks: bool = False
    ) -> None:
        """Append the events of ``batch`` (refusing an orphan output or a value no event can
        hold before anything)."""
        try:
            snapshot(batch, "items")
        except JsonValueError as e:
            raise SessionDataError(
                f'session "{session.id}": an SDK item cannot be stored: {e}; nothing of the '
                "batch was written"
            ) from None
        turn = open_turn(session.events)
        # what a re-add may repeat: the running turn's items (ids repeat across runs: a
        # scripted model's, a provider's placeholder)
        entries = history(session, turn.start) if turn is not None else []
        calls = {e.item["call_id"] for e in entries if e.item.get("type") == "function_call"}
        answered = {
            e.item["call_id"] for e in entries if e.item.get("type") == "function_call_output"
        }
        askable = set(turn.calls if turn else ()) | {
            i.get("call_id") for i in batch if i.get("type") == "function_call"
        }
        for item in batch:
            call_id = item.get("call_id")
            if item_kind(item) == "output" and call_id not in answered | askable:
                raise SessionEventError(
                    f'session "{session.id}": function_call_output for call {call_id!r} '
                    "answers no function_call of the running turn; nothing of the batch was "
                    "written (an orphan output makes every later model request fail)"
                )
        pending = [] if from_hooks else self._pending
        group: list[dict[str, Any]] = []
        responding = False  # only kept items since the last response: it may go on
        for item in batch:
            if item in pending:
                pending.remove(item)  # written by the hooks before the SDK saved it
                continue
            kind = item_kind(item)
            if kind == "model":
                # (a message's id is the provider's, or a test model's "1": never a key; a
                # call's id pairs it with its output, so a second one would be unanswerable)
                call_id = item.get("call_id") if item.get("type") == "function_call" else None
                if call_id is None or call_id not in calls:
                    group.append(item)
                    if call_id is not None:
                        calls.add(call_id)
                continue
            responding = self._response(session, group, responding)
            group = []
            if kind == "user":
                self._user(session, item)
                responding = False
            elif kind == "output":
                if item["call_id"] not in answered:
                    self._result(session, item)
                    answered.add(item["call_id"])
                responding = False
            else:
                session.append(FRAMEWORK_ITEM, {"item": item})
        self._response(session, group, responding)
        if not from_hooks and batch and item_kind(batch[-1]) == "model":
            self._end_if_final(session, batch[-1])

    def _user(self, session: Session, item: dict[str, Any]) -> None:
        turn = open_turn(session.events)
        if turn is None or turn.answered_any:
            start_turn(session, turn)
            self._pending.clear()
        else:
            next_step(session, turn, new=False)
        session.append(USER_MESSAGE, user_data(item), surface_op="append")

    def _response(self, session: Session, group: list[dict[str, Any]], responding: bool) -> bool:
        """Record a model response's items as one ``assistant/message``: in a new step,
        unless ``responding`` (the same response went on after a kept item such as a hosted
        tool call). Returns whether a response is now open (or still was)."""
        if not group:
            return responding
        turn = next_step(session, open_turn(session.events), new=not responding)
        data = assistant_data(group, turn.number, turn.last_step, self.model)
        session.append(ASSISTANT_MESSAGE, data, surface_op="append", source_event_seqs=[])
        return True

    def _result(self, session: Session, item: dict[str, Any]) -> None:
        turn = open_turn(session.events)
        call_id = item["call_id"]
        if turn is None or call_id not in turn.calls:
            raise SessionEventError(
                f'session "{session.id}": function_call_output for call {call_id!r} arrived '
                "after the turn that asked for it ended"
            )
        call_seq = record_call(session, turn, call_id)  # saved after its body ran: now
        data = tool_result_data(item, turn.number, turn.calls[call_id][0])
        session.append(TOOL_RESULT, data, surface_op="append", source_event_seqs=[call_seq])

    def _end_if_final(self, session: Session, last: Mapping[str, Any]) -> None:
        """Close the turn when the run ended on an assistant message with nothing open."""
        turn = open_turn(session.events)
        if last.get("type") not in (None, "message") or turn is None or turn.unanswered:
            return
        end_turn(session, turn)  # (what the hooks recorded for a run still going stays due)

    def _replace(
        self, session: Session, start: int, end: int, sources: Iterable[int], rest: list[Any]
    ) -> None:
        turn = open_turn(session.events)
        number = turn.number if turn else max(next_turn_number(session.events) - 1, 1)
        step = turn.last_step if turn and turn.last_step else 1
        session.append(
            ASSISTANT_MESSAGE,
            assistant_data(rest, number, step, self.model),
            surface_op=SurfaceReplace(start=start, end=end),
            source_event_seqs=list(sources),
        )
