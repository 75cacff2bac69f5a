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

from collections.abc import Mapping
from typing import Any

from agent_session.agent_loop.spending import reserve
from agent_session.session.errors import BudgetExceededError
from agent_session.session.live.session import Session

__all__ = ["guard_call", "usage_of"]


def guard_call(
    owner: Any, session: Session, turn: int, step: int, header: Mapping[str, Any] | None, model: str
) -> BudgetExceededError | None:
    """Reserve the bound of the model call ``owner`` (an ``EventLogSession``) is about to
    make in ``turn``/``step`` (:func:`agent_session.agent_loop.spending.reserve`), or return
    the error to raise once the ``budget/exceeded`` it appended is durable."""
    config = header.get("config") if isinstance(header, Mapping) else None
    limit = config.get("maxTokens") if isinstance(config, Mapping) else None
    over = reserve(owner, session, turn, step, ("openai-agents", model), limit)
    if not over:
        return None
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
