"""Tool approvals in the reference's format (``@deepseek-ai/dsh-user-approval``): the events,
their fixed texts and the policy fold.

A ``tools/pre-execute`` listener answers a tool call ``allow``, ``deny`` or ``ask``; an ask goes
to the approval service, which logs ``approval/asked {id, toolName, callId?, reason?}``, asks
its answerers, and logs ``approval/decided {id, outcome}`` with one of four outcomes. Only
``allowed-once`` lets the body run; every other outcome is an error result whose text says why.
The effective policy of a session (``ask`` or ``never``) is the last ``approval/policy`` event
of its log.

Beyond the reference, a service mounted with ``park=True`` makes each ask durable (its
``approval/asked`` carries the digest of the call's arguments, :mod:`session.events.parked`,
and is flushed before any answerer is asked), and an ask no answerer decides (the end of the
chain, or an answerer answering ``"park"``) *parks* the turn (:class:`Parked`): a decision
from any process (``agent-session approve``) is carried out by ``agent.resume()``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from agent_session.agent_loop.cancel import CancelSignal
from agent_session.agent_loop.tools import ToolCall, ToolResult, aborted_before_dispatch
from agent_session.session.errors import SessionEventError
from agent_session.session.events.eventlog import EventLog, is_run
from agent_session.session.events.header import now_ms
from agent_session.session.events.parked import ARGUMENTS_DIGEST, EXPIRES_AT, arguments_digest
from agent_session.session.events.turns import brackets
from agent_session.session.events.types import (
    APPROVAL_ASKED,
    APPROVAL_DECIDED,
    APPROVAL_POLICY,
    USER_MESSAGE,
)
from agent_session.session.live.hooks import HookBus
from agent_session.session.live.runtime import PluginScope
from agent_session.session.live.session import Session

__all__ = [
    "APPROVAL_ASKED",
    "APPROVAL_DECIDED",
    "APPROVAL_POLICY",
    "APPROVAL_REQUEST",
    "OUTCOMES",
    "PARK",
    "POLICIES",
    "TOOLS_PRE_EXECUTE",
    "ApprovalRequest",
    "ApprovalService",
    "Outcome",
    "Parked",
    "Policy",
    "context_message",
    "denial",
    "effective_policy",
    "policy_notice",
    "pre_execute",
    "runtime_context",
    "set_approval_policy",
    "unsupported",
    "user_approval",
]

Outcome = Literal["allowed-once", "rejected", "cancelled", "unavailable"]
OUTCOMES: Final[tuple[Outcome, ...]] = ("allowed-once", "rejected", "cancelled", "unavailable")
Policy = Literal["ask", "never"]
POLICIES: Final[tuple[Policy, ...]] = ("ask", "never")

_SENTENCES: Final[dict[Policy, str]] = {
    "ask": (
        "Approval policy: ask. Operations that require approval may ask through the "
        "configured answerers; without an available answerer, the request fails closed."
    ),
    "never": (
        "Approval prompts are disabled in this session: actions that require approval are "
        "rejected automatically — do not request sandbox escalation (do not set "
        "`sandbox_permissions`)."
    ),
}
"""What the model reads of each policy (the runtime-context section ``approval:policy``)."""
_CONTEXT: Final = (
    "Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\n"
)
CONTEXT_PLUGIN: Final = "@deepseek-ai/dsh-system-prompt"
POLICY_PLUGIN: Final = "user-approval"


def denial(outcome: Outcome, tool: str) -> str:
    """The reason a call the approval did not allow is refused with (the model reads
    ``Error: `` and this)."""
    if outcome == "rejected":
        return f'the user rejected tool "{tool}"'
    if outcome == "cancelled":
        return f'approval for tool "{tool}" was cancelled'
    return f'tool "{tool}" requires approval, but no approval channel is available'


def unsupported(tool: str, reason: str | None) -> str:
    """The reason an ``ask`` is refused with when no approval service is mounted."""
    return reason or f'tool "{tool}" requires approval (not yet supported)'


def effective_policy(events: Iterable[Any]) -> Policy | None:
    """The policy of the last ``approval/policy`` event of ``events``; ``None`` when the log
    never switched (the service's configured policy applies). Read backwards: the loop asks
    at every step, and a switch is near the end or nowhere."""
    parts = events.parts if isinstance(events, EventLog) else (list(events),)
    for part in reversed(parts):
        if is_run(part) and not part.built:
            continue  # packed streamed deltas: never a policy
        for event in reversed(part):
            if getattr(event, "type", None) == APPROVAL_POLICY:
                value = event.data.get("policy")
                if value in POLICIES:
                    return value  # type: ignore[no-any-return]
    return None


def runtime_context(policy: Policy) -> dict[str, Any]:
    """The runtime-context ``user/message`` data (without its id) the loop adds when the
    approval service is mounted, for ``policy``."""
    sentence = _SENTENCES[policy]
    return {
        "content": [{"type": "text", "text": _CONTEXT + sentence}],
        "source": {
            "kind": "plugin",
            "plugin": CONTEXT_PLUGIN,
            "form": "snapshot",
            "sections": [{"name": "approval:policy", "text": sentence}],
        },
        "role": "user",
    }


def policy_notice(old: Policy, new: Policy) -> dict[str, Any]:
    """The ``user/message`` data (without its id) queued for the agent's next step when the
    policy changes."""
    text = f'The approval policy changed from "{old}" to "{new}" (changed by the user).'
    return {
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "plugin", "plugin": POLICY_PLUGIN},
        "role": "user",
    }


PARK: Final = "park"
"""What an ``approval/request`` answerer returns to leave the decision to a decider outside
this process (a service mounted with ``park=True`` only; otherwise it is ``unavailable``)."""


class Parked(Exception):
    """A call's approval was parked: its ask is durable and waits for a decision. Raised
    through the step to the turn, which stays open and returns ``awaiting-approval``; or,
    when the turn was torn down from outside while an answerer of the process was still
    thinking (``teardown``: task cancellation, Ctrl-C, exit), re-raises that."""

    def __init__(self, call_id: str, teardown: BaseException | None = None) -> None:
        super().__init__(call_id)
        self.call_id = call_id
        self.teardown = teardown


TOOLS_PRE_EXECUTE: Final = "tools/pre-execute"
"""Middleware ``async (call, next) -> decision`` before a call's body: ``{"kind": "allow"}``,
``{"kind": "deny", "reason": ...}`` or ``{"kind": "ask", "reason"?: ...}``. The end of the
chain allows."""
APPROVAL_REQUEST: Final = "approval/request"
"""Middleware ``async (request, next) -> outcome``: the answerers of an approval request, in
registration order (the first that answers wins, ``next`` delegates); the end of the chain
answers ``unavailable``."""
OUTSIDE_TURN: Final = (
    "approval.request() outside an open turn: the approval/asked + approval/decided audit "
    "pair must be turn-enclosed (a bare event between turns is crash-tail garbage on "
    "reload). Ask from inside the turn that needs the decision."
)


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What an answerer is asked: may ``tool_name`` (the call ``call_id`` of ``session``) run?
    The arguments are in the call's ``tool/call`` event."""

    session: Session
    tool_name: str
    call_id: str | None = None
    reason: str | None = None


class ApprovalService:
    """The reference's approval service: one question per ask, decided by the answerers
    registered on ``approval/request``, logged as ``approval/asked`` + ``approval/decided``.
    Install it with ``runtime.install(user_approval())``."""

    def __init__(
        self,
        hooks: HookBus,
        policy: Policy = "ask",
        *,
        park: bool = False,
        expires_after: float | None = None,
        flush: Callable[[Session], Awaitable[object]] | None = None,
        tell_model: bool = True,
    ) -> None:
        if policy not in POLICIES:
            raise TypeError('approval policy must be one of "ask" or "never"')
        if expires_after is not None and not (park and expires_after > 0):
            raise ValueError("expires_after needs park=True and a positive number of seconds")
        self._hooks = hooks
        self._flush = flush
        self.policy: Policy = policy
        """The configured policy (a log's last ``approval/policy`` overrides it)."""
        self.park = park
        """Whether an ask nobody decides at once parks the turn (else it is
        ``unavailable``, as in the reference)."""
        self.expires_after = expires_after
        """Seconds a parked ask waits before whoever sees it decides it ``cancelled``."""
        self.tell_model = tell_model
        """Whether the model reads the policy in a runtime-context ``user`` message (the
        reference's: at a session's first step, and whenever the policy changed)."""

    def effective(self, session: Session) -> Policy:
        """The session's policy: its log's last switch, else the configured one."""
        return effective_policy(session.events) or self.policy

    async def request(
        self,
        session: Session,
        tool_name: str,
        call_id: str | None = None,
        reason: str | None = None,
        cancel: CancelSignal | None = None,
    ) -> Outcome:
        """Ask, log and return the outcome (fail closed: no answerer, a failing one or an
        answer outside the four outcomes is ``unavailable``).

        Raises:
            SessionEventError: The session is not inside an open turn (nothing is logged).
        """
        outcome = await self.ask(session, tool_name, call_id, reason, cancel)
        return "unavailable" if outcome is None else outcome

    async def ask(
        self,
        session: Session,
        tool_name: str,
        call_id: str | None = None,
        reason: str | None = None,
        cancel: CancelSignal | None = None,
        *,
        arguments: Any = None,
    ) -> Outcome | None:
        """:meth:`request` for a recorded call whose ``arguments`` are given: with
        ``park=True`` the ask is durable (flushed) before any answerer is asked, and
        ``None`` means it was parked (no decision is logged).

        Raises:
            Parked: With ``park=True``, the turn was torn down from outside while an answerer
                was thinking: the ask stays undecided (``teardown`` is the exception).
        """
        if brackets(session.events).open_turn is None:
            raise SessionEventError(OUTSIDE_TURN)
        id = str(uuid.uuid4())
        asked: dict[str, Any] = {"id": id, "toolName": tool_name}
        if call_id is not None:
            asked["callId"] = call_id
        if reason is not None:
            asked["reason"] = reason
        durable = self.park and call_id is not None and arguments is not None
        if durable:
            asked[ARGUMENTS_DIGEST] = arguments_digest(arguments)
            if self.expires_after is not None:
                asked[EXPIRES_AT] = now_ms() + round(self.expires_after * 1000)
        session.append(APPROVAL_ASKED, asked)
        if durable and self._flush is not None:
            await self._flush(session)
        request = ApprovalRequest(session, tool_name, call_id, reason)
        try:
            outcome = await self._decide(request, cancel, durable)
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit) as e:
            if not durable:
                raise
            # A shutdown or a deploy while the question waits: it stays asked, durably.
            raise Parked(str(call_id), teardown=e) from None
        if outcome is None:
            return None
        session.append(APPROVAL_DECIDED, {"id": id, "outcome": outcome})
        return outcome

    async def _decide(
        self, request: ApprovalRequest, cancel: CancelSignal | None, may_park: bool
    ) -> Outcome | None:
        if cancel is not None and cancel.cancelled:
            return "cancelled"
        if self.effective(request.session) == "never":
            return "rejected"

        async def unanswered(_: ApprovalRequest) -> str:
            return PARK if may_park else "unavailable"

        answer = asyncio.ensure_future(self._hooks.chain(APPROVAL_REQUEST, unanswered)(request))
        if cancel is not None:
            aborted = asyncio.ensure_future(cancel.wait())
            await asyncio.wait([answer, aborted], return_when=asyncio.FIRST_COMPLETED)
            aborted.cancel()
            if not answer.done():
                answer.cancel()
                return "cancelled"
        try:
            outcome = await answer
        except Exception:
            return "unavailable"
        if outcome == PARK and may_park:
            return None
        return outcome if outcome in OUTCOMES else "unavailable"

    def set_policy(self, agent: Any, policy: Policy) -> None:
        """Switch the agent's session to ``policy`` (no-op when unchanged): ``approval/policy``
        at once, and a notice the model reads at the agent's next step."""
        old = self.effective(agent.session)
        if policy == old:
            return
        set_approval_policy(agent.session, policy)
        agent.steer({**policy_notice(old, policy), "id": str(uuid.uuid4())})


