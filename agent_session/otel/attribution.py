"""What a turn's spans are attributed to beyond the conventions' usage: the agent that ran the
turn (``gen_ai.agent.name``, where the log knows it) and what a model request cost
(``gen_ai.usage.cost``, in the currency of the price table the user gave; the conventions
name no cost attribute, and this is the one cost-aware backends read)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from agent_session.integrations.google_adk.mapping import PROVIDER as ADK
from agent_session.session.json.codec import encode_json

if TYPE_CHECKING:
    from agent_session.see.prices import PriceTable

__all__ = [
    "agent_name",
    "context_after",
    "cost_attributes",
    "json_text",
    "put_scalar",
    "request_attributes",
    "scalars",
]

_REQUEST: Final = {
    "temperature": "gen_ai.request.temperature",
    "maxTokens": "gen_ai.request.max_tokens",
    "stop": "gen_ai.request.stop_sequences",
}
"""The request header's config fields that are the conventions' request attributes."""
_SENT_AS: Final = {
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "seed": "gen_ai.request.seed",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
}
"""Fields an adapter sent as is (the config's ``extraBody``) that are request attributes too."""


def context_after(context: Mapping[str, Any], event: Any) -> Mapping[str, Any]:
    """The request context in force after ``event``: a ``request/context`` names the route
    (provider, model), a ``request/header`` the route and the config (``config``) the requests
    are sent with; anything else changes nothing."""
    data = event.data if isinstance(event.data, Mapping) else {}
    if event.type == "request/context":
        return {**context, **data}
    if event.type == "request/header":
        header = data.get("header")
        config = header.get("config") if isinstance(header, Mapping) else None
        if isinstance(config, Mapping):
            route = {k: config[k] for k in ("provider", "model") if k in config}
            return {**context, **route, "config": config}
    return context


def request_attributes(config: Any) -> dict[str, Any]:
    """The conventions' ``gen_ai.request.*`` attributes of a request header's config: its
    temperature, max tokens and stop sequences, and the sampling fields sent as is."""
    if not isinstance(config, Mapping):
        return {}
    out = {name: config[key] for key, name in _REQUEST.items() if key in config}
    extra = config.get("extraBody")
    if isinstance(extra, Mapping):
        out.update({name: extra[key] for key, name in _SENT_AS.items() if key in extra})
    return {k: list(v) if isinstance(v, list | tuple) else v for k, v in out.items()}


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


def put_scalar(attributes: dict[str, Any], key: str, value: Any) -> None:
    """Set ``attributes[key]`` when ``value`` is a scalar an attribute can hold."""
    if isinstance(value, str | int | float | bool):
        attributes[key] = value


def scalars(data: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The scalar members of an event's data as span-event attributes."""
    return {f"{prefix}.{k}": v for k, v in data.items() if isinstance(v, str | int | float | bool)}


def json_text(value: Any) -> str:
    """``value`` as compact JSON text."""
    return encode_json(value).decode()
