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
from agent_session.session.events.types import BUDGET_EXCEEDED, BUDGET_RESERVED
from agent_session.session.live.session import Session

if TYPE_CHECKING:
    from agent_session.agent_loop.loop import Agent  # (a string below: weakref needs it)

__all__ = ["AWAITING_BUDGET", "BudgetParked", "awaiting_budget", "guard_request", "still_over"]

AWAITING_BUDGET: Final = "awaiting-budget"
"""The ``kind`` of what ``run_turn`` and ``resume`` return while a turn is parked over its
budget."""

_FOLDS: weakref.WeakKeyDictionary[Agent, BudgetFold] = weakref.WeakKeyDictionary()
"""Each agent's fold of its session (an agent runs one session)."""


class BudgetParked(Parked):
    """A model request would breach the session's budget: the turn parks."""

    def __init__(self) -> None:
        super().__init__("budget")


def fold_of(agent: Agent) -> BudgetFold:
    """The agent's session's budget fold, brought up to its last event."""
    session = agent.session
    fold = _FOLDS.get(agent)
    if fold is None:
        fold = _FOLDS[agent] = BudgetFold(seed=session.header.seed_length or 0)
    if fold.seen < session.seq:  # (event by event: no snapshot of a long log)
        fold.fold(session.event_at(seq) for seq in range(fold.seen, session.seq))
    return fold


def _bound(fold: BudgetFold, limit: Any) -> dict[str, Any]:
    output = limit if type(limit) is int and limit > 0 else None
    return {"inputTokens": fold.last_input, "outputTokens": output}


def guard_request(agent: Agent, turn: int, step: int, config: Mapping[str, Any]) -> None:
    """Reserve the next request's bound (``config``: its header's, whose ``maxTokens``
    bounds its output), or park (raise :class:`BudgetParked`) when it would breach the
    budget. Nothing is written for a session without a budget."""
    session = agent.session
    fold = fold_of(agent)
    budget = fold.budget
    if budget is None:
        return
    bound = _bound(fold, config.get("maxTokens"))
    over = fold.over(bound, agent.model)
    if over:
        data: dict[str, Any] = {
            "turn": turn,
            "step": step,
            "spent": fold.spend().to_json(),
            "bound": bound,
            "limits": dict(budget.limits),
            "over": over,
        }
        session.append(BUDGET_EXCEEDED, data)
        raise BudgetParked
    where: dict[str, Any] = {
        "turn": turn,
        "step": step,
        "provider": agent.provider,
        "model": agent.model,
    }
    session.append(BUDGET_RESERVED, {**where, **bound})


def still_over(agent: Agent) -> bool:
    """Whether the parked request would still breach the budget in force now."""
    fold = fold_of(agent)
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