def set_approval_policy(session: Session, policy: Policy) -> None:
    """Append ``approval/policy {policy}`` (anywhere: between turns too).

    Raises:
        TypeError: ``policy`` is not ``ask`` or ``never`` (nothing is logged).
    """
    if policy not in POLICIES:
        raise TypeError('approval policy must be one of "ask" or "never"')
    session.append(APPROVAL_POLICY, {"policy": policy})


def user_approval(
    policy: Policy = "ask",
    *,
    park: bool = False,
    expires_after: float | None = None,
    tell_model: bool = True,
) -> Callable[[PluginScope], None]:
    """The plugin that mounts the approval service on an ``AgentRuntime``
    (``runtime.approval``): asks from ``tools/pre-execute`` reach it, and every session's
    model reads the policy in a runtime-context ``user`` message, as the reference's models
    do (``tell_model=False`` sends none). With ``park=True`` an ask no answerer decides parks
    the turn, durably (``expires_after``: seconds it may wait)."""

    def install(scope: PluginScope) -> None:
        from agent_session.agent_loop.runtime import AgentRuntime  # (it imports this module)

        runtime = scope.runtime
        if not isinstance(runtime, AgentRuntime):
            raise TypeError("user_approval() mounts on an AgentRuntime, which runs agents")
        service = ApprovalService(
            runtime.hooks,
            policy,
            park=park,
            expires_after=expires_after,
            flush=runtime.sessions.flush,
            tell_model=tell_model,
        )
        runtime.approval = service

        def unmount() -> None:
            if runtime.approval is service:
                runtime.approval = None

        scope.disposer.add(unmount)

    return install


