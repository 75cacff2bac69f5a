"""Parked approvals: which tool calls of a log's open turn wait for a decision, read from the
log alone, so every reader (crash repair, ``ls``, ``verify``, the deciders, the resuming
agent) agrees on it.

The reference writes ``approval/asked {id, toolName, callId?, reason?}`` and, in the same
process, ``approval/decided {id, outcome}``. A *durable* ask adds ``argumentsDigest`` (the
digest of the recorded call's arguments, :func:`arguments_digest`) and may add ``expiresAt``
(ms since the epoch); the reference ignores both keys. A decision written while the turn was
parked (by ``agent-session approve`` or :func:`agent_session.approve`) carries the digest of
the arguments it approved, and the resuming agent marks the start of an approved body by
recording the call's ``tool/call`` again.

A call is **parked** when, in the open step of the open turn, it has a ``tool/call``, a
durable ask and no ``tool/result``, and either no decision yet, or a parked decision with no
``tool/call`` recorded after it. A parked call never ran: crash repair leaves its turn open.
A durable ask decided in its own process (no digest in the decision) is the reference's
pair: a crash before its result is repaired as the reference repairs it (the body may have
run). An ask without the digest (the reference's, as in a log it left when killed while
asking) is never parked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent_session.session.events.eventlog import is_run, iter_parts
from agent_session.session.events.turns import brackets
from agent_session.session.events.types import (
    APPROVAL_ASKED,
    APPROVAL_DECIDED,
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
)
from agent_session.session.json.codec import encode_json
from agent_session.session.json.lossless import snapshot

__all__ = [
    "ARGUMENTS_DIGEST",
    "DECIDED_BY",
    "EXPIRES_AT",
    "Decision",
    "ParkedCall",
    "arguments_digest",
    "parked_calls",
]

ARGUMENTS_DIGEST: Final = "argumentsDigest"
"""The key of a durable ask (and of a decision made while parked): ``sha256:<hex>`` of the
call's recorded arguments."""
EXPIRES_AT: Final = "expiresAt"
"""The key of a durable ask's deadline (ms since the epoch): past it, whoever sees the ask
decides it ``cancelled``."""
DECIDED_BY: Final = "decidedBy"
"""The key of a parked decision naming who decided (free text: a user, a host)."""


def arguments_digest(arguments: Any) -> str:
    """``sha256:<hex>`` of a call's recorded arguments: the UTF-8 bytes of the raw string the
    model streamed, or the canonical JSON of any other value."""
    raw = arguments if isinstance(arguments, str) else encode_json(snapshot(arguments)).decode()
    return "sha256:" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class Decision:
    """A decision written while the turn was parked."""

    outcome: str
    arguments_digest: str | None
    """The digest of the arguments the decider approved."""
    seq: int
    time: int
    by: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ParkedCall:
    """A tool call that waits for its approval (or for the agent to carry out a decision)."""

    ask_id: str
    """The ``approval/asked`` id a decision names."""
    call_id: str
    tool_name: str
    arguments: Any
    """The arguments recorded in its ``tool/call``."""
    arguments_digest: str
    """The digest the ask recorded."""
    reason: str | None
    asked_at: int
    """The ask's time (ms since the epoch)."""
    expires_at: int | None
    turn: Any
    step: Any
    call_seq: int
    """The seq of its ``tool/call``."""
    decision: Decision | None
    """The decision waiting to be carried out, or ``None`` while nobody decided."""

    def expired(self, now_ms: int) -> bool:
        """Whether the ask's deadline passed (it never does without one)."""
        return self.expires_at is not None and now_ms >= self.expires_at

    @property
    def matches(self) -> bool:
        """Whether the recorded arguments are the ones the ask and the decision saw."""
        digest = arguments_digest(self.arguments)
        decided = self.decision.arguments_digest if self.decision else digest
        return digest == self.arguments_digest == decided

    def to_json(self) -> dict[str, Any]:
        """The call as ``agent-session approvals --json`` prints it."""
        out: dict[str, Any] = {
            "callId": self.call_id,
            "toolName": self.tool_name,
            "arguments": self.arguments,
            "argumentsDigest": self.arguments_digest,
            "argumentsMatch": self.matches,
            "reason": self.reason,
            "askedAt": self.asked_at,
            "expiresAt": self.expires_at,
            "askId": self.ask_id,
            "turn": self.turn,
            "step": self.step,
        }
        if self.decision is not None:
            decision = self.decision
            out["decided"] = {"outcome": decision.outcome, "by": decision.by, "at": decision.time}
        return out


