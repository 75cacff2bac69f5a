"""What a turn's spans are attributed to beyond the conventions' usage: the agent that ran the
turn (``gen_ai.agent.name``, where the log knows it) and what a model request cost
(``gen_ai.usage.cost``, in the currency of the price table the user gave; the conventions
name no cost attribute, and this is the one cost-aware backends read)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agent_session.integrations.google_adk.mapping import PROVIDER as ADK

if TYPE_CHECKING:
    from agent_session.see.prices import PriceTable

__all__ = ["agent_name", "cost_attributes"]


def agent_name(events: Sequence[Any]) -> str | None:
    """The agent that answered in ``events`` (a turn), where the log records one: a Google
    ADK session's answers name their author, the agent, as their model."""
    for event in events:
        if event.type != "assistant/message" or not isinstance(event.data, Mapping):
            continue
        source = event.data.get("message", {}).get("source", {})
        if isinstance(source, Mapping) and source.get("provider") == ADK:
            author = source.get("model")
            return author if isinstance(author, str) and author else None
    return None


def cost_attributes(prices: PriceTable | None, model: Any, usage: Any) -> dict[str, Any]:
    """``gen_ai.usage.cost`` and its currency for one request's usage on ``model``; nothing
    without a price table or a price for the model."""
    cost = prices.cost(model, usage) if prices is not None else None
    if cost is None or prices is None:
        return {}
    return {"gen_ai.usage.cost": cost, "agent_session.cost.currency": prices.currency}
