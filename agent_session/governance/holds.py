"""Legal holds, kept as ``hold/set`` and ``hold/released`` events of a session's log: while
one stands, every delete path refuses the session (``SessionPersistence.delete``, so ``rm``,
``purge``, ``copy --move``, an archive's drop and each framework's own delete), naming it.

Guarantees: a hold placed on a stored session from any process (:func:`place_hold`,
``agent-session hold``) goes through the same locked append as an approval, so it is
durable when the call returns; one placed on a live session (:func:`hold_live`) is durable
at that session's next checkpoint; a release is an event too, so the
log keeps who held the session, why, and when it was let go; the check reads the stored
bytes leniently (:func:`holds_in_lines`), so a torn or damaged line elsewhere in the log
never hides a hold that was stored whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agent_session.deciders import append_judged
from agent_session.session import SessionError
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.holds import (
    Hold,
    check_not_held,
    holds_in_lines,
    standing_holds,
)
from agent_session.session.events.types import HOLD_RELEASED, HOLD_SET
from agent_session.session.live.session import Session

if TYPE_CHECKING:
    from agent_session.session.persistence.service import SessionPersistence
    from agent_session.stores import StoreSpec

__all__ = [
    "Hold",
    "check_not_held",
    "hold_live",
    "holds_in_lines",
    "place_hold",
    "release_hold",
    "standing_holds",
]


def _hold_data(reason: str, by: str | None) -> dict[str, Any]:
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("a hold needs a reason (what it is for: a matter, a ticket)")
    return {"reason": reason, **({"by": by} if by else {})}


def hold_live(session: Session, reason: str, *, by: str | None = None) -> None:
    """Place a hold on a live session (durable at its next checkpoint)."""
    session.append(HOLD_SET, _hold_data(reason, by))


async def place_hold(
    store: str | StoreSpec | SessionPersistence,
    session_id: str,
    reason: str,
    *,
    by: str | None = None,
) -> None:
    """Place a hold on a stored session from any process; durable when it returns.

    Raises:
        ValueError: No reason given (nothing is written).
        SessionCollisionError: A live writer holds the session.
        SessionNotFoundError: It is not stored.
    """
    data = _hold_data(reason, by)

    def judge(_: Sequence[SessionEvent]) -> tuple[str, dict[str, Any]]:
        return HOLD_SET, data

    await append_judged(store, session_id, judge)


async def release_hold(
    store: str | StoreSpec | SessionPersistence,
    session_id: str,
    reason: str,
    *,
    seqs: Sequence[int] | None = None,
    by: str | None = None,
) -> list[Hold]:
    """Release the holds placed at ``seqs`` (default: every standing one), keeping the
    release in the log; returns the holds it released.

    Raises:
        ValueError: No reason, or a seq that names no standing hold (nothing is written).
        SessionError: The session has no standing hold.
        SessionCollisionError: A live writer holds the session.
    """
    data = _hold_data(reason, by)
    released: list[Hold] = []

    def judge(events: Sequence[SessionEvent]) -> tuple[str, dict[str, Any]]:
        standing = {hold.seq: hold for hold in standing_holds(events)}
        if not standing:
            raise SessionError(f'session "{session_id}" has no standing hold; nothing was written')
        wanted = list(standing) if seqs is None else list(seqs)
        unknown = [seq for seq in wanted if seq not in standing]
        if unknown:
            raise ValueError(
                f"no standing hold at seq {unknown[0]} of {session_id} (standing: "
                f"{', '.join(str(seq) for seq in standing)}); nothing was written"
            )
        released[:] = [standing[seq] for seq in wanted]
        return HOLD_RELEASED, {"holds": wanted, **data}

    await append_judged(store, session_id, judge)
    return released
