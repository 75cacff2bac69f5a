"""The budget at the pre-request checkpoint: before each model request of a session with a
budget (:mod:`session.events.budget`), the agent reserves the request's bound, or parks the
turn when the request would breach the budget.

Guarantees:

- The reservation (``budget/reserved``) is appended before the request is built, so the
  checkpoint policy makes it durable before the request goes out: a crash during the request
  leaves a reservation that every reader charges at its bound.
- A request that would breach is never made: ``budget/exceeded`` is appended, the step and
  the turn stay open and durable, and ``run_turn`` returns ``{"kind": "awaiting-budget",
  "budget": {...}}``. Crash repair leaves a parked turn open.
- ``agent.resume()`` after a raise (``budget/set`` from any process) makes the parked step's
  request, once, in the same turn and step; while the budget still does not allow it,
  resume returns the ``awaiting-budget`` value again and writes nothing.
- The spend is folded incrementally per live session: a check costs the events since the
  last one, not the whole log.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from agent_session.agent_loop.approval import Parked
from agent_session.session.events.budget import BudgetFold, budget_parked
from agent_session.session.events.compaction import unread_boundary
from agent_session.session.events.types import BUDGET_EXCEEDED, BUDGET_RESERVED
from agent_session.session.live.session import Session

if TYPE_CHECKING:
    from agent_session.agent_loop.loop import Agent  # (a string below: weakref needs it)

__all__ = [
    "AWAITING_BUDGET",
    "BudgetParked",
    "awaiting_budget",
    "fold_of",
    "guard_request",
    "reserve",
    "still_over",
]

AWAITING_BUDGET: Final = "awaiting-budget"
"""The ``kind`` of what ``run_turn`` and ``resume`` return while a turn is parked over its
budget."""

_FOLDS: weakref.WeakKeyDictionary[Any, tuple[Session, BudgetFold]] = weakref.WeakKeyDictionary()
"""Each writer's fold of its session (an agent, or an integration's session object)."""


class BudgetParked(Parked):
    """A model request would breach the session's budget: the turn parks."""

    def __init__(self) -> None:
        super().__init__("budget")


def fold_of(writer: Any, session: Session) -> BudgetFold:
    """``writer``'s budget fold of ``session``, brought up to its last event (read event by
    event: no snapshot of a long log)."""
    held = _FOLDS.get(writer)
    if held is None or held[0] is not session:
        fold = BudgetFold(seed=session.header.seed_length or 0)
        boundary = unread_boundary(session.events)
        if boundary is not None and not boundary.budgeted:
            fold.seen = fold.first = boundary.start  # (no budget before it: not read)
        held = _FOLDS[writer] = (session, fold)
    fold = held[1]
    if fold.seen < session.seq:
        fold.fold(session.event_at(seq) for seq in range(fold.seen, session.seq))
        if fold.budget is not None and fold.first:  # a budget counts all that was spent
            fold = BudgetFold(seed=fold.seed)
            fold.fold(session.event_at(seq) for seq in range(session.seq))
            _FOLDS[writer] = (session, fold)
    return fold


def _bound(fold: BudgetFold, limit: Any) -> dict[str, Any]:
    output = limit if type(limit) is int and limit > 0 else None
    return {"inputTokens": fold.last_input, "outputTokens": output}


def reserve(
    writer: Any,
    session: Session,
    turn: int,
    step: int,
    where: tuple[str, str],
    max_tokens: Any,
) -> list[str]:
    """Before a model request of ``session`` (``where``: its provider and model; its
    ``max_tokens`` bounds its output): append its reservation and return ``[]``, or, when
    it would breach the budget, append ``budget/exceeded`` and return the limits it would
    breach. Nothing is written for a session without a budget."""
    fold = fold_of(writer, session)
    budget = fold.budget
    if budget is None:
        return []
    bound = _bound(fold, max_tokens)
    over = fold.over(bound, where[1])
    at: dict[str, Any] = {"turn": turn, "step": step}
    if not over:
        session.append(BUDGET_RESERVED, {**at, "provider": where[0], "model": where[1], **bound})
        return []
    spent, limits = fold.spend().to_json(), dict(budget.limits)
    data = {**at, "spent": spent, "bound": bound, "limits": limits, "over": over}
    session.append(BUDGET_EXCEEDED, data)
    return over


def guard_request(agent: Agent, turn: int, step: int, config: Mapping[str, Any]) -> None:
    """Reserve the next request's bound (``config``: its header's, whose ``maxTokens``
    bounds its output), or park (raise :class:`BudgetParked`) when it would breach the
    budget (:func:`reserve`)."""
    where = (agent.provider, agent.model)
    if reserve(agent, agent.session, turn, step, where, config.get("maxTokens")):
        raise BudgetParked


def still_over(agent: Agent) -> bool:
    """Whether the parked request would still breach the budget in force now."""
    fold = fold_of(agent, agent.session)
    limit = agent.runtime.models.settings(agent.provider).config.get("maxTokens")
    return bool(fold.over(_bound(fold, limit), agent.model))


def awaiting_budget(session: Session) -> dict[str, Any] | None:
    """``{"kind": "awaiting-budget", "budget": {turn, step, over, spent, limits}}`` of a
    turn parked over its budget; ``None`` when it is not."""
    park = budget_parked(session.events)
    if park is None:
        return None
    fold = BudgetFold(seed=session.header.seed_length or 0).fold(session.events)
    shown: Mapping[str, Any] = fold.budget.to_json() if fold.budget is not None else {}
    return {
        "kind": AWAITING_BUDGET,
        "budget": {
            "turn": park.turn,
            "step": park.step,
            "over": park.data.get("over"),
            "spent": fold.spend().to_json(),
            **shown,
        },
    }
