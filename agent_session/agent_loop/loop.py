"""The reference agent loop: drives turns against a model adapter and registered tools, and
records exactly the reference's event sequence.

A turn: ``agent/inbox/spliced`` (the prompt enters the next-turn inbox), ``turn/start``, then
per step the claim splice, ``step/start``, ``user/message``s, ``request/header`` (first request
and on change), ``request/context`` (on change), ``assistant/chunk``..., ``assistant/message``,
per tool call ``tool/call`` and execution, ``tool/result``s in model order, the
``agent/post-step`` hook, ``step/end``; finally ``turn/end`` and the loop's own ``flush``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from agent_session.agent_loop.approval import Parked, context_message
from agent_session.agent_loop.assembler import (
    RETRY_CHUNKS,
    Assembler,
    Cancelled,
    append_chunk,
    error_chain,
    until_cancelled,
)
from agent_session.agent_loop.call_ids import refuse_bad_calls
from agent_session.agent_loop.cancel import CancelSignal
from agent_session.agent_loop.compaction import Compacted, CompactionPolicy, compact, due
from agent_session.agent_loop.dispatch import run_tools
from agent_session.agent_loop.inbox import Inbox
from agent_session.agent_loop.models import LlmError, ModelRequest
from agent_session.agent_loop.parking import awaiting, carry_out
from agent_session.agent_loop.settle import Plan, SettlementStopped, plan, settle_step
from agent_session.agent_loop.spending import guard_request, still_over
from agent_session.session.errors import ApprovalPendingError, BudgetPendingError
from agent_session.session.events.budget import budget_parked
from agent_session.session.events.builders import (
    model_message,
    step_end,
    step_start,
    turn_end,
    turn_start,
)
from agent_session.session.events.compaction import latest_of
from agent_session.session.events.header import now_ms
from agent_session.session.events.parked import parked_calls
from agent_session.session.events.turns import next_turn_number
from agent_session.session.events.types import (
    ASSISTANT_MESSAGE,
    LLM_RETRY,
    LLM_RETRY_STARTED,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from agent_session.session.json.codec import encode_json
from agent_session.session.json.lossless import snapshot, thaw
from agent_session.session.live.session import Session

if TYPE_CHECKING:
    from agent_session.agent_loop.runtime import AgentRuntime

__all__ = ["AGENT_POST_STEP", "AGENT_PRE_STEP", "Agent", "LlmError", "StepContext"]

log = logging.getLogger("agent_loop")

AGENT_PRE_STEP: Final = "agent/pre-step"
"""Middleware ``async (StepContext, next)`` before a step's ``step/start``."""
AGENT_POST_STEP: Final = "agent/post-step"
"""Middleware ``async (StepContext, next)`` after a step recorded its assistant message and
its ordered tool results, before ``step/end``."""


@dataclass(slots=True)
class StepContext:
    """What step hooks see."""

    agent: Agent
    session: Session
    turn: int
    step: int
    messages: list[Any] = field(default_factory=list)
    """(pre-step) the claimed input messages that will enter the step."""