class _Ask:
    __slots__ = ("call_id", "data", "decision", "in_process", "time")

    def __init__(self, data: Mapping[str, Any], time: int) -> None:
        self.data = data
        self.time = time
        self.call_id = data.get("callId")
        self.decision: Decision | None = None
        self.in_process = False


def parked_calls(events: Sequence[Any]) -> tuple[ParkedCall, ...]:
    """The parked calls of ``events``' open turn, in the order they were asked (empty when
    the last turn is closed or nothing in it is parked). Reads only the open turn."""
    start = brackets(events).open_start
    if start is None:
        return ()
    step: Any = None
    turn: Any = None
    calls: dict[Any, tuple[int, Mapping[str, Any]]] = {}
    answered: set[Any] = set()
    asks: dict[Any, _Ask] = {}
    for event in iter_parts(events[start:]):
        if is_run(event):
            continue  # packed streamed deltas: never a call, an ask or a bracket
        kind = event.type
        data = event.data if isinstance(event.data, Mapping) else {}
        if kind == STEP_START:
            step, turn = data.get("step"), data.get("turn")
            calls, answered, asks = {}, set(), {}
        elif kind == STEP_END:
            step, calls, answered, asks = None, {}, set(), {}
        elif kind == ASSISTANT_MESSAGE:
            continue
        elif kind == TOOL_CALL:
            calls[data.get("callId")] = (event.seq, data)
        elif kind == TOOL_RESULT:
            message = data.get("message")
            source = message.get("source") if isinstance(message, Mapping) else None
            if isinstance(source, Mapping):
                answered.add(source.get("callId"))
        elif kind == APPROVAL_ASKED and isinstance(data.get(ARGUMENTS_DIGEST), str):
            asks[data.get("id")] = _Ask(data, event.time)
        elif kind == APPROVAL_DECIDED:
            ask = asks.get(data.get("id"))
            if ask is None or ask.decision is not None or ask.in_process:
                continue
            digest = data.get(ARGUMENTS_DIGEST)
            if isinstance(digest, str):
                by, why = data.get(DECIDED_BY), data.get("reason")
                ask.decision = Decision(
                    str(data.get("outcome")),
                    digest,
                    event.seq,
                    event.time,
                    by if isinstance(by, str) else None,
                    why if isinstance(why, str) else None,
                )
            else:
                ask.in_process = True
    if step is None:
        return ()
    out = []
    for ask in asks.values():
        recorded = calls.get(ask.call_id)
        if ask.in_process or recorded is None or ask.call_id in answered:
            continue
        call_seq, call = recorded
        if ask.decision is not None and call_seq > ask.decision.seq:
            continue  # the approved body was started: the call is no longer parked
        data = ask.data
        reason, expires = data.get("reason"), data.get(EXPIRES_AT)
        out.append(
            ParkedCall(
                str(data.get("id")),
                str(ask.call_id),
                str(data.get("toolName")),
                call.get("arguments"),
                str(data.get(ARGUMENTS_DIGEST)),
                reason if isinstance(reason, str) else None,
                ask.time,
                expires if type(expires) is int else None,
                turn,
                step,
                call_seq,
                ask.decision,
            )
        )
    return tuple(out)