async def pre_execute(agent: Any, call: ToolCall, *, may_park: bool = True) -> ToolResult | None:
    """The ``tools/pre-execute`` verdict on ``call`` (its ``tool/call`` is logged): ``None``
    when the body may run, else the result that refuses it (the reference's texts).

    Raises:
        Parked: The ask was parked (a service mounted with ``park=True`` and ``may_park``).
    """

    async def allow(_: ToolCall) -> Mapping[str, Any]:
        return {"kind": "allow"}

    decision = await agent.runtime.hooks.chain(TOOLS_PRE_EXECUTE, allow)(call)
    kind = decision.get("kind") if isinstance(decision, Mapping) else None
    if kind == "deny":
        return ToolResult.failure(str(decision.get("reason") or f'tool "{call.name}" was denied'))
    if kind != "ask":
        return None
    reason = decision.get("reason")
    service: ApprovalService | None = agent.runtime.approval
    if service is None:
        return ToolResult.failure(unsupported(call.name, reason))
    arguments = call.arguments if may_park else None
    outcome = await service.ask(
        agent.session, call.name, call.call_id, reason, call.cancel, arguments=arguments
    )
    if outcome is None:
        raise Parked(call.call_id)
    if outcome == "allowed-once":
        return None
    if outcome == "cancelled" and call.cancel.cancelled:
        return aborted_before_dispatch()
    return ToolResult.failure(denial(outcome, call.name))


def context_message(agent: Any) -> dict[str, Any] | None:
    """The runtime-context ``user/message`` data the step should carry: when the approval
    service is mounted and the session's last snapshot (if any) says something else."""
    service: ApprovalService | None = agent.runtime.approval
    if service is None or not service.tell_model:
        return None
    wanted = runtime_context(service.effective(agent.session))
    last = _last_snapshot(agent.session.events)
    if last is not None and last.data["content"] == wanted["content"]:
        return None
    return {**wanted, "id": str(uuid.uuid4())}


def _last_snapshot(events: Sequence[Any]) -> Any:
    """The log's last runtime-context ``user/message``, read backwards without building a
    packed run of streamed deltas (never a message)."""
    parts = events.parts if isinstance(events, EventLog) else (events,)
    for part in reversed(parts):
        if is_run(part) and not part.built:
            continue
        for event in reversed(part):
            source = event.data.get("source") if event.type == USER_MESSAGE else None
            if isinstance(source, Mapping) and source.get("form") == "snapshot":
                return event
    return None