class Agent:
    """Runs turns on one live session. Create with ``runtime.agent(session, model=...)``."""

    def __init__(
        self,
        runtime: AgentRuntime,
        session: Session,
        *,
        provider: str,
        model: str,
        system: str | None = None,
        max_parallel_tools: int = 10,
        compaction: CompactionPolicy | None = None,
    ) -> None:
        if max_parallel_tools < 1:
            raise ValueError("max_parallel_tools must be at least 1")
        self.runtime = runtime
        self.session = session
        self.provider = provider
        self.model = model
        self.system = system
        self.max_parallel_tools = max_parallel_tools
        self.compaction = compaction
        """When the loop compacts the session before a turn (``None``: only when asked)."""
        self._inbox = Inbox(session)
        self._cancel: CancelSignal | None = None
        self._last_header: bytes | None = None
        self._first_request = True
        self._context: Any = None  # the request context last logged (read once, then kept)

    # --- public surface ---------------------------------------------------------------------

    async def run_turn(self, message: str | Mapping[str, Any]) -> dict[str, Any]:
        """Send ``message`` (text or a user message) and run one turn to its end; return the
        turn's end reason. The turn is flushed before this returns (a failed final flush
        raises). A turn parked for an approval returns ``{"kind": "awaiting-approval",
        "approvals": [...]}`` instead (:mod:`agent_loop.parking`), durable and still open.

        Raises:
            ApprovalPendingError: The session's turn is parked (nothing is logged).
            ModelUnavailableError: No request can be made with this agent's model (an
                unregistered provider, an exhausted script): nothing is logged.
        """
        self.runtime.models.check(self.provider, self.model)
        if budget_parked(self.session.events) is not None:
            raise BudgetPendingError(
                f'session "{self.session.id}" is parked over its budget: raise it '
                "(agent-session budget raise), then call agent.resume()"
            )
        parked = parked_calls(self.session.events)
        if parked:
            ids = ", ".join(f'"{c.call_id}" (tool "{c.tool_name}")' for c in parked)
            raise ApprovalPendingError(
                f'session "{self.session.id}" is parked awaiting approval of {ids}: decide '
                "it (agent-session approve / reject), then call agent.resume()"
            )
        if self.compaction is not None and due(self, self.compaction):
            await compact(self, self.compaction, "threshold")
        self.followup(message)
        return await self._turn()

    async def compact(self) -> Compacted | None:
        """Replace what the model sees with a summary now, keeping the whole log
        (:mod:`agent_loop.compaction`); ``None`` when there is nothing to compact.

        Raises:
            SessionOpenTurnError: A turn is open (compaction is between turns).
            LlmError: The summary request failed; nothing is written.
        """
        return await compact(self, self.compaction or CompactionPolicy())

    async def resume(self) -> dict[str, Any] | None:
        """Finish the job a crash or a parked approval left: carry out the decisions on the
        parked calls and go on with the parked turn (:mod:`agent_loop.parking`), or settle
        the calls a crash interrupted by their tools' effects (:mod:`agent_loop.settle`) in
        a turn that needs no user message. Returns that turn's end reason; the
        ``awaiting-approval`` value, without writing anything, while a parked call is
        undecided and not expired; ``None`` when there is nothing to finish. A call approved
        for other arguments than the recorded ones is refused, never run, and the model is
        told why (:func:`agent_loop.parking.mismatch`).

        Raises:
            SessionCollisionError: Another writer holds the session (nothing is run).
            ModelUnavailableError: As :meth:`run_turn`, before anything is logged.
        """
        parked = parked_calls(self.session.events)
        if parked:
            now = now_ms()
            if any(c.decision is None and not c.expired(now) for c in parked):
                return awaiting(self.session)
            self.runtime.models.check(self.provider, self.model)
            return await self._turn(parked=(parked[0].turn, parked[0].step))
        park = budget_parked(self.session.events)
        if park is not None:
            if still_over(self):
                return awaiting(self.session)
            self.runtime.models.check(self.provider, self.model)
            return await self._turn(parked=(park.turn, park.step))
        settlement = plan(self.session)
        if settlement is None or not settlement.continues:
            return None
        self.runtime.models.check(self.provider, self.model)
        return await self._turn(settlement)

    def followup(self, message: str | Mapping[str, Any]) -> None:
        """Queue a message for the next turn (logged as an inbox splice)."""
        self._inbox.followup(message)

    def steer(self, message: str | Mapping[str, Any]) -> None:
        """Queue a message for the next step of the running turn."""
        self._inbox.steer(message)

    def cancel(self, reason: Any = None) -> None:
        """Cancel the running turn; it ends ``aborted``. Nothing happens while idle."""
        if self._cancel is not None:
            self._cancel.cancel(reason if reason is not None else {"kind": "user"})

    # --- turn -------------------------------------------------------------------------------

    async def _turn(
        self, settlement: Plan | None = None, parked: tuple[Any, Any] | None = None
    ) -> dict[str, Any]:
        """Run one turn: ``turn/start``, steps until the model answers without calls (or
        ``max-tokens``) and no steering message waits, ``turn/end``, then a flush.

        Guarantees: the turn always ends with exactly one ``turn/end`` whose reason says how
        (``completed``, ``max-tokens``, ``aborted`` on a cancel or a teardown from outside,
        ``error`` on a model or step failure, which never escapes as an exception,
        ``interrupted`` when settlement was stopped midway, as a crash would have); every
        opened step gets its ``step/end``; the log is durable when this returns (a failed
        final flush raises). A teardown (task cancellation, Ctrl-C) re-raises after the
        closing events were appended and a flush was tried. A continuation (``settlement``)
        needs no user message: its first step settles the interrupted calls, if any. A
        parked approval leaves the step and the turn open, flushed (a teardown while an
        answerer of the process was thinking parks it too, then re-raises); ``parked`` (the
        parked turn and step) goes on with that open turn, its first step carrying out the
        decisions."""
        session = self.session
        self.runtime.check_checkpoints()
        if parked is None:
            turn, step = next_turn_number(session.events), 0
            session.append(TURN_START, turn_start(turn))
        else:
            turn, step = parked[0], parked[1] - 1
        cancel = self._cancel = CancelSignal()
        reason: dict[str, Any] = {"kind": "completed"}
        torn_down = parking = False
        teardown: BaseException | None = None
        try:
            outcome = None
            while True:
                step += 1
                resuming = parked is not None and step == parked[1]
                claimed = [] if resuming else self._inbox.claim(first=step == 1)
                first_empty = step == 1 and not settlement
                if not claimed and not resuming and (first_empty or outcome is not None):
                    break
                context = StepContext(self, session, turn, step, claimed)
                if not resuming:
                    await self._open_step(context, cancel)
                try:
                    if resuming:
                        outcome = await carry_out(self, turn, step, cancel)
                    elif step == 1 and settlement is not None and settlement.settles:
                        await settle_step(self, turn, step, settlement, cancel)
                    else:
                        outcome = await self._step(turn, step, cancel)
                    await self._hooks_chain(AGENT_POST_STEP, StepContext(self, session, turn, step))
                except Parked:
                    parking = True
                    raise
                finally:
                    if not parking:
                        session.append(STEP_END, step_end(turn, step))
                if outcome == "max-tokens":
                    reason = {"kind": "max-tokens"}
                if cancel.cancelled:
                    raise Cancelled
                if outcome is not None and not self._inbox.next_step:
                    break
        except Parked as stop:
            teardown = stop.teardown
        except SettlementStopped as stopped:  # as a crash would have left it: settled again
            reason = {"kind": "interrupted"}
            log.warning('agent on session "%s": settlement stopped: %r', session.id, stopped.cause)
            if not isinstance(stopped.cause, Exception):
                teardown = stopped.cause  # (a teardown from outside goes on once it is durable)
        except Cancelled:
            reason = {"kind": "aborted", "reason": cancel.reason}
        except LlmError as e:
            reason = {"kind": "error", "error": e.failure}
        except Exception as e:
            reason = {"kind": "error", "error": {"message": error_chain(e), "code": "UNKNOWN"}}
            log.warning('agent on session "%s": turn %d failed: %s', session.id, turn, e)
        except BaseException as e:
            # Torn down from outside: end the turn as a cancel would, then let it go on.
            reason = {"kind": "aborted", "reason": {"kind": "user", "reason": type(e).__name__}}
            torn_down = True
            raise
        finally:
            self._cancel = None
            if not parking:
                session.append(TURN_END, turn_end(turn, reason))
            if torn_down:
                await self._flush_quietly()
        if teardown is not None:  # parked by a shutdown: durable as far as it can be, then on
            await self._flush_quietly()
            raise teardown
        await self.runtime.sessions.flush(session)
        return awaiting(session) if parking else reason

    async def _open_step(self, context: StepContext, cancel: CancelSignal) -> None:
        """The pre-step hooks, ``step/start``, the claimed messages, the runtime context."""
        session = self.session
        await self._hooks_chain(AGENT_PRE_STEP, context)
        if cancel.cancelled:
            raise Cancelled
        session.append(STEP_START, step_start(context.turn, context.step))
        for message in context.messages:
            session.append(USER_MESSAGE, message, surface_op="append")
        runtime_context = context_message(self)
        if runtime_context is not None:  # (first step, or the context changed)
            session.append(USER_MESSAGE, runtime_context, surface_op="append")

    async def _flush_quietly(self) -> None:
        """Try to make a torn-down turn durable before its exception goes on; a failure is
        logged (the exception in flight matters more, and crash repair closes what is lost)."""
        try:
            await self.runtime.sessions.flush(self.session)
        except Exception as e:
            log.warning(
                'agent on session "%s": flush after a torn-down turn failed: %s', self.session.id, e
            )

    async def _hooks_chain(self, name: str, context: StepContext) -> None:
        async def terminal(_: StepContext) -> None:
            return None

        await self.runtime.hooks.chain(name, terminal)(context)

    # --- step -------------------------------------------------------------------------------

    async def _step(self, turn: int, step: int, cancel: CancelSignal) -> str | None:
        """Run one step: the request header and context (when first or changed), the model's
        stream as ``assistant/chunk``s, its ``assistant/message``, then its tool calls.
        Returns ``"completed"`` or ``"max-tokens"`` when the model asked for no tool, ``None``
        after tool calls. Guarantees: the request is the session's surface at this moment; a
        cancel or teardown mid-stream keeps what was visible as an ``interrupted`` message; a
        ``max-tokens`` answer's half-streamed calls never run; every call the message asked
        for gets exactly one ``tool/result``, in the model's order. Raises :class:`LlmError`
        when the stream finished with an error or abort."""
        session = self.session
        tools = self.runtime.tools.definitions()
        settings = self.runtime.models.settings(self.provider)
        config = {"provider": self.provider, "model": self.model, **settings.config}
        header: dict[str, Any] = {"config": config}
        if settings.defaults:
            header["adapterDefaults"] = dict.fromkeys(sorted(settings.defaults), True)
        if self.system:
            header["system"] = self.system
        if tools:
            header["tools"] = tools
        encoded = encode_json(snapshot(header))
        if self._first_request or encoded != self._last_header:
            if self._first_request:
                found, boundary = latest_of(session.events, REQUEST_HEADER)
                logged = found is not None or (boundary is not None and boundary.requested)
                why = "resume" if logged else "initial"
            else:
                why = "change"
            session.append(REQUEST_HEADER, {"header": header, "reason": why})
            self._first_request, self._last_header = False, encoded
        context = {"provider": self.provider, "model": self.model}
        if self._context is None:
            found, _ = latest_of(session.events, REQUEST_CONTEXT)
            self._context = None if found is None else thaw(found.data)
        if self._context != context:
            session.append(REQUEST_CONTEXT, context)
            self._context = context
        guard_request(self, turn, step, config)  # reserves the request's bound, or parks
        if cancel.cancelled:
            raise Cancelled
        request = ModelRequest(
            self.provider,
            self.model,
            session.derive_messages(),
            self.system,
            tools,
            session.id,
            cancel,
        )
        assembler, seqs = Assembler(), []
        stream = self.runtime.models.stream(request)
        try:
            async for chunk in until_cancelled(stream, cancel):
                if chunk.get("type") in RETRY_CHUNKS:  # an adapter retries a failed attempt
                    await self._retrying(turn, step, chunk)
                    continue
                seqs.append(append_chunk(session, turn, step, chunk))
                assembler.feed(chunk)
        except (Cancelled, asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            visible = assembler.visible()
            if visible:
                data: dict[str, Any] = {
                    "turn": turn,
                    "step": step,
                    "message": self._assistant(visible),
                }
                if assembler.usage is not None:
                    data["usage"] = assembler.usage
                data["interrupted"] = True
                session.append(ASSISTANT_MESSAGE, data, surface_op="append", source_event_seqs=seqs)
            raise
        failure = assembler.failure()
        if failure is not None:
            raise LlmError(failure)
        finish = assembler.finish or {"kind": "stop"}
        kind = finish.get("kind")
        content = assembler.content()
        if kind == "max-tokens":
            content = [b for b in content if b["type"] != "tool-call"]
        refuse_bad_calls(session, request.messages, content)
        message = self._assistant(content, assembler.replay_state)
        data = {"turn": turn, "step": step, "message": message}
        if assembler.usage is not None:
            data["usage"] = assembler.usage
        session.append(ASSISTANT_MESSAGE, data, surface_op="append", source_event_seqs=seqs)
        calls = [b for b in content if b["type"] == "tool-call"]
        if not calls:
            return "max-tokens" if kind == "max-tokens" else "completed"
        await run_tools(self, turn, step, calls, cancel)
        return None

    async def _retrying(self, turn: int, step: int, chunk: Mapping[str, Any]) -> None:
        """Record an adapter's retry (``llm/retry`` before its wait, ``llm/retry-started``
        after it) and make it durable before the next attempt is made."""
        data = {k: v for k, v in chunk.items() if k != "type"}
        kind = LLM_RETRY if chunk["type"] == "retry" else LLM_RETRY_STARTED
        self.session.append(
            kind, {"retryId": data.pop("retryId"), "turn": turn, "step": step, **data}
        )
        await self.runtime.sessions.flush(self.session)

    def _assistant(self, content: list[dict[str, Any]], replay: Any = None) -> dict[str, Any]:
        return model_message(content, provider=self.provider, model=self.model, replay_state=replay)
