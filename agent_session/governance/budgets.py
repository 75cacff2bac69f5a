"""Spend budgets that a crash cannot reset: set on a live session (:func:`set_budget`) or on a
stored one from any process (:func:`set_stored_budget`, ``agent-session budget set|raise``),
read back with what was spent (:func:`budget_report`). The rules are
:mod:`agent_session.session.events.budget`'s; the agent enforces them before each model
request (:mod:`agent_session.agent_loop.spending`).

Guarantees: a budget is an event of the log, so it survives every crash and resume with the
session; nothing is written for a limit that is not a number ≥ 0 or a cost limit without a
price table (:class:`BudgetError`); a raise never lowers a limit; a stored session a live
writer holds is refused (``SessionCollisionError``), as a decision is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agent_session.deciders import append_judged
from agent_session.session.errors import BudgetError
from agent_session.session.events.budget import (
    LIMITS,
    BudgetFold,
    budget_parked,
    check_limits,
    session_spend,
)
from agent_session.session.events.event import SessionEvent
from agent_session.session.events.prices import PriceTable, price_table
from agent_session.session.events.types import BUDGET_SET
from agent_session.session.live.session import Session

if TYPE_CHECKING:
    from agent_session.session.persistence.service import SessionPersistence
    from agent_session.stores import StoreSpec

__all__ = ["LIMITS", "budget_data", "budget_report", "set_budget", "set_stored_budget"]


def budget_data(
    limits: Mapping[str, Any],
    *,
    prices: PriceTable | Mapping[str, Any] | None = None,
    by: str | None = None,
    reason: str | None = None,
    current: BudgetFold | None = None,
    raising: bool = False,
) -> dict[str, Any]:
    """The data of a ``budget/set``: ``limits`` (with ``raising``, over the ``current``
    ones, none of which it may lower), the price table (given, else the current one).

    Raises:
        BudgetError: A limit that is not a number ≥ 0, a cost limit without prices, or a
            raise that lowers a limit (nothing is written).
    """
    table: PriceTable | None
    try:
        table = price_table(prices, "given") if isinstance(prices, Mapping) else prices
    except ValueError as e:
        raise BudgetError(str(e)) from None
    before = current.budget if current is not None else None
    if table is None and before is not None:
        table = before.prices
    merged = dict(limits)
    if raising:
        if before is None:
            raise BudgetError("there is no budget to raise: set one first (budget set)")
        for key, value in limits.items():
            old = before.limits.get(key)
            if old is not None and isinstance(value, int | float) and value < old:
                raise BudgetError(f"a raise cannot lower {key} from {old} to {value}")
        merged = {**before.limits, **limits}
    try:
        checked = check_limits(merged, table)
    except ValueError as e:
        raise BudgetError(str(e)) from None
    data: dict[str, Any] = {"limits": checked}
    if table is not None:
        data["prices"] = table.to_json()
    if by is not None:
        data["by"] = by
    if reason is not None:
        data["reason"] = reason
    return data


def set_budget(
    session: Session,
    limits: Mapping[str, Any],
    *,
    prices: PriceTable | Mapping[str, Any] | None = None,
    by: str | None = None,
    reason: str | None = None,
) -> None:
    """Set the budget of a live ``session`` (its agent's process): ``limits`` by
    :data:`LIMITS` names (``{"outputTokens": 20000, "cost": 0.5}``), ``prices`` for a cost
    limit. It holds from the next model request; a parked turn goes on at
    ``agent.resume()`` once the budget allows its request.

    Raises:
        BudgetError: As :func:`budget_data`.
    """
    data = budget_data(limits, prices=prices, by=by, reason=reason)
    session.append(BUDGET_SET, data)


async def set_stored_budget(
    store: str | StoreSpec | SessionPersistence,
    session_id: str,
    limits: Mapping[str, Any],
    *,
    prices: PriceTable | Mapping[str, Any] | None = None,
    by: str | None = None,
    reason: str | None = None,
    raising: bool = False,
) -> dict[str, Any]:
    """Set (or, with ``raising``, raise) the budget of a stored session from any process;
    return what was written, as ``{"budget": <the budget/set data>}``.

    Raises:
        BudgetError: As :func:`budget_data`.
        SessionCollisionError: A live writer holds the session: set it there.
        SessionNotFoundError: No such session.
    """
    after: list[dict[str, Any]] = []

    def judge(events: Sequence[SessionEvent]) -> tuple[str, dict[str, Any]]:
        fold = session_spend(events)
        data = budget_data(
            limits, prices=prices, by=by, reason=reason, current=fold, raising=raising
        )
        after[:] = [data]
        return BUDGET_SET, data

    await append_judged(store, session_id, judge)
    return {"budget": after[0]}


def budget_report(events: Sequence[Any], seed: int = 0) -> dict[str, Any]:
    """``{budget, spent, remaining, parked}`` of a log: the budget in force (``None``
    without one), the spend (:class:`agent_session.session.events.budget.Spend`), what
    each limit leaves, and the park of a turn waiting for a raise (``None`` when none)."""
    fold = session_spend(events, seed)
    spent = fold.spend()
    budget = fold.budget
    remaining = (
        {key: limit - spent.value(key) for key, limit in budget.limits.items()}
        if budget is not None
        else None
    )
    park = budget_parked(events)
    return {
        "budget": budget.to_json() if budget is not None else None,
        "spent": spent.to_json(),
        "remaining": remaining,
        "parked": None if park is None else {"turn": park.turn, "step": park.step, **park.data},
    }
