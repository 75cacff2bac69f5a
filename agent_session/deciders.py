"""Deciding parked tool calls of stored sessions, from any process on any host: list what waits
(:func:`pending_approvals`), :func:`approve` or :func:`reject` it. A decision is one
``approval/decided`` appended under the store's writer lock at the seq the decider read; when
anything landed meanwhile the append is refused (its seq no longer continues the log) and the
decider reads again and judges afresh. So of two deciders racing one wins and the other is
told: the call is already decided (``ApprovalNotPendingError``), or, when the winner still
holds the lock after a few tries, that a writer holds it (``SessionCollisionError``). The
agent that resumes the session carries the decision out (``agent.resume()``;
:mod:`agent_loop.parking`)."""

from __future__ import annotations

import asyncio
import getpass
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_session.agent_loop.approval import Outcome
from agent_session.agent_loop.parking import decision_data, find_parked
from agent_session.session.errors import (
    SessionCollisionError,
    SessionNotFoundError,
    SessionSeqError,
)
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.header import now_ms
from agent_session.session.events.parked import ParkedCall, parked_calls
from agent_session.session.events.types import APPROVAL_DECIDED, MARKED_IGNORABLE

if TYPE_CHECKING:
    from agent_session.session.persistence.service import SessionPersistence
    from agent_session.stores import StoreSpec

__all__ = [
    "PendingApproval",
    "append_judged",
    "approve",
    "decide_stored",
    "pending_approvals",
    "reject",
    "who",
]

_LOCK_TRIES = 6
"""How often a decider tries a writer lock another decider holds (with backoff, about 1.5 s in
all) before it says who holds it."""


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A parked call of a stored session."""

    session_id: str
    call: ParkedCall

    def to_json(self) -> dict[str, Any]:
        """One line of ``agent-session approvals --json``."""
        return {"sessionId": self.session_id, **self.call.to_json()}


def who() -> str:
    """``user@host`` of this process: who a decision made here names by default."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


async def pending_approvals(
    store: str | StoreSpec | SessionPersistence, ids: Iterable[str] | None = None
) -> list[PendingApproval]:
    """Every parked call of ``store`` (or of the sessions ``ids``), decided or not, in session
    order. Read-only: nothing is written, and a session another process writes is read as
    stored."""
    async with _Backend(store, read_only=True) as backend:
        named = list(ids) if ids is not None else None
        listed = named or sorted(header.id for header in await backend.list_headers())
        out: list[PendingApproval] = []
        for id in listed:
            try:
                events = (await backend.inspect(id)).events
            except SessionNotFoundError:
                if named is not None:
                    raise
                continue  # (removed since it was listed)
            out += [PendingApproval(id, call) for call in parked_calls(events)]
        return out


async def approve(
    store: str | StoreSpec | SessionPersistence,
    session_id: str,
    call_id: str,
    *,
    by: str | None = None,
    reason: str | None = None,
    digest: str | None = None,
) -> ParkedCall:
    """Allow the parked call ``call_id`` of a stored session once: the agent runs it, with its
    recorded arguments, when it resumes. ``digest`` (``sha256:…``, as listed) pins the
    arguments the decider saw. Returns the call as it was decided.

    Raises:
        ApprovalNotPendingError: No such parked call, or it is already decided.
        ApprovalMismatchError: ``digest`` is not the recorded arguments' (nothing written).
        ApprovalExpiredError: Its deadline passed: it was decided ``cancelled`` instead.
        SessionCollisionError: A live writer holds the session (decide in that process with
            ``agent_loop.parking.decide``, or once it exits).
    """
    return await decide_stored(
        store, session_id, call_id, "allowed-once", by=by, reason=reason, digest=digest
    )


async def reject(
    store: str | StoreSpec | SessionPersistence,
    session_id: str,
    call_id: str,
    *,
    by: str | None = None,
    reason: str | None = None,
) -> ParkedCall:
    """Reject the parked call ``call_id`` of a stored session: the agent gives the model the
    reference's denial (``the user rejected tool "…"``) when it resumes. Raises as
    :func:`approve`."""
    return await decide_stored(store, session_id, call_id, "rejected", by=by, reason=reason)


async def decide_stored(
    store: str | StoreSpec | SessionPersistence,
    session_id: str,
    call_id: str,
    outcome: Outcome,
    *,
    by: str | None = None,
    reason: str | None = None,
    digest: str | None = None,
) -> ParkedCall:
    """Append the decision ``outcome`` on the parked call ``call_id`` (see :func:`approve`)."""
    decided: list[tuple[ParkedCall, Exception | None]] = []

    def judge(events: Sequence[SessionEvent]) -> tuple[str, dict[str, Any]]:
        call = find_parked(events, session_id, call_id)
        data, expired = decision_data(call, outcome, by=by, reason=reason, digest=digest)
        decided[:] = [(call, expired)]
        return APPROVAL_DECIDED, data

    await append_judged(store, session_id, judge)
    call, expired = decided[0]
    if expired is not None:
        raise expired
    return call


async def append_judged(
    store: str | StoreSpec | SessionPersistence,
    session_id: str,
    judge: Callable[[Sequence[SessionEvent]], tuple[str, dict[str, Any]]],
) -> None:
    """Append one event to a stored session, as ``judge`` decides it from the log read at
    the moment (its type and data; ``judge`` raises to append nothing), under the store's
    writer lock at the seq it read: when anything landed meanwhile, the log is read and
    judged again. A live writer that keeps the session refuses it
    (``SessionCollisionError``, after about 1.5 s of tries)."""
    async with _Backend(store) as backend:
        for attempt in range(_LOCK_TRIES):
            events = (await backend.inspect(session_id)).events
            kind, data = judge(events)
            event = {"type": kind, "seq": len(events), "time": now_ms(), "data": data}
            if kind in MARKED_IGNORABLE:
                event["ignorable"] = True
            try:
                await backend.append(session_id, [event])
            except (SessionSeqError, SessionCollisionError) as e:
                # Another decider (or writer) came first: read again and judge afresh.
                if attempt == _LOCK_TRIES - 1:
                    raise e
                await asyncio.sleep(0.05 * 2**attempt)
                continue
            return
    raise AssertionError("unreachable")  # pragma: no cover


class _Backend:
    """``async with``: the given backend as it is, or one opened on a store name (closed on
    exit)."""

    def __init__(
        self, store: str | StoreSpec | SessionPersistence, *, read_only: bool = False
    ) -> None:
        self._given = store
        self._read_only = read_only
        self._opened: SessionPersistence | None = None

    async def __aenter__(self) -> SessionPersistence:
        from agent_session.cli.commands import open_backend
        from agent_session.session.persistence.service import SessionPersistence
        from agent_session.stores import StoreSpec, parse_store

        if isinstance(self._given, SessionPersistence):
            return self._given
        spec = self._given if isinstance(self._given, StoreSpec) else parse_store(self._given)
        self._opened = open_backend(spec, read_only=self._read_only)
        return self._opened

    async def __aexit__(self, *exc: object) -> None:
        if self._opened is not None:
            await self._opened.aclose()
