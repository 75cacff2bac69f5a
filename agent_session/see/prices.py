"""What a step cost, from a price table the user gives in a file (``--prices FILE`` on
``view``, ``serve`` and ``export-otel``): the table's format and rules are
:mod:`agent_session.session.events.prices`'."""

from __future__ import annotations

import json
from pathlib import Path

from agent_session.session.events.prices import PriceTable, PriceTableError, price_table

__all__ = ["PriceTable", "PriceTableError", "read_prices"]


def read_prices(path: str | Path) -> PriceTable:
    """The price table in the JSON file at ``path``.

    Raises:
        PriceTableError: The file cannot be read, is not JSON, or an entry is not a price.
    """
    try:
        table = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PriceTableError(f"price table {path}: cannot be read as JSON: {e}") from None
    return price_table(table, str(path))
