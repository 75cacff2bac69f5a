"""Prices per million tokens, and what a usage cost under them: the price table a user
gives (a file for ``view``, ``serve`` and ``export-otel``; inside a ``budget/set`` event for
a budget). Nothing is priced without one: providers change their prices, and a figure this
library made up would be wrong without anyone seeing it.

The table is a JSON object::

    {"currency": "USD",
     "models": {"claude-sonnet-4-5": {"input": 3, "output": 15, "cacheRead": 0.3},
                "gpt-4.1*": {"input": 2, "output": 8, "cacheRead": 0.5,
                             "inputIncludesCacheRead": true}}}

A model is found by its exact name, else by the longest pattern ending in ``*`` that its name
starts with. ``cacheRead`` and ``cacheWrite`` price the usage's ``cacheReadTokens`` and
``cacheWriteTokens``; where the provider's input count already holds the cached tokens
(OpenAI's does, Anthropic's does not), ``inputIncludesCacheRead`` takes them out of the input
before pricing it.

Guarantees: a bad table is refused whole (:class:`PriceTableError`, naming where and the
entry), never half-used; a usage whose model is not in the table, or no usage, has no cost
(``None``), never a cost of zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent_session.session.errors import SessionError

__all__ = ["PriceTable", "PriceTableError", "price_table"]

_PRICES = ("input", "output", "cacheRead", "cacheWrite")
_COUNTS = {"input": "inputTokens", "output": "outputTokens"} | {
    "cacheRead": "cacheReadTokens",
    "cacheWrite": "cacheWriteTokens",
}


class PriceTableError(SessionError, ValueError):
    """A price table that cannot be used: not JSON, or an entry that is not a price."""


@dataclass(frozen=True)
class PriceTable:
    """Prices per million tokens, by model name or ``prefix*`` pattern."""

    currency: str
    models: Mapping[str, Mapping[str, Any]]

    def cost(self, model: Any, usage: Any) -> float | None:
        """What ``usage`` (a ``TokenUsage``) cost on ``model``, or ``None`` when the model is
        not priced or there is no usage."""
        if not isinstance(model, str) or not isinstance(usage, Mapping):
            return None
        prices = self.models.get(model)
        if prices is None:
            patterns = [p for p in self.models if p.endswith("*") and model.startswith(p[:-1])]
            if not patterns:
                return None
            prices = self.models[max(patterns, key=len)]
        counts = {key: _count(usage.get(name)) for key, name in _COUNTS.items()}
        if prices.get("inputIncludesCacheRead"):
            counts["input"] = max(0, counts["input"] - counts["cacheRead"])
        return sum(counts[key] * float(prices.get(key, 0)) for key in _PRICES) / 1_000_000

    def to_json(self) -> dict[str, Any]:
        """The table as :func:`price_table` reads it."""
        return {"currency": self.currency, "models": {k: dict(v) for k, v in self.models.items()}}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def price_table(table: Any, where: str) -> PriceTable:
    """The price table of a JSON value (see the module docstring); ``where`` names it in
    errors.

    Raises:
        PriceTableError: It is not a table, or an entry is not a price.
    """
    if not isinstance(table, Mapping) or not isinstance(table.get("models"), Mapping):
        raise PriceTableError(f'price table {where}: must be an object with a "models" object')
    currency = table.get("currency", "USD")
    if not isinstance(currency, str) or not currency:
        raise PriceTableError(f"price table {where}: the currency must be a name, like USD")
    for model, prices in table["models"].items():
        at = f"price table {where}: model {model!r}"
        if not isinstance(prices, Mapping) or not prices:
            raise PriceTableError(f"{at}: must be an object of prices per million tokens")
        for key, value in prices.items():
            if key == "inputIncludesCacheRead":
                if not isinstance(value, bool):
                    raise PriceTableError(f"{at}: inputIncludesCacheRead must be true or false")
            elif key not in _PRICES:
                raise PriceTableError(
                    f"{at}: unknown price {key!r} (known: {', '.join(_PRICES)}, "
                    "inputIncludesCacheRead)"
                )
            elif (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise PriceTableError(f"{at}: {key} must be a number ≥ 0, not {value!r}")
    return PriceTable(currency, table["models"])
