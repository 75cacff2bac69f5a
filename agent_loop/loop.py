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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from agent_loop.approval import context_message, pre_execute
from agent_loop.assembler import Assembler, Cancelled, until_cancelled
from agent_loop.cancel import CancelSignal
from agent_loop.models import ModelRequest
from agent_loop.settle import Plan, plan, settle_step
from agent_loop.tools import ToolCall, ToolResult, aborted_before_dispatch, torn_down_result
from session.errors import SessionError
from session.events.builders import (
    model_message,
    step_end,
    step_start,
    tool_call,
    tool_result_message,
    turn_end,
    turn_start,
    user_message,
)
from session.events.turns import next_turn_number
from session.events.types import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    INBOX_SPLICED,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from session.json.codec import encode_json
from session.json.lossless import snapshot, thaw
from session.live.session import Session

if TYPE_CHECKING:
    from agent_loop.runtime import AgentRuntime

__all__ = ["AGENT_POST_STEP", "AGENT_PRE_STEP", "Agent", "LlmError", "StepContext"]

log = logging.getLogger("agent_loop")

AGENT_PRE_STEP: Final = "agent/pre-step"
"""Middleware ``async (StepContext, next)`` before a step's ``step/start``."""
AGENT_POST_STEP: Final = "agent/post-step"
"""Middleware ``async (StepContext, next)`` after a step recorded its assistant message and
its ordered tool results, before ``step/end``."""


