"""The budget at the OpenAI Agents SDK's model calls (``DurableRunHooks.on_llm_start``): the
same rules as the project's own loop (:mod:`agent_session.agent_loop.spending`), on the
events :class:`~agent_session.integrations.openai_agents.session.EventLogSession` writes.

Guarantees: before a model call of a session with a budget, the call's bound is reserved
(``budget/reserved``, durable before the call), or, when the call would breach the budget,
``budget/exceeded`` is made durable and :class:`BudgetExceededError` raised out of the hook,
so the SDK never makes the call; the turn stays open (crash repair leaves it so). After a
raise (``agent-session budget raise``, or :func:`agent_session.set_budget` here), the next
``Runner.run`` on the session goes on in that turn. The response's usage is recorded on its
``assistant/message`` (``DurableRunHooks.on_llm_end``), which is what spend is summed from.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

from agent_session.session.errors import BudgetExceededError
from agent_session.session.events.budget import BudgetFold
from agent_session.session.events.types import BUDGET_EXCEEDED, BUDGET_RESERVED
from agent_session.session.live.session import Session

__all__ = ["guard_call", "usage_of"]

_FOLDS: weakref.WeakKeyDictionary[Any, tuple[Session, BudgetFold]] = weakref.WeakKeyDictionary()


def guard_call(
    owner: Any, session: Session, turn: int, step: int, header: Mapping[str, Any] | None, model: str
) -> BudgetExceededError | None:
    """Reserve the bound of the model call ``owner`` (an ``EventLogSession``) is about to
    make in ``turn``/``step``, or append ``budget/exceeded`` and return the error to raise
    once it is durable. Nothing is written without a budget."""
    held = _FOLDS.get(owner)
    if held is None or held[0] is not session:
        held = _FOLDS[owner] = (session, BudgetFold(seed=session.header.seed_length or 0))
    fold = held[1]
    events = session.events
    if fold.seen < len(events):
        fold.fold(events[fold.seen :])
    if fold.budget is None:
        return None
    config = header.get("config") if isinstance(header, Mapping) else None
    limit = config.get("maxTokens") if isinstance(config, Mapping) else None
    output = limit if type(limit) is int and limit > 0 else None
    bound: dict[str, Any] = {"inputTokens": fold.last_input, "outputTokens": output}
    over = fold.over(bound, model)
    where: dict[str, Any] = {"turn": turn, "step": step}
    if not over:
        session.append(
            BUDGET_RESERVED, {**where, "provider": "openai-agents", "model": model, **bound}
        )
        return None
    spent = fold.spend().to_json()
    limits = dict(fold.budget.limits)
    session.append(
        BUDGET_EXCEEDED, {**where, "spent": spent, "bound": bound, "limits": limits, "over": over}
    )
    return BudgetExceededError(
        f'session "{session.id}": the model call of turn {turn} step {step} would breach its '
        f"budget ({', '.join(over)}); it was not made and the turn is parked: raise the "
        "budget (agent-session budget raise), then run again"
    )


def usage_of(usage: Any) -> dict[str, int] | None:
    """A response's SDK ``Usage`` as a recorded usage (``None`` when it reports none)."""
    input, output = getattr(usage, "input_tokens", 0), getattr(usage, "output_tokens", 0)
    if not isinstance(input, int) or not isinstance(output, int) or (input, output) == (0, 0):
        return None
    return {"inputTokens": input, "outputTokens": output}