class LlmError(SessionError):
    """A model request failed; ``failure`` is the reference's ``LlmFailure`` JSON."""

    def __init__(self, failure: Mapping[str, Any]) -> None:
        super().__init__(str(failure.get("message", "model request failed")))
        self.failure = dict(failure)


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
    ) -> None:
        if max_parallel_tools < 1:
            raise ValueError("max_parallel_tools must be at least 1")
        self.runtime = runtime
        self.session = session
        self.provider = provider
        self.model = model
        self.system = system
        self.max_parallel_tools = max_parallel_tools
        self._next_turn: list[Any] = []
        self._next_step: list[Any] = []
        self._cancel: CancelSignal | None = None
        self._last_header: bytes | None = None
        self._first_request = True

    # --- public surface ---------------------------------------------------------------------

    async def run_turn(self, message: str | Mapping[str, Any]) -> dict[str, Any]:
        """Send ``message`` (text or a user message) and run one turn to its end; return the
        turn's end reason. The turn is flushed before this returns (a failed final flush
        raises)."""
        self.followup(message)
        return await self._turn()

    async def resume(self) -> dict[str, Any] | None:
        """Finish the job a crash interrupted, in a turn that needs no user message: settle
        the interrupted calls by their tools' effects (:mod:`agent_loop.settle`), then go on
        with the next model request. Returns that turn's end reason, or ``None`` when there is
        nothing to finish (the last turn was not interrupted, or the model had answered)."""
        settlement = plan(self.session)
        if settlement is None or not settlement.continues:
            return None
        return await self._turn(settlement)

    def followup(self, message: str | Mapping[str, Any]) -> None:
        """Queue a message for the next turn (logged as an inbox splice)."""
        msg = user_message(message) if isinstance(message, str) else dict(message)
        self._splice("next-turn", self._next_turn, len(self._next_turn), 0, [msg])

    def steer(self, message: str | Mapping[str, Any]) -> None:
        """Queue a message for the next step of the running turn."""
        msg = user_message(message) if isinstance(message, str) else dict(message)
        self._splice("next-step", self._next_step, len(self._next_step), 0, [msg])

    def cancel(self, reason: Any = None) -> None:
        """Cancel the running turn; it ends ``aborted``. Nothing happens while idle."""
        if self._cancel is not None:
            self._cancel.cancel(reason if reason is not None else {"kind": "user"})

    # --- turn -------------------------------------------------------------------------------

    def _splice(
        self, target: str, items: list[Any], start: int, removed: int, inserted: list[Any]
    ) -> None:
        if not removed and not inserted:
            return
        data: dict[str, Any] = {"target": target, "start": start}
        if removed:
            data["removedCount"] = removed
        data["inserted"] = inserted
        self.session.append(INBOX_SPLICED, data)
        items[start : start + removed] = inserted

    async def _turn(self, settlement: Plan | None = None) -> dict[str, Any]:
        """Run one turn: ``turn/start``, steps until the model answers without calls (or
        ``max-tokens``) and no steering message waits, ``turn/end``, then a flush.

        Guarantees: the turn always ends with exactly one ``turn/end`` whose reason says how
        (``completed``, ``max-tokens``, ``aborted`` on a cancel or a teardown from outside,
        ``error`` on a model or step failure, which never escapes as an exception); every
        opened step gets its ``step/end``; the log is durable when this returns (a failed
        final flush raises). A teardown (task cancellation, Ctrl-C) re-raises after the
        closing events were appended and a flush was tried. A continuation (``settlement``)
        needs no user message: its first step settles the interrupted calls, if any."""
        session = self.session
        self.runtime.check_checkpoints()
        turn = next_turn_number(session.events)
        session.append(TURN_START, turn_start(turn))
        cancel = self._cancel = CancelSignal()
        reason: dict[str, Any] = {"kind": "completed"}
        torn_down = False
        try:
            step, outcome = 0, None
            while True:
                step += 1
                claimed = self._claim(first=step == 1)
                if not claimed and ((step == 1 and not settlement) or outcome is not None):
                    break
                context = StepContext(self, session, turn, step, claimed)
                await self._hooks_chain(AGENT_PRE_STEP, context)
                if cancel.cancelled:
                    raise Cancelled
                session.append(STEP_START, step_start(turn, step))
                for message in context.messages:
                    session.append(USER_MESSAGE, message, surface_op="append")
                runtime_context = context_message(self)
                if runtime_context is not None:  # (first step, or the context changed)
                    session.append(USER_MESSAGE, runtime_context, surface_op="append")
                try:
                    if step == 1 and settlement is not None and settlement.settles:
                        await settle_step(self, turn, step, settlement, cancel)
                    else:
                        outcome = await self._step(turn, step, cancel)
                    await self._hooks_chain(AGENT_POST_STEP, StepContext(self, session, turn, step))
                finally:
                    session.append(STEP_END, step_end(turn, step))
                if outcome == "max-tokens":
                    reason = {"kind": "max-tokens"}
                if cancel.cancelled:
                    raise Cancelled
                if outcome is not None and not self._next_step:
                    break
        except Cancelled:
            reason = {"kind": "aborted", "reason": cancel.reason}
        except LlmError as e:
            reason = {"kind": "error", "error": e.failure}
        except Exception as e:
            reason = {"kind": "error", "error": {"message": _error_chain(e), "code": "UNKNOWN"}}
            log.warning('agent on session "%s": turn %d failed: %s', session.id, turn, e)
        except BaseException as e:
            # Torn down from outside (task cancellation, a deadline, Ctrl-C, exit): end the
            # turn as a cancel would, then let the exception go on.
            reason = {"kind": "aborted", "reason": {"kind": "user", "reason": type(e).__name__}}
            torn_down = True
            raise
        finally:
            self._cancel = None
            session.append(TURN_END, turn_end(turn, reason))
            if torn_down:
                await self._flush_quietly()
        await self.runtime.sessions.flush(session)
        return reason

    async def _flush_quietly(self) -> None:
        """Try to make a torn-down turn durable before its exception goes on; a failure is
        logged (the exception in flight matters more, and crash repair closes what is lost)."""
        try:
            await self.runtime.sessions.flush(self.session)
        except Exception as e:
            log.warning(
                'agent on session "%s": flush after a torn-down turn failed: %s', self.session.id, e
            )

    def _claim(self, *, first: bool) -> list[Any]:
        claimed = list(self._next_step)
        self._splice("next-step", self._next_step, 0, len(self._next_step), [])
        if first and self._next_turn:
            claimed.append(self._next_turn[0])
            self._splice("next-turn", self._next_turn, 0, 1, [])
        return claimed

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
        header: dict[str, Any] = {"config": {"provider": self.provider, "model": self.model}}
        if self.system:
            header["system"] = self.system
        if tools:
            header["tools"] = tools
        encoded = encode_json(snapshot(header))
        if self._first_request or encoded != self._last_header:
            if self._first_request:
                logged = any(e.type == REQUEST_HEADER for e in session.events)
                why = "resume" if logged else "initial"
            else:
                why = "change"
            session.append(REQUEST_HEADER, {"header": header, "reason": why})
            self._first_request, self._last_header = False, encoded
        context = {"provider": self.provider, "model": self.model}
        last = next((e.data for e in reversed(session.events) if e.type == REQUEST_CONTEXT), None)
        if last is None or thaw(last) != context:
            session.append(REQUEST_CONTEXT, context)
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
                seqs.append(
                    session.append(
                        ASSISTANT_CHUNK, {"turn": turn, "step": step, "chunk": chunk}
                    ).seq
                )
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
        finish = assembler.finish or {"kind": "stop"}
        kind = finish.get("kind")
        if kind in ("error", "aborted"):
            failure = dict(
                finish.get("failure") or {"message": f"model stream {kind}", "code": "UNKNOWN"}
            )
            if kind == "aborted":
                failure["code"] = "ABORTED"
            raise LlmError(failure)
        content = assembler.content()
        if kind == "max-tokens":
            content = [b for b in content if b["type"] != "tool-call"]
        data = {"turn": turn, "step": step, "message": self._assistant(content)}
        if assembler.usage is not None:
            data["usage"] = assembler.usage
        session.append(ASSISTANT_MESSAGE, data, surface_op="append", source_event_seqs=seqs)
        calls = [b for b in content if b["type"] == "tool-call"]
        if not calls:
            return "max-tokens" if kind == "max-tokens" else "completed"
        await self._run_tools(turn, step, calls, cancel)
        return None

    def _assistant(self, content: list[dict[str, Any]]) -> dict[str, Any]:
        return model_message(content, provider=self.provider, model=self.model)

    # --- tools ------------------------------------------------------------------------------

    async def _run_tools(
        self, turn: int, step: int, calls: list[dict[str, Any]], cancel: CancelSignal
    ) -> None:
        """Start calls in model order (a rolling pool of parallel calls, exclusive calls
        alone), commit results strictly in model order."""
        started: list[tuple[dict[str, Any], int, asyncio.Future[ToolResult]]] = []
        committed = 0

        def commit_ready() -> None:
            nonlocal committed
            while committed < len(started) and started[committed][2].done():
                block, call_seq, task = started[committed]
                self._record_result(turn, step, block["id"], call_seq, task.result())
                committed += 1

        not_started = list(calls)
        try:
            await self._dispatch(turn, step, cancel, started, not_started, commit_ready)
        except BaseException:
            # Torn down from outside: stop the bodies still running and answer every call
            # before the exception goes on (the results that exist, else unknown outcome).
            for _, _, task in started[committed:]:
                task.cancel()
            for block, call_seq, task in started[committed:]:
                self._record_result(turn, step, block["id"], call_seq, torn_down_result(task))
            committed = len(started)
            raise
        finally:
            for block in not_started:  # never dispatched: a synthetic pair each
                call_seq = self._record_call(turn, step, block)
                self._record_result(turn, step, block["id"], call_seq, aborted_before_dispatch())

    async def _dispatch(
        self,
        turn: int,
        step: int,
        cancel: CancelSignal,
        started: list[tuple[dict[str, Any], int, asyncio.Future[ToolResult]]],
        not_started: list[dict[str, Any]],
        commit_ready: Callable[[], None],
    ) -> None:
        """Start ``not_started`` calls in order (popping each), and wait for every started one
        to finish, committing results as they become ready."""
        session, tools = self.session, self.runtime.tools
        while not_started and not cancel.cancelled:
            block = not_started[0]
            running = [t for _, _, t in started if not t.done()]
            # An exclusive call starts alone and runs alone; parallel ones share a pool.
            alone = tools.exclusive(block["name"]) or (
                bool(started) and tools.exclusive(started[-1][0]["name"])
            )
            if running and (alone or len(running) >= self.max_parallel_tools):
                await asyncio.wait(
                    running,
                    return_when=asyncio.ALL_COMPLETED if alone else asyncio.FIRST_COMPLETED,
                )
                commit_ready()
                continue
            not_started.pop(0)
            call_seq = self._record_call(turn, step, block)
            call = ToolCall(
                block["id"], block["name"], block["arguments"], session, self, None, cancel
            )
            refused = await pre_execute(self, call)  # the next call waits for this verdict
            task: asyncio.Future[ToolResult]
            if refused is None:
                task = asyncio.ensure_future(tools.execute(call))
            else:
                task = asyncio.get_running_loop().create_future()
                task.set_result(refused)
            started.append((block, call_seq, task))
            await asyncio.sleep(0)  # let the body start before the next call is considered
            commit_ready()
        if started:
            await asyncio.wait([t for _, _, t in started])
        commit_ready()

    def _record_call(self, turn: int, step: int, block: Mapping[str, Any]) -> int:
        """Log ``tool/call`` for a tool-call block; return its seq."""
        data = tool_call(turn, step, block["id"], block["name"], block["arguments"])
        return self.session.append(TOOL_CALL, data).seq

    def _record_result(
        self, turn: int, step: int, call_id: str, call_seq: int, result: ToolResult
    ) -> None:
        message = tool_result_message(call_id, result.content, is_error=result.is_error)
        data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
        if result.error is not None:
            data["error"] = dict(result.error)
        if result.meta is not None:
            data["meta"] = result.meta
        self.session.append(TOOL_RESULT, data, surface_op="append", source_event_seqs=[call_seq])


def _error_chain(error: BaseException) -> str:
    parts: list[str] = []
    current: BaseException | None = error
    while current is not None and len(parts) < 10:
        parts.append(str(current) or type(current).__name__)
        current = current.__cause__
    return ": ".join(parts)
